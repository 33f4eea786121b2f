// Where each family's hyperparameters come from when config.json leaves them out or spells them
// two ways, through every loader (the plugin picked by model_type, on a copy of its fixture).
//
// The expected values are transformers 5.25's, read off its config classes and MLPs
// (tests/families/transformers_defaults.py prints them; docs/validation.md, "Where every
// hyperparameter comes from", lists them with their sources):
// - the activation: GemmaMLP reads config.hidden_act (GemmaConfig.__post_init__ turns "gelu"
//   into "gelu_pytorch_tanh"); Gemma2MLP and Gemma3MLP read config.hidden_activation; every other
//   family's MLP reads config.hidden_act. The field a class does not read stays an unread
//   attribute; a null in the field it reads is refused by the class (@strict, str).
// - a missing field takes the class's default (from_dict fills it), so the config without it
//   must run exactly like the config with that default written in; or, where the classes'
//   defaults disagree or are one released model's size and the plugin states none, a one-line
//   refusal naming the field.
#include "qwen3/fixture_test_util.hpp"

#include <cstring>
#include <optional>

#include "stderr_capture.hpp"
#include "zoo/layers/hf_config.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/request.hpp"

namespace zoo::ptest::hf_defaults {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

struct Outcome {
  std::string error;  // the InputError, if any
  bool plan_ok = false;
  std::string summary;
  std::optional<HostTensor> logits;
  std::string log;
};

// Opens a copy of `fixture` whose config.json is `config`; with `run`, loads it and computes the
// logits of its request.json.
Outcome open_with(const std::string& fixture, const json& config, bool run) {
  TempDir dir;
  ModelSpec spec = fixture_with_config(dir, fixture, config);
  Outcome out;
  test::StderrCapture capture;
  try {
    OpenedModel opened = open_model(std::move(spec), registry());
    out.summary = opened.model->info().summary;
    out.plan_ok = opened.plan.ok();
    if (run && out.plan_ok) {
      load_model(opened, false);
      const Prompt prompt = opened.model->prepare(load_request(dir / "request.json"));
      auto session = opened.model->new_session();
      out.logits = std::move(
          session->forward(prompt.step({.hidden = false, .logits = true, .all_positions = true})).logits);
    }
  } catch (const InputError& e) {
    out.error = e.what();
  }
  // The copy's directory out of the message, so two copies' messages compare.
  for (std::size_t at; (at = out.error.find(dir.path().string())) != std::string::npos;)
    out.error.replace(at, dir.path().string().size(), "<checkpoint>");
  out.log = capture.text();
  return out;
}

json patched(json config, const json& patch) {
  for (const auto& [k, v] : patch.items()) {
    if (v == "<absent>")
      config.erase(k);
    else
      config[k] = v;
  }
  return config;
}

// The activation the summary reports (DecoderSpec::summary names the GELUs, not silu).
std::string activation_of(const std::string& summary) {
  if (summary.find(", gelu_tanh") != std::string::npos) return "gelu_pytorch_tanh";
  if (summary.find(", gelu") != std::string::npos) return "gelu";
  return "silu";
}

struct ActivationCase {
  json patch;             // "<absent>" removes the field
  std::string expect;     // silu | gelu | gelu_pytorch_tanh, or "refused"
  std::string text = {};  // refused: the message names this; else a warning that must name it
};

void check_activation(const std::string& fixture, const ActivationCase& c) {
  INFO("fixture " << fixture << ", patch " << c.patch.dump());
  const Outcome got = open_with(fixture, patched(load_hf_config(fixture_dir(fixture)), c.patch), false);
  INFO("error: " << got.error << "\nlog: " << got.log << "\nsummary: " << got.summary);
  if (c.expect == "refused") {
    CHECK_THAT(got.error, Contains("config.json") && Contains(c.text));
    CHECK(got.error.find('\n') == std::string::npos);
    return;
  }
  REQUIRE(got.error.empty());
  CHECK(activation_of(got.summary) == c.expect);
  if (c.text.empty()) {
    CHECK(got.log.empty());
  } else {
    CHECK_THAT(got.log, Contains("warning") && Contains(c.text) && Contains("is not read"));
  }
}

}  // namespace

TEST_CASE("hf activation: Gemma 1 reads hidden_act (gelu meaning the tanh form), never hidden_activation",
          "[families][hf_config]") {
  // GemmaConfig.hidden_act defaults to gelu_pytorch_tanh; GemmaMLP: ACT2FN[config.hidden_act].
  const std::vector<ActivationCase> cases = {
      {{{"hidden_act", "<absent>"}, {"hidden_activation", "<absent>"}}, "gelu_pytorch_tanh"},
      {{{"hidden_act", "gelu"}}, "gelu_pytorch_tanh"},
      {{{"hidden_act", "gelu_pytorch_tanh"}, {"hidden_activation", "gelu_pytorch_tanh"}},
       "gelu_pytorch_tanh"},
      {{{"hidden_act", "gelu"}, {"hidden_activation", "gelu_pytorch_tanh"}}, "gelu_pytorch_tanh"},
      {{{"hidden_act", "gelu_pytorch_tanh"}, {"hidden_activation", nullptr}}, "gelu_pytorch_tanh"},
      {{{"hidden_act", "silu"}, {"hidden_activation", "gelu_pytorch_tanh"}}, "silu", "hidden_activation"},
      {{{"hidden_act", "<absent>"}, {"hidden_activation", "silu"}}, "gelu_pytorch_tanh", "hidden_activation"},
      {{{"hidden_act", "gelu_new"}}, "gelu_pytorch_tanh"},
      {{{"hidden_act", "gelu_python"}}, "gelu"},  // the erf formula: no conversion but of "gelu"
      {{{"hidden_act", "swish"}}, "silu"},
      {{{"hidden_act", nullptr}}, "refused", "'hidden_act' is null"},
      {{{"hidden_act", "relu"}}, "refused", "hidden_act \"relu\""},
      {{{"hidden_act", "quick_gelu"}}, "refused", "hidden_act \"quick_gelu\""},
  };
  for (const auto& c : cases) check_activation("gemma-tiny", c);
}

TEST_CASE("hf activation: Gemma 2 and 3 read hidden_activation, never hidden_act", "[families][hf_config]") {
  // Gemma2Config / Gemma3TextConfig.hidden_activation defaults to gelu_pytorch_tanh; their MLPs:
  // ACT2FN[config.hidden_activation], with no conversion of "gelu" (the erf form).
  const std::vector<ActivationCase> cases = {
      {{{"hidden_activation", "<absent>"}, {"hidden_act", "<absent>"}}, "gelu_pytorch_tanh"},
      {{{"hidden_activation", "gelu"}}, "gelu"},
      {{{"hidden_activation", "gelu_pytorch_tanh"}, {"hidden_act", "gelu_pytorch_tanh"}},
       "gelu_pytorch_tanh"},
      {{{"hidden_activation", "gelu_pytorch_tanh"}, {"hidden_act", "silu"}},
       "gelu_pytorch_tanh",
       "hidden_act"},
      {{{"hidden_activation", "<absent>"}, {"hidden_act", "relu"}}, "gelu_pytorch_tanh", "hidden_act"},
      {{{"hidden_activation", "silu"}}, "silu"},
      {{{"hidden_activation", "gelu_accurate"}}, "gelu_pytorch_tanh"},
      {{{"hidden_activation", nullptr}}, "refused", "'hidden_activation' is null"},
      {{{"hidden_activation", "relu"}}, "refused", "hidden_activation \"relu\""},
      {{{"hidden_activation", "gelu_10"}}, "refused", "hidden_activation \"gelu_10\""},
  };
  for (const char* fixture : {"gemma2-tiny", "gemma3-tiny"})
    for (const auto& c : cases) check_activation(fixture, c);
}

TEST_CASE("hf activation: the other families read hidden_act (default silu), never hidden_activation",
          "[families][hf_config]") {
  // LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Phi3Config, Olmo2Config,
  // Qwen3MoeConfig, Qwen2MoeConfig: hidden_act = "silu"; none has a hidden_activation field.
  const std::vector<ActivationCase> cases = {
      {{{"hidden_act", "<absent>"}}, "silu"},
      {{{"hidden_act", "swish"}}, "silu"},
      {{{"hidden_act", "gelu"}}, "gelu"},
      {{{"hidden_act", "gelu_pytorch_tanh"}}, "gelu_pytorch_tanh"},
      {{{"hidden_act", "gelu_fast"}}, "gelu_pytorch_tanh"},
      {{{"hidden_act", "silu"}, {"hidden_activation", "gelu_pytorch_tanh"}}, "silu", "hidden_activation"},
      {{{"hidden_act", "silu"}, {"hidden_activation", "silu"}}, "silu"},
      {{{"hidden_act", nullptr}}, "refused", "'hidden_act' is null"},
      {{{"hidden_act", "relu2"}}, "refused", "hidden_act \"relu2\""},
  };
  for (const char* fixture : {"llama-tiny", "mistral-tiny", "qwen2-tiny", "qwen3-tiny", "phi3-tiny",
                              "olmo2-tiny", "qwen3-moe-tiny", "qwen2-moe-tiny"})
    for (const auto& c : cases) check_activation(fixture, c);
}

TEST_CASE("hf activation: a Gemma config as transformers 5 saves it runs the fixture's model",
          "[families][hf_config]") {
  // tests/data/gemma-config-transformers5.json: GemmaConfig(<gemma-tiny's sizes>,
  // hidden_activation="gelu_pytorch_tanh").to_json_string() under transformers 5.25, which writes
  // both hidden_act and hidden_activation. Once refused ("an MLP activation other than silu").
  TempDir saved_dir;
  fs::copy_file(fs::path(ZOO_SOURCE_DIR) / "tests/data/gemma-config-transformers5.json",
                saved_dir / "config.json");
  const json saved = load_hf_config(saved_dir.path());
  REQUIRE(saved.at("hidden_act") == "gelu_pytorch_tanh");
  REQUIRE(saved.at("hidden_activation") == "gelu_pytorch_tanh");
  const Outcome got = open_with("gemma-tiny", saved, true);
  INFO("error: " << got.error << "\nlog: " << got.log);
  REQUIRE(got.error.empty());
  CHECK(got.log.empty());
  REQUIRE(got.logits);
  // The fixture's own config.json, which passes transformers' golden (test_family_golden.cpp).
  const Outcome fixture = open_with("gemma-tiny", load_hf_config(fixture_dir("gemma-tiny")), true);
  REQUIRE(fixture.logits);
  CHECK(max_abs_diff(*got.logits, *fixture.logits) == 0.0);
}

namespace {

// One field a config.json may leave out, per loader: `value` is the transformers class default
// (JSON as config.json would write it; null where the class default is None), or absent (refused).
struct MissingField {
  const char* fixture;
  const char* field;
  std::optional<json> value;  // nullopt: a one-line refusal naming the field
};

const json kRefused = "<refused>";

// The table: one row per loader and field. Values are transformers 5.25's class defaults.
const std::vector<MissingField>& missing_fields() {
  static const std::vector<MissingField> rows = [] {
    std::vector<MissingField> r;
    auto add = [&](const char* fixture, std::vector<std::pair<const char*, json>> fields) {
      for (auto& [field, value] : fields)
        r.push_back({fixture, field, value == kRefused ? std::nullopt : std::optional<json>(value)});
    };
    add("gemma-tiny",  // GemmaConfig
        {{"hidden_act", "gelu_pytorch_tanh"},
         {"head_dim", 256},
         {"num_key_value_heads", 16},
         {"rms_norm_eps", 1e-6},
         {"tie_word_embeddings", true},
         {"attention_bias", false},
         {"rope_theta", 10000.0},
         {"max_position_embeddings", 8192}});
    add("gemma2-tiny",  // Gemma2Config
        {{"hidden_activation", "gelu_pytorch_tanh"},
         {"head_dim", 256},
         {"num_key_value_heads", 4},
         {"rms_norm_eps", 1e-6},
         {"tie_word_embeddings", true},
         {"attention_bias", false},
         {"rope_theta", 10000.0},
         {"query_pre_attn_scalar", 256},
         {"attn_logit_softcapping", 50.0},
         {"final_logit_softcapping", 30.0},
         {"sliding_window", 4096},
         {"max_position_embeddings", 8192}});
    add("gemma3-tiny",  // Gemma3TextConfig (default_theta: global 1e6, local 1e4)
        {{"hidden_activation", "gelu_pytorch_tanh"},
         {"head_dim", 256},
         {"num_key_value_heads", 4},
         {"rms_norm_eps", 1e-6},
         {"tie_word_embeddings", true},
         {"attention_bias", false},
         {"rope_theta", 1000000.0},
         {"rope_local_base_freq", 10000.0},
         {"query_pre_attn_scalar", 256},
         {"attn_logit_softcapping", nullptr},
         {"final_logit_softcapping", nullptr},
         {"sliding_window", 4096},
         {"max_position_embeddings", 131072}});
    add("llama-tiny",  // LlamaConfig
        {{"hidden_act", "silu"},
         {"num_key_value_heads", nullptr},
         {"head_dim", nullptr},
         {"rms_norm_eps", 1e-6},
         {"tie_word_embeddings", false},
         {"attention_bias", false},
         {"mlp_bias", false},
         {"rope_theta", 10000.0},
         {"max_position_embeddings", 2048}});
    add("mistral-tiny",  // MistralConfig
        {{"hidden_act", "silu"},
         {"num_key_value_heads", 8},
         {"rms_norm_eps", 1e-6},
         {"tie_word_embeddings", false},
         {"sliding_window", 4096},
         {"rope_theta", 10000.0},
         {"max_position_embeddings", 131072}});
    add("qwen2-tiny",  // Qwen2Config (no head_dim field: the modeling code's hidden // heads)
        {{"hidden_act", "silu"},
         {"num_key_value_heads", 32},
         {"head_dim", nullptr},
         {"rms_norm_eps", 1e-6},
         {"tie_word_embeddings", false},
         {"rope_theta", 10000.0},
         {"max_position_embeddings", 32768}});
    add("qwen3-tiny",  // Qwen3Config
        {{"hidden_act", "silu"},
         {"num_key_value_heads", 32},
         {"head_dim", 128},
         {"rms_norm_eps", 1e-6},
         {"tie_word_embeddings", false},
         {"attention_bias", false},
         {"rope_theta", 10000.0},
         {"max_position_embeddings", 32768}});
    add("phi3-tiny",  // Phi3Config
        {{"hidden_act", "silu"},
         {"num_key_value_heads", nullptr},
         {"rms_norm_eps", 1e-5},
         {"tie_word_embeddings", false},
         {"sliding_window", nullptr},
         {"rope_theta", 10000.0},
         {"max_position_embeddings", 4096}});
    add("olmo2-tiny",  // Olmo2Config
        {{"hidden_act", "silu"},
         {"num_key_value_heads", nullptr},
         {"rms_norm_eps", 1e-5},
         {"tie_word_embeddings", false},
         {"attention_bias", false},
         {"rope_theta", 10000.0},
         {"max_position_embeddings", 2048}});
    // Qwen3MoeConfig: the class's own defaults hold; the expert count, one model's size
    // (num_experts 128), is refused.
    add("qwen3-moe-tiny", {{"hidden_act", "silu"},
                           {"num_key_value_heads", 4},
                           {"head_dim", nullptr},
                           {"rms_norm_eps", 1e-6},
                           {"tie_word_embeddings", false},
                           {"attention_bias", false},
                           {"rope_theta", 10000.0},
                           {"num_local_experts", kRefused},
                           {"norm_topk_prob", false},
                           {"decoder_sparse_step", 1},
                           {"mlp_only_layers", nullptr}});
    // Qwen2MoeConfig likewise (num_experts 60 and shared expert 5632 refused).
    add("qwen2-moe-tiny", {{"hidden_act", "silu"},
                           {"num_key_value_heads", 16},
                           {"head_dim", nullptr},
                           {"rms_norm_eps", 1e-6},
                           {"tie_word_embeddings", false},
                           {"rope_theta", 10000.0},
                           {"num_experts", kRefused},
                           {"shared_expert_intermediate_size", kRefused},
                           {"norm_topk_prob", false},
                           {"decoder_sparse_step", 1},
                           {"mlp_only_layers", nullptr},
                           {"qkv_bias", true}});
    // Higgs Audio v3: its text_config is the qwen3 loader's config (Qwen3Config's defaults); the
    // head is tied whatever it says (the format).
    add("higgs-tiny", {{"text_config.hidden_act", "silu"},
                       {"text_config.num_key_value_heads", 32},
                       {"text_config.head_dim", 128},
                       {"text_config.rms_norm_eps", 1e-6},
                       {"text_config.tie_word_embeddings", true},
                       {"text_config.rope_theta", 10000.0}});
    return r;
  }();
  return rows;
}

bool keyed(const json& config) {
  return config.contains("rope_parameters") && config.at("rope_parameters").is_object() &&
         config.at("rope_parameters").contains("full_attention");
}

// config.json without `field`. A RoPE base is also taken out of the RoPE parameters (where
// transformers 5 writes it): rope_theta from the flat ones or the full-attention layers',
// rope_local_base_freq from the sliding layers'.
json without(json config, const std::string& field) {
  if (field.starts_with("text_config.")) {
    config["text_config"] = without(config.at("text_config"), field.substr(std::strlen("text_config.")));
    return config;
  }
  config.erase(field);
  if (field == "num_local_experts") config.erase("num_experts");
  if (field != "rope_theta" && field != "rope_local_base_freq") return config;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!config.contains(key) || !config.at(key).is_object()) continue;
    json& rope = config.at(key);
    if (keyed(config) && std::string_view(key) == "rope_parameters")
      rope.at(field == "rope_theta" ? "full_attention" : "sliding_attention").erase("rope_theta");
    else if (field == "rope_theta")
      rope.erase("rope_theta");
  }
  return config;
}

// config.json with `field` written as `value`, where the class would have it.
json with_value(json config, const std::string& field, const json& value) {
  if (field.starts_with("text_config.")) {
    config["text_config"] =
        with_value(config.at("text_config"), field.substr(std::strlen("text_config.")), value);
    return config;
  }
  if ((field == "rope_theta" || field == "rope_local_base_freq") && keyed(config)) {
    config["rope_parameters"][field == "rope_theta" ? "full_attention" : "sliding_attention"]["rope_theta"] =
        value;
    return config;
  }
  config[field] = value;
  return config;
}

}  // namespace

TEST_CASE(
    "hf defaults: each loader given a config.json missing each field runs with the class default or refuses",
    "[families][hf_config]") {
  for (const MissingField& row : missing_fields()) {
    INFO("fixture " << row.fixture << ", field " << row.field);
    const json base = load_hf_config(fixture_dir(row.fixture));
    const json missing = without(base, row.field);
    REQUIRE(missing != base);  // the fixture states the field, so leaving it out is a change
    const Outcome got = open_with(row.fixture, missing, true);
    INFO("error: " << got.error << "\nsummary: " << got.summary);
    if (!row.value) {
      CHECK_THAT(got.error, Contains("config.json") && Contains(row.field) && Contains("missing field"));
      CHECK(got.error.find('\n') == std::string::npos);
      continue;
    }
    // The class default written in: the same model, to the bit (or the same refusal or plan).
    const Outcome stated = open_with(row.fixture, with_value(missing, row.field, *row.value), true);
    INFO("with " << row.field << " = " << row.value->dump() << ": error " << stated.error << "\nsummary "
                 << stated.summary);
    CHECK(got.error == stated.error);
    CHECK(got.summary == stated.summary);
    CHECK(got.plan_ok == stated.plan_ok);
    CHECK(got.logits.has_value() == stated.logits.has_value());
    if (got.logits && stated.logits) CHECK(max_abs_diff(*got.logits, *stated.logits) == 0.0);
  }
}

TEST_CASE(
    "hf defaults: the table covers every field the reader refuses when absent or takes a shared fallback for",
    "[families][hf_config]") {
  auto rows_for = [](const std::string& field) {
    std::size_t n = 0;
    for (const MissingField& row : missing_fields())
      if (row.field == field ||
          (field == "num_experts" && std::string_view(row.field) == "num_local_experts"))
        ++n;
    return n;
  };
  for (const std::string& field : layers::hf_refused_when_absent()) {
    INFO("refused when absent: " << field);
    CHECK(rows_for(field) > 0);
  }
  for (const layers::HfFallback& f : layers::hf_shared_fallbacks()) {
    INFO("shared fallback: " << f.field);
    CHECK(rows_for(f.field) > 0);
  }
}

TEST_CASE("hf defaults: values whose source depends on the transformers version or class are refused by name",
          "[families][hf_config]") {
  // transformers 5 keeps a nested rope_theta over the flat one, 4.x read the flat one.
  json qwen3 = load_hf_config(fixture_dir("qwen3-tiny"));
  qwen3["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  REQUIRE(qwen3.at("rope_theta") != 10000.0);
  const Outcome theta = open_with("qwen3-tiny", qwen3, false);
  CHECK_THAT(theta.error,
             Contains("config.json") && Contains("rope_parameters.rope_theta") && Contains("disagree"));
  qwen3["rope_parameters"]["rope_theta"] = qwen3.at("rope_theta");
  CHECK(open_with("qwen3-tiny", qwen3, false).error.empty());
  // Phi3Config runs su and yarn as LongRoPE and refuses linear and llama3 (validate_rope).
  for (const char* type : {"yarn", "linear", "longrope"}) {
    json phi3 = load_hf_config(fixture_dir("phi3-tiny"));
    phi3["rope_parameters"]["rope_type"] = type;
    phi3["rope_parameters"]["factor"] = 2.0;
    const Outcome got = open_with("phi3-tiny", phi3, false);
    INFO(type << ": " << got.error);
    CHECK_THAT(got.error, Contains("config.json") && Contains(fmt::format("rope_type \"{}\"", type)));
    CHECK(got.error.find('\n') == std::string::npos);
  }
}

}  // namespace zoo::ptest::hf_defaults
