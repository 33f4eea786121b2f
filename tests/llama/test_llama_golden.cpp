// The llama plugin end to end on every Llama / Qwen2 / Mistral fixture (made by transformers with
// tools/fixtures/make_llama_fixtures.py): the prompt's every-stage float32 trace within the strict
// and semantic gates of configs/<fixture>.yaml, argmax at every position, greedy generation equal
// to transformers' for the full length, KV-cache decode equal to full re-prefills; and, where a
// CUDA device and a transformers bf16 golden exist, the CUDA bf16 logits against that golden.
#include "qwen3/decoder_golden_checks.hpp"

#include <limits>
#include <set>
#include <span>

#include "test_skip.hpp"
#include "zoo/compare.hpp"
#include "zoo/generation.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/request.hpp"
#include "zoo/trace.hpp"
#include "zoo/weight_source.hpp"
#if defined(ZOO_WITH_CUDA)
#include "qwen3/cuda_golden_checks.hpp"
#include "zoo/kernels/cuda/common.hpp"
#endif

namespace zoo::ptest {
namespace {

// llama-tiny: llama3 RoPE (all three bands), flat config layout, untied; llama-tiny-hd128: llama3,
// rope_parameters layout, tied, head_dim 128; qwen2-tiny: q/k/v biases, tied; mistral-tiny: no
// head_dim key, sliding_window null, untied. All without q/k norm.
const char* const kFixtures[] = {"llama-tiny", "llama-tiny-hd128", "qwen2-tiny", "mistral-tiny"};

fs::path config_of(const std::string& name) { return fs::path(ZOO_SOURCE_DIR) / "configs" / (name + ".yaml"); }

struct Fixture {
  fs::path dir;
  OpenedModel opened;
  Prompt prompt;

  explicit Fixture(const std::string& name) : dir(fixture_dir(name)), opened(open_fixture(dir)) {
    // config.json's model_type (llama, qwen2, mistral) picks the plugin.
    REQUIRE(opened.model->info().plugin == "llama");
    prompt = opened.model->prepare(load_request(dir / "request.json"));
  }
};

NamedTensors named_views(const SafetensorsFile& file) {
  NamedTensors out;
  for (const auto& entry : file.entries()) out.emplace_back(entry.name, file.view(entry));
  return out;
}

void check_golden_trace(const std::string& name) {
  INFO("fixture " << name);
  Fixture f(name);
  const auto golden_file = SafetensorsFile::open(f.dir / "golden.safetensors");
  const TraceFile golden(f.dir / "golden.safetensors");
  REQUIRE(golden.ids("input_ids") == f.prompt.ids);

  TraceRecorder recorder(PointSelection({"*"}));
  auto session = f.opened.model->new_session();
  const ForwardResult out = session->forward(f.prompt.step(), &recorder);
  const auto T = static_cast<std::int64_t>(f.prompt.ids.size());
  CHECK(session->position() == T);

  // The same tap points as transformers: every stage of every layer, and no q_norm/k_norm (these
  // models have none; the golden has none).
  std::set<std::string> expected, recorded;
  for (const auto& n : golden.names())
    if (n != "input_ids") expected.insert(n);
  for (const auto& [n, t] : recorder.tensors()) recorded.insert(n);
  for (const auto& n : expected) {
    INFO("golden tensor " << n);
    CHECK(recorded.count(n) == 1);
  }
  for (const auto& n : recorded) {
    INFO("recorded tensor " << n << " is not in the transformers golden");
    CHECK(expected.count(n) == 1);
  }
  // embed, final_norm, logits and 15 stages per layer (DESIGN.md's 17 less q_norm, k_norm).
  CHECK(expected.size() == 3 + 15 * static_cast<std::size_t>(f.opened.model->info().num_layers));

  // The shipped config's gates (semantic and strict), evaluated by the same code as `zoo validate`.
  NamedTensors actual;
  actual.emplace_back("input_ids", TensorView{f.prompt.ids.data(), DType::I64, {T}, Device{}});
  for (const auto& [n, t] : recorder.tensors()) actual.emplace_back(n, t.view());
  const auto gates = load_gates(config_of(name));
  const CompareReport report = compare_trace_tensors(named_views(*golden_file), actual, gates);
  INFO(report.table());
  CHECK(report.evaluated());
  CHECK(report.passed());

  // Argmax at every position, spelled out (the semantic gate has it too).
  const HostTensor expected_logits = golden.get("logits");
  const HostTensor* traced = recorder.find("logits");
  REQUIRE(traced != nullptr);
  const TensorMetrics m = compare_tensors("logits", expected_logits.view(), traced->view(), 0, true);
  REQUIRE(m.shape_match);
  CHECK(m.rows == T);
  CHECK(m.argmax_matches == m.rows);
  CHECK(m.first_argmax_mismatch == -1);

  check_returned_row_is_last_traced(*traced, out, T);
}

void check_generation(const std::string& name) {
  INFO("fixture " << name);
  Fixture f(name);
  check_generation_matches_golden(*f.opened.model, f.prompt, f.dir);
}

// Every golden token is decoded (the qwen3 fixtures stop at 6).
void check_kv_cache(const std::string& name) {
  INFO("fixture " << name);
  Fixture f(name);
  check_kv_cache_matches_prefill(*f.opened.model, f.prompt, f.dir, std::numeric_limits<std::size_t>::max());
}

}  // namespace

TEST_CASE("llama golden trace within the config's gates: llama-tiny", "[llama]") { check_golden_trace(kFixtures[0]); }
TEST_CASE("llama golden trace within the config's gates: llama-tiny-hd128", "[llama]") {
  check_golden_trace(kFixtures[1]);
}
TEST_CASE("llama golden trace within the config's gates: qwen2-tiny", "[llama]") { check_golden_trace(kFixtures[2]); }
TEST_CASE("llama golden trace within the config's gates: mistral-tiny", "[llama]") { check_golden_trace(kFixtures[3]); }

TEST_CASE("llama greedy generation matches transformers: llama-tiny", "[llama]") { check_generation(kFixtures[0]); }
TEST_CASE("llama greedy generation matches transformers: llama-tiny-hd128", "[llama]") {
  check_generation(kFixtures[1]);
}
TEST_CASE("llama greedy generation matches transformers: qwen2-tiny", "[llama]") { check_generation(kFixtures[2]); }
TEST_CASE("llama greedy generation matches transformers: mistral-tiny", "[llama]") { check_generation(kFixtures[3]); }

TEST_CASE("llama KV-cache decode equals a full prefill: llama-tiny", "[llama]") { check_kv_cache(kFixtures[0]); }
TEST_CASE("llama KV-cache decode equals a full prefill: llama-tiny-hd128", "[llama]") { check_kv_cache(kFixtures[1]); }
TEST_CASE("llama KV-cache decode equals a full prefill: qwen2-tiny", "[llama]") { check_kv_cache(kFixtures[2]); }
TEST_CASE("llama KV-cache decode equals a full prefill: mistral-tiny", "[llama]") { check_kv_cache(kFixtures[3]); }

// The shipped YAMLs are how users run the fixtures: each opens with the llama plugin.
TEST_CASE("llama configs/*-tiny.yaml open with the llama plugin", "[llama]") {
  for (const char* name : kFixtures) {
    INFO("config " << config_of(name).string());
    auto opened = open_model(load_model_spec(config_of(name)), registry());
    INFO(opened.plan.table());
    REQUIRE(opened.plan.ok());
    CHECK(opened.model->info().plugin == "llama");
    REQUIRE(opened.spec.validation.has_value());
    CHECK(fs::equivalent(opened.spec.validation->golden, fixture_dir(name) / "golden.safetensors"));
  }
}

// CUDA (bf16) against transformers' bf16 golden made on the GPU host
// (tools/fixtures/make_llama_fixtures.py --device cuda --dtype bfloat16).
TEST_CASE("llama fixtures on CUDA match their transformers bf16 golden", "[llama][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  int checked = 0;
  for (const char* name : kFixtures) {
    const fs::path dir = fixture_dir(name);
    const fs::path golden_path = dir / "golden-bf16.safetensors";
    if (!fs::exists(golden_path)) continue;  // made on the GPU host; see tests/fixtures/README.md
    INFO("fixture " << name);
    check_cuda_bf16_golden(dir, "llama");
    ++checked;
  }
  if (checked == 0) ZOO_SKIP("no golden-bf16.safetensors in the llama fixtures (made on the GPU host)");
#endif
}

}  // namespace zoo::ptest
