// The qwen3 plugin end to end on every Qwen3 fixture: the prompt's trace against transformers'
// golden, greedy generation against transformers' generated_ids, KV-cache decode against full
// re-prefills, and a forward pass without a hook against one with a hook.
#include "qwen3/decoder_golden_checks.hpp"

#include <string_view>

#include "zoo/compare.hpp"
#include "zoo/generation.hpp"
#include "zoo/request.hpp"
#include "zoo/trace.hpp"

namespace zoo::ptest {
namespace {

const char* const kQwen3Fixtures[] = {"qwen3-tiny", "qwen3-tiny-f32-untied", "qwen3-tiny-sharded", "qwen3-tiny-hd64"};

struct Fixture {
  fs::path dir;
  OpenedModel opened;
  Prompt prompt;

  explicit Fixture(const std::string& name) : dir(fixture_dir(name)), opened(open_fixture(dir)) {
    REQUIRE(opened.model->info().plugin == "qwen3");
    prompt = opened.model->prepare(load_request(dir / "request.json"));
  }
};

void check_golden_trace(const std::string& name) {
  INFO("fixture " << name);
  Fixture f(name);
  const TraceFile golden(f.dir / "golden.safetensors");
  const auto golden_ids = golden.ids("input_ids");
  REQUIRE(golden_ids == f.prompt.ids);

  TraceRecorder recorder(PointSelection({"*"}));
  auto session = f.opened.model->new_session();
  const ForwardResult out = session->forward(f.prompt.step(), &recorder);
  const auto T = static_cast<std::int64_t>(f.prompt.ids.size());
  CHECK(session->position() == T);

  // Every golden tap point (all stages of all layers) must be recorded, with the golden's shape.
  std::size_t layer_outputs = 0;
  bool saw_logits = false;
  for (const auto& tensor : golden.names()) {
    if (tensor == "input_ids") continue;  // the CLI records the request's ids, not the model
    INFO("tensor " << tensor);
    const HostTensor* actual = recorder.find(tensor);
    REQUIRE(actual != nullptr);
    const HostTensor expected = golden.get(tensor);
    const TensorMetrics m = compare_tensors(tensor, expected.view(), actual->view());
    REQUIRE(m.shape_match);
    CHECK(m.shape[0] == T);
    const bool is_layer_output = tensor.starts_with("layer.") && tensor.ends_with(".output");
    if (tensor == "logits" || is_layer_output) {
      CHECK(m.cosine >= 0.99999);
    } else {
      CHECK(m.cosine >= 0.9999);  // every intermediate stage, looser: some are tiny-norm tensors
    }
    if (tensor == "logits") {
      saw_logits = true;
      REQUIRE(m.has_rows);
      CHECK(m.rows == T);
      CHECK(m.argmax_matches == m.rows);
      CHECK(m.first_argmax_mismatch == -1);
    }
    layer_outputs += is_layer_output;
  }
  CHECK(saw_logits);
  CHECK(layer_outputs == static_cast<std::size_t>(f.opened.model->info().num_layers));

  const HostTensor* traced = recorder.find("logits");
  REQUIRE(traced != nullptr);
  check_returned_row_is_last_traced(*traced, out, T);
}

void check_generation(const std::string& name) {
  INFO("fixture " << name);
  Fixture f(name);
  check_generation_matches_golden(*f.opened.model, f.prompt, f.dir);
}

void check_kv_cache(const std::string& name) {
  INFO("fixture " << name);
  Fixture f(name);
  check_kv_cache_matches_prefill(*f.opened.model, f.prompt, f.dir, 6);
}

void check_hook_changes_nothing(const std::string& name) {
  INFO("fixture " << name);
  Fixture f(name);
  for (const bool all_positions : {true, false}) {
    INFO("all_positions " << all_positions);
    const OutputRequest outputs{.hidden = true, .logits = true, .all_positions = all_positions};
    auto plain_session = f.opened.model->new_session();
    const ForwardResult plain = plain_session->forward(f.prompt.step(outputs), nullptr);
    TraceRecorder recorder(PointSelection({"*"}));
    auto hooked_session = f.opened.model->new_session();
    const ForwardResult hooked = hooked_session->forward(f.prompt.step(outputs), &recorder);
    REQUIRE_FALSE(recorder.tensors().empty());
    REQUIRE(plain.logits.shape() == hooked.logits.shape());
    REQUIRE(plain.hidden.shape() == hooked.hidden.shape());
    CHECK(max_abs_diff(plain.logits, hooked.logits) == 0.0);
    CHECK(max_abs_diff(plain.hidden, hooked.hidden) == 0.0);
    const auto rows = all_positions ? static_cast<std::int64_t>(f.prompt.ids.size()) : 1;
    CHECK(plain.logits.shape()[0] == rows);
    CHECK(plain.hidden.shape() == Shape{rows, f.opened.model->info().hidden_size});
  }
}

}  // namespace

TEST_CASE("qwen3 golden trace: qwen3-tiny", "[qwen3]") { check_golden_trace(kQwen3Fixtures[0]); }
TEST_CASE("qwen3 golden trace: qwen3-tiny-f32-untied", "[qwen3]") { check_golden_trace(kQwen3Fixtures[1]); }
TEST_CASE("qwen3 golden trace: qwen3-tiny-sharded", "[qwen3]") { check_golden_trace(kQwen3Fixtures[2]); }
TEST_CASE("qwen3 golden trace: qwen3-tiny-hd64", "[qwen3]") { check_golden_trace(kQwen3Fixtures[3]); }

TEST_CASE("qwen3 greedy generation matches transformers: qwen3-tiny", "[qwen3]") { check_generation(kQwen3Fixtures[0]); }
TEST_CASE("qwen3 greedy generation matches transformers: qwen3-tiny-f32-untied", "[qwen3]") {
  check_generation(kQwen3Fixtures[1]);
}
TEST_CASE("qwen3 greedy generation matches transformers: qwen3-tiny-sharded", "[qwen3]") {
  check_generation(kQwen3Fixtures[2]);
}

TEST_CASE("qwen3 KV-cache decode equals a full prefill: qwen3-tiny", "[qwen3]") { check_kv_cache(kQwen3Fixtures[0]); }
TEST_CASE("qwen3 greedy generation matches transformers: qwen3-tiny-hd64", "[qwen3]") {
  check_generation(kQwen3Fixtures[3]);
}
TEST_CASE("qwen3 KV-cache decode equals a full prefill: qwen3-tiny-f32-untied", "[qwen3]") {
  check_kv_cache(kQwen3Fixtures[1]);
}
TEST_CASE("qwen3 KV-cache decode equals a full prefill: qwen3-tiny-sharded", "[qwen3]") {
  check_kv_cache(kQwen3Fixtures[2]);
}

TEST_CASE("qwen3 forward with and without a hook gives identical outputs", "[qwen3]") {
  for (const char* name : kQwen3Fixtures) check_hook_changes_nothing(name);
}

// The shipped YAML is how users run the fixture: it must give the golden's logits too.
TEST_CASE("qwen3 through configs/qwen3-tiny.yaml matches the golden logits", "[qwen3]") {
  auto opened = open_model(load_model_spec(fs::path(ZOO_SOURCE_DIR) / "configs" / "qwen3-tiny.yaml"), registry());
  REQUIRE(opened.plan.ok());
  load_model(opened, false);
  REQUIRE(opened.spec.validation.has_value());
  const Prompt prompt = opened.model->prepare(load_request(opened.spec.validation->request));
  TraceRecorder recorder(PointSelection({"logits"}));
  auto session = opened.model->new_session();
  session->forward(prompt.step(), &recorder);
  REQUIRE(recorder.tensors().size() == 1);
  const HostTensor golden = TraceFile(opened.spec.validation->golden).get("logits");
  const TensorMetrics m = compare_tensors("logits", golden.view(), recorder.tensors()[0].second.view());
  CHECK(m.cosine >= 0.99999);
  CHECK(m.argmax_matches == m.rows);
}

TEST_CASE("qwen3 session rejects token ids outside the vocabulary", "[qwen3]") {
  Fixture f("qwen3-tiny");
  const auto V = f.opened.model->info().vocab_size;
  for (const std::int64_t bad : {V, V + 1000, std::int64_t{-1}}) {
    INFO("id " << bad);
    auto session = f.opened.model->new_session();
    const std::vector<std::int64_t> ids{1, bad};
    const std::string message = input_error_of([&] { session->forward(ForwardStep{ids, {}, {}, OutputRequest{}}); });
    CHECK_THAT(message, Catch::Matchers::Contains(std::to_string(bad)));
    CHECK_THAT(message, Catch::Matchers::Contains("vocab"));
  }
}

}  // namespace zoo::ptest
