// The two ways a checkpoint stores a mixture of experts (ExpertLayout): one gate/up/down module per
// expert, and transformers 5's fused mlp.experts.gate_up_proj [E, 2I, H] + down_proj [E, H, I].
// The fixtures are written by transformers' own save_pretrained, both settings of
// save_original_format, from one model (tools/fixtures/make_moe_layout_fixtures.py): each within the
// strict CPU gates of the family's tiny fixture (configs/<family>-tiny.yaml), greedy ids and
// KV-cache decode as transformers'; the two layouts give bitwise the same logits; a checkpoint
// holding both layouts, neither, a fused tensor of the wrong shape or no down_proj is refused
// naming the tensor.
#include "qwen3/decoder_golden_checks.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include "test_skip.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/compare.hpp"
#include "zoo/gates.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/request.hpp"
#include "zoo/synth_checkpoint.hpp"
#include "zoo/trace.hpp"
#if defined(ZOO_WITH_CUDA)
#include "qwen3/cuda_golden_checks.hpp"
#include "zoo/kernels/cuda/common.hpp"
#endif

namespace zoo::ptest::moe_layouts {
namespace {

struct LayoutFixture {
  const char* name;
  const char* plugin;
  const char* gates;  // configs/<gates>.yaml: the family's tiny fixture's gates
  bool fused;
  std::size_t stages;  // per layer: Qwen3-MoE pre norms + q/k norm (17), Qwen2-MoE pre norms (15)
};

const LayoutFixture kFixtures[] = {
    {"qwen3-moe-per-expert", "qwen3_moe", "qwen3-moe-tiny", false, 17},
    {"qwen3-moe-fused", "qwen3_moe", "qwen3-moe-tiny", true, 17},
    {"qwen3-moe-fused-sharded", "qwen3_moe", "qwen3-moe-tiny", true, 17},
    {"qwen2-moe-per-expert", "qwen2_moe", "qwen2-moe-tiny", false, 15},
    {"qwen2-moe-fused", "qwen2_moe", "qwen2-moe-tiny", true, 15},
};

fs::path gates_of(const LayoutFixture& fx) {
  return fs::path(ZOO_SOURCE_DIR) / "configs" / (std::string(fx.gates) + ".yaml");
}

NamedTensors views_of(const SafetensorsFile& file) {
  NamedTensors out;
  for (const auto& entry : file.entries()) out.emplace_back(entry.name, file.view(entry));
  return out;
}

// Every tap of the fixture's prompt, with input_ids first.
struct Traced {
  std::vector<std::int64_t> ids;
  std::unique_ptr<TraceRecorder> recorder = std::make_unique<TraceRecorder>(PointSelection({"*"}));
  NamedTensors named() const {
    NamedTensors out;
    out.emplace_back("input_ids",
                     TensorView{ids.data(), DType::I64, {static_cast<std::int64_t>(ids.size())}, Device{}});
    for (const auto& [n, t] : recorder->tensors()) out.emplace_back(n, t.view());
    return out;
  }
};

Traced trace_prompt(OpenedModel& opened, const fs::path& dir) {
  Traced out;
  const Prompt prompt = opened.model->prepare(load_request(dir / "request.json"));
  out.ids = prompt.ids;
  opened.model->new_session()->forward(prompt.step(), out.recorder.get());
  return out;
}

// The fused tensors of every layer (fused layout) or expert 0's gate_proj (per expert) are in the
// load plan, with the stored shapes.
void check_plan_layout(const LayoutFixture& fx, const OpenedModel& opened) {
  std::set<std::string> names;
  for (const auto& e : opened.plan.entries) names.insert(e.requirement.name);
  for (int l = 0; l < 2; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".mlp.experts.";
    CHECK(names.contains(prefix + "gate_up_proj") == fx.fused);
    CHECK(names.contains(prefix + "down_proj") == fx.fused);
    CHECK(names.contains(prefix + "0.gate_proj.weight") == !fx.fused);
  }
  CHECK(opened.plan.unused.empty());
  CHECK_THAT(opened.model->info().summary,
             Catch::Matchers::Contains(
                 fx.fused ? "experts stored fused (mlp.experts.gate_up_proj, mlp.experts.down_proj)"
                          : "experts stored per expert"));
}

// A checkpoint directory made in the test from a fixture's config and chosen tensors.
class MadeCheckpoint {
 public:
  MadeCheckpoint(const std::string& config_from, const NamedTensors& tensors) {
    fs::copy_file(fixture_dir(config_from) / "config.json", dir_ / "config.json");
    write_safetensors(dir_ / "model.safetensors", tensors, {{"format", "pt"}});
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

NamedTensors tensors_of(const SafetensorsFile& file, const std::function<bool(const std::string&)>& keep) {
  NamedTensors out;
  for (auto& [name, view] : views_of(file))
    if (keep(name)) out.emplace_back(name, view);
  return out;
}

// Opening `dir` gives a load plan with one problem, whose table row names `tensor` with `note`,
// and loading is refused.
void check_plan_refuses(const fs::path& dir, const std::string& tensor, const std::string& note) {
  ModelSpec spec;
  spec.file = dir / "config.json";
  spec.checkpoint = dir;
  spec.device = Device{};
  spec.dtype = DType::F32;
  OpenedModel opened = open_model(std::move(spec), registry());
  const std::string table = opened.plan.table();
  INFO(table);
  CHECK(opened.plan.problem_count() == 1);
  const auto row = std::find_if(opened.plan.entries.begin(), opened.plan.entries.end(),
                                [&](const PlanEntry& e) { return e.status != PlanEntry::Status::Ok; });
  REQUIRE(row != opened.plan.entries.end());
  CHECK(row->requirement.name == tensor);
  CHECK_THAT(table, Catch::Matchers::Contains(tensor) && Catch::Matchers::Contains(note));
  CHECK_THROWS_WITH(load_model(opened, false), Catch::Matchers::Contains("load plan has 1 problem(s)"));
}

}  // namespace

TEST_CASE("MoE layouts: save_pretrained's checkpoints within the strict CPU gates", "[families][moe]") {
  for (const auto& fx : kFixtures) {
    INFO("fixture " << fx.name);
    const fs::path dir = fixture_dir(fx.name);
    OpenedModel opened = open_fixture(dir);
    REQUIRE(opened.model->info().plugin == fx.plugin);
    check_plan_layout(fx, opened);
    const Traced traced = trace_prompt(opened, dir);
    const auto golden = SafetensorsFile::open(dir / "golden.safetensors");
    const CompareReport report =
        compare_trace_tensors(views_of(*golden), traced.named(), load_gates(gates_of(fx)));
    INFO(report.table());
    CHECK(report.evaluated());
    CHECK(report.passed());
    // Every tap transformers has, the router's among them, and no other.
    std::set<std::string> expected, recorded;
    for (const auto& entry : golden->entries()) expected.insert(entry.name);
    for (const auto& [n, t] : traced.named()) recorded.insert(n);
    CHECK(expected == recorded);
    CHECK(expected.size() == 4 + fx.stages * static_cast<std::size_t>(opened.model->info().num_layers));
  }
}

TEST_CASE("MoE layouts: greedy generation and KV-cache decode as transformers", "[families][moe]") {
  for (const auto& fx : kFixtures) {
    INFO("fixture " << fx.name);
    const fs::path dir = fixture_dir(fx.name);
    OpenedModel opened = open_fixture(dir);
    const Prompt prompt = opened.model->prepare(load_request(dir / "request.json"));
    check_generation_matches_golden(*opened.model, prompt, dir);
    check_kv_cache_matches_prefill(*opened.model, prompt, dir, std::numeric_limits<std::size_t>::max());
  }
}

TEST_CASE("MoE layouts: per expert, fused and sharded give bitwise the same taps on the CPU",
          "[families][moe]") {
  for (const auto& [reference, others] :
       {std::pair{"qwen3-moe-per-expert",
                  std::vector<const char*>{"qwen3-moe-fused", "qwen3-moe-fused-sharded"}},
        std::pair{"qwen2-moe-per-expert", std::vector<const char*>{"qwen2-moe-fused"}}}) {
    OpenedModel base = open_fixture(fixture_dir(reference));
    const Traced want = trace_prompt(base, fixture_dir(reference));
    for (const char* other : others) {
      INFO(reference << " against " << other);
      OpenedModel opened = open_fixture(fixture_dir(other));
      const Traced got = trace_prompt(opened, fixture_dir(other));
      const NamedTensors a = want.named(), b = got.named();
      REQUIRE(a.size() == b.size());
      int logits = 0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        INFO("tap " << a[i].first);
        REQUIRE(a[i].first == b[i].first);
        REQUIRE(a[i].second.shape == b[i].second.shape);
        REQUIRE(a[i].second.dtype == b[i].second.dtype);
        CHECK(std::memcmp(a[i].second.data, b[i].second.data, a[i].second.nbytes()) == 0);
        logits += a[i].first == "logits" ? 1 : 0;
      }
      CHECK(logits == 1);
    }
  }
}

TEST_CASE(
    "MoE layouts: both layouts, neither, a fused tensor of the wrong shape and a missing down_proj are "
    "refused",
    "[families][moe]") {
  const auto fused = SafetensorsFile::open(fixture_dir("qwen3-moe-fused") / "model.safetensors");
  const auto per_expert = SafetensorsFile::open(fixture_dir("qwen3-moe-per-expert") / "model.safetensors");
  const auto all = [](const std::string&) { return true; };

  SECTION("both layouts in one layer") {
    NamedTensors both = tensors_of(*fused, all);
    for (auto& t : tensors_of(
             *per_expert, [](const std::string& n) { return n.starts_with("model.layers.1.mlp.experts."); }))
      both.push_back(t);
    MadeCheckpoint made("qwen3-moe-fused", both);
    ModelSpec spec;
    spec.checkpoint = made.path();
    spec.file = made.path() / "config.json";
    CHECK_THROWS_WITH(open_model(std::move(spec), registry()),
                      Catch::Matchers::Contains("layer 1 stores its experts in two layouts") &&
                          Catch::Matchers::Contains("model.layers.1.mlp.experts.gate_up_proj") &&
                          Catch::Matchers::Contains("model.layers.1.mlp.experts.0.gate_proj.weight"));
  }
  SECTION("no experts in a layer") {
    MadeCheckpoint made("qwen3-moe-fused", tensors_of(*fused, [&](const std::string& n) {
                          return !n.starts_with("model.layers.0.mlp.experts.");
                        }));
    ModelSpec spec;
    spec.checkpoint = made.path();
    spec.file = made.path() / "config.json";
    CHECK_THROWS_WITH(open_model(std::move(spec), registry()),
                      Catch::Matchers::Contains("layer 0 has no expert weights") &&
                          Catch::Matchers::Contains("model.layers.0.mlp.experts.gate_up_proj") &&
                          Catch::Matchers::Contains("model.layers.0.mlp.experts.0.gate_proj.weight"));
  }
  SECTION("a fused gate_up_proj of the wrong shape") {
    // Only the gate half of layer 1's experts: [4, 32, 64] where [4, 64, 64] belongs.
    NamedTensors tensors = tensors_of(*fused, all);
    for (auto& [name, view] : tensors)
      if (name == "model.layers.1.mlp.experts.gate_up_proj") view.shape = {4, 32, 64};
    MadeCheckpoint made("qwen3-moe-fused", tensors);
    check_plan_refuses(made.path(), "model.layers.1.mlp.experts.gate_up_proj", "[4, 32, 64]");
    check_plan_refuses(made.path(), "model.layers.1.mlp.experts.gate_up_proj", "expected [4, 64, 64]");
  }
  SECTION("a fused layer without its down_proj") {
    MadeCheckpoint made("qwen3-moe-fused", tensors_of(*fused, [](const std::string& n) {
                          return n != "model.layers.0.mlp.experts.down_proj";
                        }));
    check_plan_refuses(made.path(), "model.layers.0.mlp.experts.down_proj", "need [4, 64, 32]");
  }
  SECTION("a wrong-shaped slice is refused by the view too, when a caller skips the plan") {
    NamedTensors tensors = tensors_of(*fused, all);
    for (auto& [name, view] : tensors)
      if (name == "model.layers.1.mlp.experts.down_proj") view.shape = {4, 32, 64};
    MadeCheckpoint made("qwen3-moe-fused", tensors);
    ModelArgs args;
    args.config = load_hf_config(made.path());
    args.weights = open_checkpoint(made.path());
    auto model = registry().create_model("qwen3_moe", args);
    CHECK_THROWS_WITH(model->load(), Catch::Matchers::Contains("model.layers.1.mlp.experts.down_proj") &&
                                         Catch::Matchers::Contains("[4, 32, 64], expected [4, 64, 32]"));
  }
}

// `zoo synth` lists a model's requirements over a source with no tensors yet: the experts keep the
// spec's layout (one module per expert) instead of being refused as absent.
TEST_CASE("MoE layouts: an empty weight source (zoo synth) lists one module per expert", "[families][moe]") {
  ModelArgs args;
  args.config = load_hf_config(fixture_dir("qwen3-moe-fused"));
  args.weights = empty_weight_source();
  auto model = registry().create_model("qwen3_moe", args);
  int per_expert = 0, fused = 0;
  for (const auto& t : required_tensors(*model, 0.02f)) {
    per_expert += t.stored.ends_with(".mlp.experts.3.down_proj.weight") ? 1 : 0;
    fused += t.stored.ends_with("gate_up_proj") ? 1 : 0;
  }
  CHECK(per_expert == 2);
  CHECK(fused == 0);
  CHECK_THAT(model->info().summary, Catch::Matchers::Contains("experts stored per expert"));
}

// CUDA (bf16): the device layout stacks each expert's gate|up rows as the fused tensor does, so the
// two checkpoints upload to the same bytes and give bitwise the same steps, prefill and decode; and
// the fused checkpoint against transformers' bf16 golden where the GPU host has made one.
TEST_CASE("MoE layouts on CUDA: per expert and fused give the same steps", "[families][moe][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto run = [](const char* name) {
    const fs::path dir = fixture_dir(name);
    auto model = registry().create_model("qwen3_moe", cuda_test::cuda_bf16_args(dir));
    model->load();
    const Prompt prompt = model->prepare(load_request(dir / "request.json"));
    auto session = model->new_session();
    std::vector<std::vector<float> > logits;
    std::vector<std::int64_t> next;
    for (int step = 0; step < 5; ++step) {
      const ForwardStep in = step == 0 ? prompt.step() : ForwardStep{next, {}, {}, {}, {}};
      const ForwardResult r = session->forward(in, nullptr);
      const auto l = r.logits.span<float>();
      logits.emplace_back(l.begin(), l.end());
      next = {static_cast<std::int64_t>(std::max_element(l.begin(), l.end()) - l.begin())};
    }
    return logits;
  };
  CHECK(run("qwen3-moe-per-expert") == run("qwen3-moe-fused"));
  CHECK(run("qwen3-moe-fused") == run("qwen3-moe-fused-sharded"));
  if (fs::exists(fixture_dir("qwen3-moe-fused") / "golden-bf16.safetensors"))
    check_cuda_bf16_golden(fixture_dir("qwen3-moe-fused"), "qwen3_moe");
#endif
}

}  // namespace zoo::ptest::moe_layouts
