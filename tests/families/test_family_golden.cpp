// The families that need LayerSpec values of their own (plugins gemma, phi3, olmo2, qwen3_moe;
// Mistral's sliding window in llama), end to end on fixtures made by their transformers classes
// (tools/fixtures/make_family_fixtures.py): every stage the family has within the strict and
// semantic gates of configs/<fixture>.yaml, the same stage list as transformers', greedy generation
// equal for the full length, KV-cache decode (past the sliding windows) equal to full prefills.
// And the features matter: the same fixture with its window, soft-caps or partial rotary turned
// off in config.json must fail its gates, so a backend that ignored them could not pass.
#include "qwen3/decoder_golden_checks.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include "scoped_env.hpp"
#include "test_skip.hpp"
#include "zoo/compare.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/request.hpp"
#include "zoo/trace.hpp"
#if defined(ZOO_WITH_CUDA)
#include "qwen3/cuda_golden_checks.hpp"
#include "zoo/kernels/cuda/common.hpp"
#endif

namespace zoo::ptest {
namespace {

struct FamilyFixture {
  const char* name;
  const char* plugin;
  std::size_t stages;  // per layer, as the family's norm placement and q/k norm give them
  bool cuda = true;    // false: the CUDA backend refuses the model by name (a test below checks that)
};

// gemma-tiny: pre norms (15 stages); gemma2-tiny: sandwich (17); gemma3-tiny: sandwich + q/k norm
// (19); phi3-tiny: pre (15); olmo2-tiny: post norms (15) + q/k norm (17); mistral-sw-tiny: 15;
// qwen3-moe-tiny: pre + q/k norm (17), its expert layers with the four router/MoE stages in place
// of the four dense MLP ones; qwen2-moe-tiny: pre (15), likewise, and a shared expert (CPU only).
const FamilyFixture kFixtures[] = {{"gemma-tiny", "gemma", 15},  {"gemma2-tiny", "gemma", 17},
                                   {"gemma3-tiny", "gemma", 19}, {"phi3-tiny", "phi3", 15},
                                   {"olmo2-tiny", "olmo2", 17},  {"mistral-sw-tiny", "llama", 15},
                                   {"qwen3-moe-tiny", "qwen3_moe", 17}, {"qwen2-moe-tiny", "qwen2_moe", 15, false}};

fs::path config_of(const std::string& name) { return fs::path(ZOO_SOURCE_DIR) / "configs" / (name + ".yaml"); }

NamedTensors named_views(const SafetensorsFile& file) {
  NamedTensors out;
  for (const auto& entry : file.entries()) out.emplace_back(entry.name, file.view(entry));
  return out;
}

// The prompt's trace of `opened` against the fixture's golden under configs/<name>.yaml's gates.
CompareReport compare_with_golden(OpenedModel& opened, const std::string& name, TraceRecorder& recorder) {
  const fs::path dir = fixture_dir(name);
  const Prompt prompt = opened.model->prepare(load_request(dir / "request.json"));
  auto session = opened.model->new_session();
  session->forward(prompt.step(), &recorder);
  const auto T = static_cast<std::int64_t>(prompt.ids.size());
  NamedTensors actual;
  actual.emplace_back("input_ids", TensorView{prompt.ids.data(), DType::I64, {T}, Device{}});
  for (const auto& [n, t] : recorder.tensors()) actual.emplace_back(n, t.view());
  const auto golden_file = SafetensorsFile::open(dir / "golden.safetensors");
  return compare_trace_tensors(named_views(*golden_file), actual, load_gates(config_of(name)));
}

void check_golden_trace(const FamilyFixture& fx) {
  INFO("fixture " << fx.name);
  OpenedModel opened = open_fixture(fixture_dir(fx.name));
  REQUIRE(opened.model->info().plugin == fx.plugin);
  TraceRecorder recorder(PointSelection({"*"}));
  const CompareReport report = compare_with_golden(opened, fx.name, recorder);
  INFO(report.table());
  CHECK(report.evaluated());
  CHECK(report.passed());

  // The same tap points as transformers, and as many as the family's layout has.
  const TraceFile golden(fixture_dir(fx.name) / "golden.safetensors");
  std::set<std::string> expected, recorded;
  for (const auto& n : golden.names())
    if (n != "input_ids") expected.insert(n);
  for (const auto& [n, t] : recorder.tensors()) recorded.insert(n);
  CHECK(expected == recorded);
  CHECK(expected.size() == 3 + fx.stages * static_cast<std::size_t>(opened.model->info().num_layers));
}

void check_generation(const FamilyFixture& fx) {
  INFO("fixture " << fx.name);
  OpenedModel opened = open_fixture(fixture_dir(fx.name));
  const Prompt prompt = opened.model->prepare(load_request(fixture_dir(fx.name) / "request.json"));
  check_generation_matches_golden(*opened.model, prompt, fixture_dir(fx.name));
}

void check_kv_cache(const FamilyFixture& fx) {
  INFO("fixture " << fx.name);
  OpenedModel opened = open_fixture(fixture_dir(fx.name));
  const Prompt prompt = opened.model->prepare(load_request(fixture_dir(fx.name) / "request.json"));
  check_kv_cache_matches_prefill(*opened.model, prompt, fixture_dir(fx.name), std::numeric_limits<std::size_t>::max());
}

// A copy of the fixture whose config.json has `patch` merged in.
class PatchedFixture {
 public:
  PatchedFixture(const std::string& name, const nlohmann::json& patch) {
    for (const auto& entry : fs::directory_iterator(fixture_dir(name))) {
      const std::string file = entry.path().filename().string();
      if (file.starts_with("model") || file == "request.json") fs::copy_file(entry.path(), dir_ / file);
    }
    nlohmann::json config = load_hf_config(fixture_dir(name));
    for (const auto& [k, v] : patch.items()) config[k] = v;
    dir_.write("config.json", config.dump(2));
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

// The fixture with `patch` applied must still open and run, and fail its gates.
void check_feature_matters(const std::string& name, const nlohmann::json& patch) {
  INFO("fixture " << name << " with " << patch.dump());
  PatchedFixture patched(name, patch);
  OpenedModel opened = open_fixture(patched.path());
  TraceRecorder recorder(PointSelection({"*"}));
  const CompareReport report = compare_with_golden(opened, name, recorder);
  INFO(report.table());
  CHECK(report.evaluated());
  CHECK_FALSE(report.passed());
}

}  // namespace

TEST_CASE("family golden traces within the configs' gates", "[families]") {
  for (const auto& fx : kFixtures) check_golden_trace(fx);
}

TEST_CASE("family greedy generation matches transformers", "[families]") {
  for (const auto& fx : kFixtures) check_generation(fx);
}

TEST_CASE("family KV-cache decode equals a full prefill, past the sliding windows", "[families]") {
  for (const auto& fx : kFixtures) check_kv_cache(fx);
}

TEST_CASE("family features matter: each switched off fails the gates", "[families]") {
  // Full attention where the window is shorter than the request.
  check_feature_matters("mistral-sw-tiny", {{"sliding_window", nullptr}});
  check_feature_matters("gemma2-tiny", {{"sliding_window", 4096}});
  check_feature_matters("phi3-tiny", {{"sliding_window", nullptr}});
  // Partial rotary run as full rotary.
  check_feature_matters("phi3-tiny", {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}});
  // Soft-capping and the query scale.
  check_feature_matters("gemma2-tiny", {{"attn_logit_softcapping", nullptr}});
  check_feature_matters("gemma2-tiny", {{"final_logit_softcapping", nullptr}});
  check_feature_matters("gemma2-tiny", {{"query_pre_attn_scalar", 64}});
  // Mixture of experts: the top-k probabilities not renormalized, one expert per token, every layer
  // sparse (layer 1 is dense).
  check_feature_matters("qwen3-moe-tiny", {{"norm_topk_prob", false}});
  check_feature_matters("qwen3-moe-tiny", {{"num_experts_per_tok", 1}});
  // The shared expert left out, and the top-k probabilities renormalized where Qwen2-MoE does not.
  check_feature_matters("qwen2-moe-tiny", {{"shared_expert_intermediate_size", 0}});
  check_feature_matters("qwen2-moe-tiny", {{"norm_topk_prob", true}});
  // Gemma 3's sliding layers with the global layers' RoPE base.
  check_feature_matters("gemma3-tiny", {{"rope_parameters",
                                         {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1000000.0}}},
                                          {"full_attention",
                                           {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1000000.0}}}}}});
}

TEST_CASE("gemma 1's legacy hidden_act \"gelu\" is the tanh form, as transformers reads it", "[families]") {
  PatchedFixture tanh("gemma-tiny", {{"hidden_act", "gelu_pytorch_tanh"}});
  OpenedModel opened = open_fixture(tanh.path());
  TraceRecorder recorder(PointSelection({"*"}));
  const CompareReport report = compare_with_golden(opened, "gemma-tiny", recorder);
  INFO(report.table());
  CHECK(report.passed());
  CHECK_THAT(opened.model->info().summary, Catch::Matchers::Contains("gelu_tanh"));
}

// CUDA (bf16) against transformers' bf16 golden made on the GPU host
// (tools/fixtures/make_family_fixtures.py --device cuda --dtype bfloat16); Phi-3's head_dim 96
// included.
TEST_CASE("family fixtures on CUDA match their transformers bf16 golden", "[families][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  int checked = 0;
  for (const auto& fx : kFixtures) {
    const fs::path dir = fixture_dir(fx.name);
    INFO("fixture " << fx.name);
    if (!fx.cuda || !fs::exists(dir / "golden-bf16.safetensors")) continue;  // made on the GPU host
    check_cuda_bf16_golden(dir, fx.plugin);
    ++checked;
  }
  if (checked == 0) ZOO_SKIP("no golden-bf16.safetensors in the family fixtures (made on the GPU host)");
#endif
}

// Without a hook the CUDA backend fuses what taps would split (a sublayer's output norm with the add
// and the next norm; gate|up with any activation in the m = 1 GEMV): a prefill and decode steps
// must give the same logits bitwise with and without a recorder, on every family.
TEST_CASE("family fixtures on CUDA: the fused step equals the tapped step, prefill and decode", "[families][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  for (const auto& fx : kFixtures) {
    const fs::path dir = fixture_dir(fx.name);
    INFO("fixture " << fx.name);
    if (!fx.cuda) {  // refused by name before any weight is read
      CHECK_THROWS_WITH(registry().create_model(fx.plugin, cuda_test::cuda_bf16_args(dir)),
                        Catch::Matchers::Contains("the CUDA backend does not compute"));
      continue;
    }
    auto model = registry().create_model(fx.plugin, cuda_test::cuda_bf16_args(dir));
    model->load();
    const Prompt prompt = model->prepare(load_request(dir / "request.json"));
    auto tapped = model->new_session(), fused = model->new_session();
    std::vector<std::int64_t> next{prompt.ids.back()};
    for (int step = 0; step < 5; ++step) {
      INFO("step " << step << (step == 0 ? " (prefill)" : " (decode)"));
      const ForwardStep in = step == 0 ? prompt.step() : ForwardStep{next, {}, {}, {}, {}};
      TraceRecorder trace(PointSelection({"*"}));
      const ForwardResult a = tapped->forward(in, &trace);
      const ForwardResult b = fused->forward(in, nullptr);
      REQUIRE(a.logits.numel() == b.logits.numel());
      const auto la = a.logits.span<float>(), lb = b.logits.span<float>();
      CHECK(std::equal(la.begin(), la.end(), lb.begin()));
      next = {static_cast<std::int64_t>(std::max_element(la.begin(), la.end()) - la.begin())};
    }
  }
#endif
}

// The experts CUDA picks (bf16 router logits, rounded as transformers' bf16 router) against the
// float32 golden's. bf16 moves router logits of this size (std ~6) by a few hundredths to tenths, so
// a choice may flip only where the golden's k-th and (k+1)-th logits are that close: each flip is
// reported with its margin, and must sit at a margin below kBf16RouterFlip. Likewise the order of
// two choices (top-k's probability order; the output does not depend on it) where their logits
// are that close. Both expert paths run: the
// prompt's first 15 rows take the grouped GEMMs, the last one the streaming kernels.
TEST_CASE("qwen3-moe-tiny on CUDA picks the experts transformers picks, prefill and decode", "[families][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  constexpr double kBf16RouterFlip = 0.25;
  const fs::path dir = fixture_dir("qwen3-moe-tiny");
  auto model = registry().create_model("qwen3_moe", cuda_test::cuda_bf16_args(dir));
  model->load();
  const Prompt prompt = model->prepare(load_request(dir / "request.json"));
  const auto golden = SafetensorsFile::open(dir / "golden.safetensors");
  const auto T = static_cast<std::int64_t>(prompt.ids.size());
  auto session = model->new_session();
  const PointSelection points({"layer.*.router_topk_ids"});
  TraceRecorder prefill(points), decode(points);
  const std::vector<std::int64_t> head(prompt.ids.begin(), prompt.ids.end() - 1), tail{prompt.ids.back()};
  session->forward(ForwardStep{head, {}, {}, {}, {}}, &prefill);
  session->forward(ForwardStep{tail, {}, {}, {}, {}}, &decode);
  int layers = 0, flips = 0;
  for (const auto& [name, first] : prefill.tensors()) {
    const auto& last = decode.tensors();
    const auto it = std::find_if(last.begin(), last.end(), [&](const auto& e) { return e.first == name; });
    REQUIRE(it != last.end());
    const SafetensorsEntry* ids_entry = golden->find(name);
    const std::string logits_name = name.substr(0, name.rfind('.')) + ".router_logits";
    const SafetensorsEntry* logits_entry = golden->find(logits_name);
    REQUIRE(ids_entry != nullptr);
    REQUIRE(logits_entry != nullptr);
    const TensorView want = golden->view(*ids_entry), logits = golden->view(*logits_entry);
    const std::int64_t k = want.shape[1], E = logits.shape[1];
    const auto* w = static_cast<const std::int64_t*>(want.data);
    for (std::int64_t r = 0; r < T; ++r) {
      const std::int64_t* got = r < T - 1 ? first.as<std::int64_t>() + r * k : it->second.as<std::int64_t>();
      std::vector<float> row(static_cast<const float*>(logits.data) + r * E, static_cast<const float*>(logits.data) + (r + 1) * E);
      std::sort(row.begin(), row.end(), std::greater<>());
      // The set decides the output (the experts are summed in id order); the order within it is
      // the probabilities', checked only between neighbours that bf16 cannot swap.
      std::vector<std::int64_t> got_set(got, got + k), want_set(w + r * k, w + (r + 1) * k);
      std::sort(got_set.begin(), got_set.end());
      std::sort(want_set.begin(), want_set.end());
      const char* path = r < T - 1 ? " (grouped path)" : " (streaming path)";
      if (got_set != want_set) {
        const double margin = row[static_cast<std::size_t>(k - 1)] - row[static_cast<std::size_t>(k)];
        WARN(name << " row " << r << path << ": a different expert set; transformers' float32 margin between its "
                  << "k-th and (k+1)-th router logits " << margin);
        CHECK(margin < kBf16RouterFlip);
        ++flips;
      }
      for (std::int64_t j = 0; j + 1 < k; ++j)
        if (row[static_cast<std::size_t>(j)] - row[static_cast<std::size_t>(j + 1)] >= kBf16RouterFlip) {
          INFO(name << " row " << r << path << ": the order of choices " << j << " and " << j + 1);
          CHECK(got[j] == w[r * k + j]);
        }
    }
    ++layers;
  }
  CHECK(layers == 2);  // layers 0 and 2; layer 1 is dense
  CHECK(flips <= 2);   // of 32 rows
#endif
}

// The many-row expert path two ways: Zoo's grouped GEMM, which reads the group sizes on the device,
// and cuBLAS's grouped GEMM with the counts read back (ZOO_MOE_CUBLAS=1, kept for A/B runs). Both
// sum each product in float32 and round once, so a prefill's logits agree to bf16 rounding and
// pick the same tokens; five decode steps follow on each.
TEST_CASE("qwen3-moe-tiny on CUDA: Zoo's grouped GEMM and cuBLAS's give the same steps", "[families][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const fs::path dir = fixture_dir("qwen3-moe-tiny");
  const auto run = [&](const char* cublas) {
    const test::ScopedEnv env("ZOO_MOE_CUBLAS", cublas);
    auto model = registry().create_model("qwen3_moe", cuda_test::cuda_bf16_args(dir));
    model->load();
    const Prompt prompt = model->prepare(load_request(dir / "request.json"));
    auto session = model->new_session();
    std::vector<std::vector<float>> logits;
    std::vector<std::int64_t> next;
    for (int step = 0; step < 6; ++step) {
      const ForwardStep in = step == 0 ? prompt.step() : ForwardStep{next, {}, {}, {}, {}};
      const ForwardResult r = session->forward(in, nullptr);
      const auto l = r.logits.span<float>();
      logits.emplace_back(l.end() - r.logits.shape().back(), l.end());
      const auto& last = logits.back();
      next = {static_cast<std::int64_t>(std::max_element(last.begin(), last.end()) - last.begin())};
    }
    return logits;
  };
  const auto zoo = run("0"), cublas = run("1");
  REQUIRE(zoo.size() == cublas.size());
  for (std::size_t step = 0; step < zoo.size(); ++step) {
    INFO("step " << step);
    const auto& a = zoo[step];
    const auto& b = cublas[step];
    REQUIRE(a.size() == b.size());
    double max_diff = 0, max_abs = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      max_diff = std::max(max_diff, static_cast<double>(std::abs(a[i] - b[i])));
      max_abs = std::max(max_abs, static_cast<double>(std::abs(b[i])));
    }
    CHECK(max_diff <= 0.02 * max_abs);
    CHECK(std::max_element(a.begin(), a.end()) - a.begin() ==
          std::max_element(b.begin(), b.end()) - b.begin());
  }
#endif
}

// A head_dim the attention kernels do not serve is refused by name when the model is made, before
// any weight is read (phi3-tiny with four heads of 48).
TEST_CASE("a head_dim the CUDA attention does not serve is refused by name", "[families][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  PatchedFixture narrow("phi3-tiny", {{"num_attention_heads", 4}, {"num_key_value_heads", 2}});
  const ModelArgs args = cuda_test::cuda_bf16_args(narrow.path());
  CHECK_THROWS_WITH(registry().create_model("phi3", args), Catch::Matchers::Contains("head_dim 48"));
#endif
}

TEST_CASE("family configs/*.yaml open with their plugin", "[families]") {
  for (const auto& fx : kFixtures) {
    INFO("config " << config_of(fx.name).string());
    auto opened = open_model(load_model_spec(config_of(fx.name)), registry());
    INFO(opened.plan.table());
    REQUIRE(opened.plan.ok());
    CHECK(opened.model->info().plugin == fx.plugin);
  }
}

}  // namespace zoo::ptest
