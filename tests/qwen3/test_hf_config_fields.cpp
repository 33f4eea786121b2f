// The shared reader's table of config.json fields (layers/src/hf_config.cpp), checked field by
// field through the real loading path: a copy of a fixture checkpoint whose config.json is
// mutated, opened with open_model (plugin picked by model_type), loaded and run on the CPU.
// A refused field must stop the model with an InputError naming config.json, the field and the
// value; an ignored one must leave the logits bit-identical and warn about nothing; an implemented
// one must change the model (logits, or the tensors it asks for).
#include "qwen3/fixture_test_util.hpp"

#include <algorithm>
#include <optional>

#include "stderr_capture.hpp"
#include "zoo/layers/hf_config.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/request.hpp"

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

struct Outcome {
  std::string error;  // the InputError, if any
  bool plan_ok = false;
  std::optional<HostTensor> logits;
  std::string log;  // what the host logged (warnings)
};

// Opens a copy of `fixture` whose config.json is `config`, and runs its request.json.
Outcome open_with(const std::string& fixture, const json& config) {
  TempDir dir;
  ModelSpec spec = fixture_with_config(dir, fixture, config);
  Outcome out;
  test::StderrCapture capture;
  try {
    OpenedModel opened = open_model(std::move(spec), registry());
    out.plan_ok = opened.plan.ok();
    if (out.plan_ok) {
      load_model(opened, false);
      const Prompt prompt = opened.model->prepare(load_request(dir / "request.json"));
      auto session = opened.model->new_session();
      out.logits = std::move(
          session->forward(prompt.step({.hidden = false, .logits = true, .all_positions = true})).logits);
    }
  } catch (const InputError& e) {
    out.error = e.what();
  }
  out.log = capture.text();
  return out;
}

json with(json config, const json& patch) {
  config.update(patch);
  return config;
}

bool same_logits(const HostTensor& a, const HostTensor& b) { return max_abs_diff(a, b) == 0.0; }

enum class Expect {
  same,          // runs, logits bit-identical to the baseline
  different,     // runs, logits differ from the baseline
  plan_problem,  // the model asks for tensors of other shapes or names: the field is read
  refused,       // InputError naming config.json, the field and the value
};

struct Row {
  std::string field;
  json patch;  // merged into the fixture's config.json (null values set null)
  Expect expect;
  std::string text = {};           // refused: the message must contain this (default "<field> <value>")
  json baseline = json::object();  // compare with fixture + baseline instead of the fixture
};

// qwen3-tiny: hidden 64, 4 heads of 16, 2 kv heads, ffn 160, 3 layers, vocab 384, tied, theta 1e6.
const std::vector<Row>& rows() {
  static const std::vector<Row> r = {
      // Implemented: read into the spec.
      {"vocab_size", {{"vocab_size", 383}}, Expect::plan_problem},
      {"hidden_size", {{"hidden_size", 32}}, Expect::plan_problem},
      {"intermediate_size", {{"intermediate_size", 128}}, Expect::plan_problem},
      {"num_hidden_layers", {{"num_hidden_layers", 2}}, Expect::different},
      {"num_attention_heads", {{"num_attention_heads", 2}}, Expect::plan_problem},
      {"num_key_value_heads", {{"num_key_value_heads", 4}}, Expect::plan_problem},
      {"head_dim", {{"head_dim", 32}}, Expect::plan_problem},
      {"rms_norm_eps", {{"rms_norm_eps", 0.5}}, Expect::different},
      {"rope_theta", {{"rope_theta", 10000.0}}, Expect::different},
      {"rope_scaling", {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}}, Expect::different},
      {"rope_scaling",
       {{"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}}},
       Expect::refused,
       "dynamic"},
      // Of another type, or disagreeing with rope_parameters, they were once silently skipped.
      {"rope_scaling", {{"rope_scaling", 5}}, Expect::refused, "rope_scaling must be an object"},
      {"rope_parameters",
       {{"rope_parameters", json::array({1})}},
       Expect::refused,
       "rope_parameters must be an object"},
      {"rope_parameters",
       {{"rope_parameters", {{"rope_type", "default"}}},
        {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}},
       Expect::refused,
       "rope_parameters and rope_scaling disagree"},
      {"rope_parameters",
       {{"rope_parameters",
         {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}}}},
       Expect::different},
      {"rope_parameters",
       {{"rope_parameters", {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}}}},
       Expect::refused,
       "rope_parameters.partial_rotary_factor 0.5"},
      {"rope_parameters",
       {{"rope_parameters", {{"rope_type", "default"}, {"partial_rotary_factor", 1.0}}}},
       Expect::same},
      // yarn without original_max_position_embeddings takes max_position_embeddings.
      {"max_position_embeddings",
       {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}, {"max_position_embeddings", 64}},
       Expect::different,
       {},
       {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}, {"max_position_embeddings", 4096}}},
      {"hidden_act", {{"hidden_act", "silu"}}, Expect::same},
      {"hidden_act", {{"hidden_act", "gelu"}}, Expect::different},
      {"hidden_act", {{"hidden_act", "gelu_pytorch_tanh"}}, Expect::different},
      // ACT2FN's gelu_new is gelu_pytorch_tanh's formula; quick_gelu is another function.
      {"hidden_act", {{"hidden_act", "gelu_new"}}, Expect::same, {}, {{"hidden_act", "gelu_pytorch_tanh"}}},
      {"hidden_act", {{"hidden_act", "quick_gelu"}}, Expect::refused, "hidden_act \"quick_gelu\""},
      {"attention_bias", {{"attention_bias", true}}, Expect::plan_problem},
      {"mlp_bias", {{"mlp_bias", true}}, Expect::plan_problem},
      {"tie_word_embeddings", {{"tie_word_embeddings", false}}, Expect::plan_problem},

      // Refused when they ask for math the runtime does not do; their "off" values run.
      {"partial_rotary_factor", {{"partial_rotary_factor", 0.5}}, Expect::refused},
      {"partial_rotary_factor", {{"partial_rotary_factor", 1.0}}, Expect::same},
      {"rotary_pct", {{"rotary_pct", 0.25}}, Expect::refused},
      {"rotary_pct", {{"rotary_pct", 1.0}}, Expect::same},
      {"rotary_dim", {{"rotary_dim", 8}}, Expect::refused},
      {"rotary_dim", {{"rotary_dim", 16}}, Expect::same},
      {"use_sliding_window", {{"use_sliding_window", true}, {"sliding_window", 4}}, Expect::refused},
      {"use_sliding_window", {{"use_sliding_window", false}}, Expect::same},
      // A window without use_sliding_window: false applies (the unswitched families' rule).
      {"sliding_window", {{"use_sliding_window", nullptr}, {"sliding_window", 4}}, Expect::refused},
      {"sliding_window", {{"use_sliding_window", false}, {"sliding_window", 4}}, Expect::same},
      {"sliding_window", {{"use_sliding_window", nullptr}, {"sliding_window", nullptr}}, Expect::same},
      {"layer_types",
       {{"layer_types", {"full_attention", "sliding_attention", "full_attention"}}},
       Expect::refused,
       "layer_types[1] \"sliding_attention\""},
      {"layer_types",
       {{"layer_types", {"full_attention", "full_attention", "full_attention"}}},
       Expect::same},
      {"attn_logit_softcapping", {{"attn_logit_softcapping", 50.0}}, Expect::refused},
      {"attn_logit_softcapping", {{"attn_logit_softcapping", nullptr}}, Expect::same},
      {"final_logit_softcapping", {{"final_logit_softcapping", 30.0}}, Expect::refused},
      {"final_logit_softcapping", {{"final_logit_softcapping", nullptr}}, Expect::same},
      {"query_pre_attn_scalar", {{"query_pre_attn_scalar", 256}}, Expect::refused},
      {"query_pre_attn_scalar", {{"query_pre_attn_scalar", 16}}, Expect::same},
      // Qwen3MLP reads hidden_act only, as the other families' but Gemma 2 and 3's.
      {"hidden_activation", {{"hidden_activation", "gelu_pytorch_tanh"}}, Expect::same},
      {"hidden_activation", {{"hidden_activation", "silu"}}, Expect::same},
      // Read by the families that have them (gemma, phi3), refused for Qwen3.
      {"rope_local_base_freq", {{"rope_local_base_freq", 10000.0}}, Expect::refused},
      {"rope_local_base_freq", {{"rope_local_base_freq", nullptr}}, Expect::same},
      {"sliding_window_pattern", {{"sliding_window_pattern", 6}}, Expect::refused},
      {"sliding_window_pattern", {{"sliding_window_pattern", nullptr}}, Expect::same},
      {"_sliding_window_pattern", {{"_sliding_window_pattern", 6}}, Expect::refused},
      {"_sliding_window_pattern", {{"_sliding_window_pattern", nullptr}}, Expect::same},
      {"original_max_position_embeddings", {{"original_max_position_embeddings", 4096}}, Expect::refused},
      {"original_max_position_embeddings", {{"original_max_position_embeddings", nullptr}}, Expect::same},
      {"use_bidirectional_attention", {{"use_bidirectional_attention", true}}, Expect::refused},
      {"use_bidirectional_attention", {{"use_bidirectional_attention", false}}, Expect::same},
      {"embedding_multiplier", {{"embedding_multiplier", 12.0}}, Expect::refused},
      {"embedding_multiplier", {{"embedding_multiplier", 1.0}}, Expect::same},
      {"residual_multiplier", {{"residual_multiplier", 0.22}}, Expect::refused},
      {"residual_multiplier", {{"residual_multiplier", 1.0}}, Expect::same},
      {"attention_multiplier", {{"attention_multiplier", 0.0078125}}, Expect::refused},
      {"attention_multiplier", {{"attention_multiplier", nullptr}}, Expect::same},
      {"logits_scaling", {{"logits_scaling", 8.0}}, Expect::refused},
      {"logits_scaling", {{"logits_scaling", 1.0}}, Expect::same},
      {"logit_scale", {{"logit_scale", 0.0625}}, Expect::refused},
      {"logit_scale", {{"logit_scale", 1.0}}, Expect::same},
      {"scale_emb", {{"scale_emb", 12}}, Expect::refused},
      {"scale_emb", {{"scale_emb", 1}}, Expect::same},
      {"scale_depth", {{"scale_depth", 1.4}}, Expect::refused},
      {"scale_depth", {{"scale_depth", nullptr}}, Expect::same},
      {"dim_model_base", {{"dim_model_base", 256}}, Expect::refused},
      {"dim_model_base", {{"dim_model_base", nullptr}}, Expect::same},
      {"clip_qkv", {{"clip_qkv", 8.0}}, Expect::refused},
      {"clip_qkv", {{"clip_qkv", nullptr}}, Expect::same},
      {"attention_chunk_size", {{"attention_chunk_size", 8192}}, Expect::refused},
      {"attention_chunk_size", {{"attention_chunk_size", nullptr}}, Expect::same},
      {"quantization_config",
       {{"quantization_config", {{"quant_method", "fp8"}}}},
       Expect::refused,
       "quantization_config"},
      {"quantization_config", {{"quantization_config", nullptr}}, Expect::same},
      // Mixture-of-experts fields: read by the families that have experts (qwen3_moe), refused here.
      {"num_experts", {{"num_experts", 8}}, Expect::refused},
      {"num_experts", {{"num_experts", nullptr}}, Expect::same},
      {"num_local_experts", {{"num_local_experts", 8}}, Expect::refused},
      {"num_local_experts", {{"num_local_experts", nullptr}}, Expect::same},
      {"num_experts_per_tok", {{"num_experts_per_tok", 2}}, Expect::refused},
      {"num_experts_per_tok", {{"num_experts_per_tok", nullptr}}, Expect::same},
      {"moe_intermediate_size", {{"moe_intermediate_size", 32}}, Expect::refused},
      {"moe_intermediate_size", {{"moe_intermediate_size", nullptr}}, Expect::same},
      {"norm_topk_prob", {{"norm_topk_prob", true}}, Expect::refused},
      {"norm_topk_prob", {{"norm_topk_prob", nullptr}}, Expect::same},
      {"decoder_sparse_step", {{"decoder_sparse_step", 1}}, Expect::refused},
      {"decoder_sparse_step", {{"decoder_sparse_step", nullptr}}, Expect::same},
      {"mlp_only_layers", {{"mlp_only_layers", {0}}}, Expect::refused},
      {"mlp_only_layers", {{"mlp_only_layers", nullptr}}, Expect::same},
      {"shared_expert_intermediate_size", {{"shared_expert_intermediate_size", 64}}, Expect::refused},
      {"shared_expert_intermediate_size", {{"shared_expert_intermediate_size", nullptr}}, Expect::same},
      {"n_shared_experts", {{"n_shared_experts", 1}}, Expect::refused},
      {"qkv_bias", {{"qkv_bias", true}}, Expect::refused},
      {"qkv_bias", {{"qkv_bias", false}}, Expect::same},
      {"n_shared_experts", {{"n_shared_experts", nullptr}}, Expect::same},

      // Ignored on purpose: metadata, training-only settings, generation defaults.
      {"architectures", {{"architectures", {"SomethingForCausalLM"}}}, Expect::same},
      {"model_type", {{"model_type", "qwen3"}}, Expect::same},
      {"transformers_version", {{"transformers_version", "4.0.0"}}, Expect::same},
      {"torch_dtype", {{"torch_dtype", "float32"}}, Expect::same},
      {"dtype", {{"dtype", "float16"}}, Expect::same},
      {"_name_or_path", {{"_name_or_path", "somewhere/else"}}, Expect::same},
      {"initializer_range", {{"initializer_range", 0.5}}, Expect::same},
      {"use_cache", {{"use_cache", false}}, Expect::same},
      {"bos_token_id", {{"bos_token_id", 1}}, Expect::same},
      {"eos_token_id", {{"eos_token_id", {2, 3}}}, Expect::same},
      {"pad_token_id", {{"pad_token_id", 0}}, Expect::same},
      {"attention_dropout", {{"attention_dropout", 0.5}}, Expect::same},
      {"resid_pdrop", {{"resid_pdrop", 0.1}}, Expect::same},
      {"embd_pdrop", {{"embd_pdrop", 0.1}}, Expect::same},
      {"max_window_layers", {{"max_window_layers", 1}}, Expect::same},
      {"pretraining_tp", {{"pretraining_tp", 2}}, Expect::same},
      {"cache_implementation", {{"cache_implementation", "hybrid"}}, Expect::same},
      {"router_aux_loss_coef", {{"router_aux_loss_coef", 0.01}}, Expect::same},
      {"output_router_logits", {{"output_router_logits", true}}, Expect::same},
  };
  return r;
}

const char* expect_name(Expect e) {
  switch (e) {
    case Expect::same: return "same logits";
    case Expect::different: return "different logits";
    case Expect::plan_problem: return "plan problem";
    case Expect::refused: return "refused";
  }
  return "?";
}

}  // namespace

TEST_CASE("hf config fields: each is implemented, refused or ignored, through open_model", "[qwen3][hf_config]") {
  const json base = load_hf_config(fixture_dir("qwen3-tiny"));
  const Outcome fixture = open_with("qwen3-tiny", base);
  REQUIRE(fixture.error.empty());
  REQUIRE(fixture.logits);
  CHECK(fixture.log.empty());
  for (const Row& row : rows()) {
    const json config = with(base, row.patch);
    INFO("field " << row.field << ", patch " << row.patch.dump() << ", expected " << expect_name(row.expect));
    const Outcome got = open_with("qwen3-tiny", config);
    INFO("error: " << got.error << "\nlog: " << got.log);
    if (row.expect == Expect::refused) {
      const std::string text =
          row.text.empty() ? fmt::format("{} {}", row.field, row.patch.at(row.field).dump()) : row.text;
      CHECK_THAT(got.error, Contains("config.json") && Contains(text));
      CHECK(got.error.find('\n') == std::string::npos);
      continue;
    }
    REQUIRE(got.error.empty());
    // A known field is never reported as unknown.
    CHECK_FALSE(got.log.find("'" + row.field + "'") != std::string::npos);
    if (row.expect == Expect::plan_problem) {
      CHECK_FALSE(got.plan_ok);
      continue;
    }
    REQUIRE(got.logits);
    std::optional<Outcome> other;
    if (!row.baseline.empty()) {
      other = open_with("qwen3-tiny", with(base, row.baseline));
      REQUIRE(other->logits);
    }
    const HostTensor& reference = other ? *other->logits : *fixture.logits;
    CHECK(same_logits(*got.logits, reference) == (row.expect == Expect::same));
  }
}

TEST_CASE("hf config fields: an unknown field runs, with one warning naming every unknown field", "[qwen3][hf_config]") {
  const json base = load_hf_config(fixture_dir("qwen3-tiny"));
  const Outcome fixture = open_with("qwen3-tiny", base);
  REQUIRE(fixture.logits);
  const Outcome got = open_with("qwen3-tiny", with(base, {{"zz_future_switch", true}, {"aa_new_size", 7}}));
  REQUIRE(got.error.empty());
  REQUIRE(got.logits);
  CHECK(same_logits(*got.logits, *fixture.logits));
  CHECK_THAT(got.log, Contains("warning") && Contains("config.json") && Contains("'aa_new_size'") &&
                          Contains("'zz_future_switch'"));
  CHECK(std::count(got.log.begin(), got.log.end(), '\n') == 1);
}

TEST_CASE("hf config fields: num_hidden_layers below the checkpoint's layers warns naming the unused tensors",
          "[qwen3][hf_config]") {
  const json base = load_hf_config(fixture_dir("qwen3-tiny"));
  REQUIRE(base.at("num_hidden_layers") == 3);  // 11 tensors a layer
  const Outcome two = open_with("qwen3-tiny", with(base, {{"num_hidden_layers", 2}}));
  REQUIRE(two.error.empty());
  CHECK(two.logits);
  CHECK_THAT(two.log, Contains("warning") && Contains("config.json") && Contains("num_hidden_layers 2") &&
                          Contains("11 tensors unused: model.layers.2.*"));
  CHECK(std::count(two.log.begin(), two.log.end(), '\n') == 1);
  const Outcome one = open_with("qwen3-tiny", with(base, {{"num_hidden_layers", 1}}));
  CHECK_THAT(one.log, Contains("num_hidden_layers 1") && Contains("layers 1..2") &&
                          Contains("22 tensors unused: model.layers.1.* to model.layers.2.*"));
  CHECK(open_with("qwen3-tiny", base).log.empty());
}

TEST_CASE("hf config fields: the llama plugin's families go through the same table", "[llama][hf_config]") {
  // A Mistral window applies whenever it is set (its config has no use_sliding_window): one
  // shorter than the request changes the logits, a longer one does not.
  const json mistral = load_hf_config(fixture_dir("mistral-tiny"));
  const Outcome plain = open_with("mistral-tiny", mistral);
  CHECK(plain.error.empty());
  CHECK(plain.log.empty());
  REQUIRE(plain.logits);
  const Outcome wide = open_with("mistral-tiny", with(mistral, {{"sliding_window", 4096}}));
  REQUIRE(wide.logits);
  CHECK(same_logits(*wide.logits, *plain.logits));
  const Outcome narrow = open_with("mistral-tiny", with(mistral, {{"sliding_window", 4}}));
  REQUIRE(narrow.logits);
  CHECK_FALSE(same_logits(*narrow.logits, *plain.logits));
  CHECK_THAT(open_with("mistral-tiny", with(mistral, {{"sliding_window", 0}})).error,
             Contains("config.json") && Contains("sliding_window"));
  // Llama's transformers code has no window: one set is refused, never applied or dropped.
  CHECK_THAT(open_with("llama-tiny", with(load_hf_config(fixture_dir("llama-tiny")), {{"sliding_window", 8}})).error,
             Contains("config.json") && Contains("sliding_window 8"));
  // Qwen2 checkpoints state a window and switch it off.
  const json qwen2 = load_hf_config(fixture_dir("qwen2-tiny"));
  REQUIRE(qwen2.at("sliding_window") == 32768);
  REQUIRE(qwen2.at("use_sliding_window") == false);
  const Outcome windowless = open_with("qwen2-tiny", qwen2);
  CHECK(windowless.error.empty());
  CHECK(windowless.log.empty());
  const json llama = load_hf_config(fixture_dir("llama-tiny"));
  CHECK_THAT(open_with("llama-tiny", with(llama, {{"partial_rotary_factor", 0.75}})).error,
             Contains("config.json") && Contains("partial_rotary_factor 0.75"));
  CHECK_THAT(open_with("llama-tiny", with(llama, {{"attn_logit_softcapping", 50.0}})).error,
             Contains("config.json") && Contains("attn_logit_softcapping 50.0"));
}

TEST_CASE("hf config fields: the shipped fixtures open without a warning", "[qwen3][hf_config]") {
  for (const char* fixture : {"qwen3-tiny", "qwen3-tiny-text", "llama-tiny", "mistral-tiny", "qwen2-tiny", "higgs-tiny"}) {
    INFO(fixture);
    test::StderrCapture capture;
    (void)open_fixture(fixture_dir(fixture), false);
    CHECK(capture.text().empty());
  }
}

TEST_CASE("hf config fields: every field of the reader's table has rows here that match its class", "[qwen3][hf_config]") {
  for (const layers::HfField& field : layers::hf_config_fields()) {
    INFO("field " << field.name << " (" << layers::hf_field_use_name(field.use) << ")");
    std::vector<Expect> seen;
    for (const Row& row : rows())
      if (row.field == field.name) seen.push_back(row.expect);
    const auto has = [&](Expect e) { return std::find(seen.begin(), seen.end(), e) != seen.end(); };
    REQUIRE_FALSE(seen.empty());
    switch (field.use) {
      case layers::HfFieldUse::implemented:
        // Read: some value changes the model, or its one computed value runs and another is refused.
        CHECK((has(Expect::different) || has(Expect::plan_problem) || (has(Expect::same) && has(Expect::refused))));
        break;
      case layers::HfFieldUse::refused:  // a value is refused, and its "off" value runs unchanged
        CHECK(has(Expect::refused));
        CHECK(has(Expect::same));
        break;
      case layers::HfFieldUse::ignored:
        CHECK(std::all_of(seen.begin(), seen.end(), [](Expect e) { return e == Expect::same; }));
        break;
    }
  }
  for (const Row& row : rows()) {
    INFO("row for " << row.field);
    CHECK(std::any_of(layers::hf_config_fields().begin(), layers::hf_config_fields().end(),
                      [&](const layers::HfField& f) { return row.field == f.name; }));
  }
}

}  // namespace zoo::ptest

namespace zoo::ptest {

TEST_CASE("hf config fields: every field tried with -1, 0, 1e300 and 2^64 is refused by name or documented",
          "[qwen3][hf_config]") {
  // By class, not by case: each field of the table with each hostile number. The answer is one
  // line naming config.json and the field, or the field's documented meaning: an ignored field
  // leaves the logits bit-identical. No such value of a field that changes the math runs
  // (max_position_embeddings and a switched-off sliding_window once took any).
  const json base = load_hf_config(fixture_dir("qwen3-tiny"));
  const Outcome fixture = open_with("qwen3-tiny", base);
  REQUIRE(fixture.logits);
  const std::vector<json> values = {-1, 0, 1e300, json::parse("18446744073709551616")};
  for (const layers::HfField& field : layers::hf_config_fields()) {
    for (const json& value : values) {
      json config = base;
      config[field.name] = value;
      INFO("field " << field.name << " (" << layers::hf_field_use_name(field.use) << ") = " << value.dump());
      const Outcome got = open_with("qwen3-tiny", config);
      INFO("error: " << got.error << "\nlog: " << got.log);
      if (!got.error.empty()) {
        CHECK_THAT(got.error, Contains("config.json") && Contains(field.name));
        CHECK(got.error.find('\n') == std::string::npos);
        continue;
      }
      if (field.use == layers::HfFieldUse::ignored) {
        REQUIRE(got.logits);
        CHECK(same_logits(*got.logits, *fixture.logits));
        continue;
      }
      // The one documented "off" value among these: a window of 0 beside use_sliding_window false
      // (the fixture's), as transformers 5 writes a switched-off window for some families.
      if (std::string_view(field.name) == "sliding_window" && value == 0) {
        REQUIRE(got.logits);
        CHECK(same_logits(*got.logits, *fixture.logits));
        continue;
      }
      FAIL_CHECK("a hostile value of a field that changes the math ran");
    }
  }
}

}  // namespace zoo::ptest
