// The llama plugin (llama, mistral, qwen2) seen from outside: models created through the plugin
// registry from hand-built configs, checked by their requirements, info and errors.
#include "qwen3/fixture_test_util.hpp"

#include <optional>

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

json config_json_of(const std::string& type) {
  return json{{"model_type", type},     {"vocab_size", 96},       {"hidden_size", 64},
              {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"rms_norm_eps", 1e-5},   {"rope_theta", 500000.0}};
}

std::shared_ptr<Model> create(const json& config) {
  ModelArgs args;
  args.config = config;
  args.weights = std::make_shared<EmptySource>();
  return registry().create_model(config.value("model_type", "llama"), args);
}

bool needs(const Model& model, const std::string& name) {
  for (auto& r : model.requirements())
    if (r.name == name) return true;
  return false;
}

std::string error_for(const json& config) {
  return input_error_of([&] { create(config); });
}

TEST_CASE("llama plugin: one plugin for llama, mistral and qwen2, each with its biases", "[llama]") {
  auto llama = create(config_json_of("llama"));
  CHECK(llama->info().plugin == "llama");
  CHECK(llama->info().model_type == "llama");
  CHECK_FALSE(needs(*llama, "model.layers.0.self_attn.q_norm.weight"));
  CHECK_FALSE(needs(*llama, "model.layers.0.self_attn.q_proj.bias"));
  CHECK(needs(*llama, "lm_head.weight"));  // untied unless the config says so

  json biased = config_json_of("llama");
  biased["attention_bias"] = true;
  biased["mlp_bias"] = true;
  auto with_bias = create(biased);
  CHECK(needs(*with_bias, "model.layers.1.self_attn.o_proj.bias"));
  CHECK(needs(*with_bias, "model.layers.1.mlp.down_proj.bias"));

  auto qwen2 = create(config_json_of("qwen2"));
  CHECK(qwen2->info().model_type == "qwen2");
  CHECK(needs(*qwen2, "model.layers.1.self_attn.v_proj.bias"));
  CHECK_FALSE(needs(*qwen2, "model.layers.1.self_attn.o_proj.bias"));

  json mistral = config_json_of("mistral");
  mistral["sliding_window"] = nullptr;
  mistral["attention_bias"] = true;  // not a Mistral switch: its projections have no bias
  CHECK_FALSE(needs(*create(mistral), "model.layers.0.self_attn.q_proj.bias"));

  json scaled = config_json_of("llama");
  scaled["rope_scaling"] = {{"rope_type", "llama3"},  {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  CHECK_THAT(create(scaled)->info().summary, Contains("llama3"));
}

TEST_CASE("llama plugin: what it does not run is an InputError naming the field", "[llama][input]") {
  // Mistral's window is run (every layer); Llama's transformers code has none, so one is refused.
  json mistral = config_json_of("mistral");
  mistral["sliding_window"] = 4096;
  CHECK_THAT(create(mistral)->info().summary, Contains("sliding window 4096 on"));
  json llama_window = config_json_of("llama");
  llama_window["sliding_window"] = 4096;
  CHECK_THAT(error_for(llama_window), Contains("sliding_window") && Contains("llama config"));
  json qwen2 = config_json_of("qwen2");
  qwen2["use_sliding_window"] = true;
  CHECK_THAT(error_for(qwen2), Contains("use_sliding_window"));
  json act = config_json_of("llama");
  act["hidden_act"] = "quick_gelu";  // gelu_new is gelu_pytorch_tanh's formula and runs
  CHECK_THAT(error_for(act), Contains("hidden_act"));
  json missing = config_json_of("llama");
  missing.erase("intermediate_size");
  CHECK_THAT(error_for(missing), Contains("intermediate_size") && Contains("missing"));
}

}  // namespace
}  // namespace zoo::ptest
