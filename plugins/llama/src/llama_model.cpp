// Llama-family dense decoders: LlamaForCausalLM (llama), MistralForCausalLM (mistral; a
// sliding_window, when set, covers every layer) and Qwen2ForCausalLM (qwen2). All three are the
// shared decoder runtime (layers/decoder.hpp) with the standard Hugging Face names; they differ
// only in which biases exist and in Mistral's window, which this file states. RoPE scaling (linear, llama3, yarn), both
// config layouts and the fields refused or ignored come from the shared reader.
#include <fmt/format.h>

#include "zoo/error.hpp"
#include "zoo/layers/hf_config.hpp"
#include "zoo/plugin_abi.hpp"

namespace zoo::llama {
namespace {

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"llama", "mistral", "qwen2", nullptr};
  static const char* const architectures[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "llama", "0.1.0", model_types, architectures};
  return &d;
}

std::unique_ptr<Model> create(const ModelArgs& args, Host& host) {
  const std::string type = layers::hf_model_type(args.config, "llama");
  const std::string label = type + " config";
  // Each class's defaults (transformers 5.25; docs/validation.md lists them). null: None, which
  // the classes' __post_init__ (or the modeling code's getattr) turns into hidden_size /
  // num_attention_heads and num_attention_heads.
  layers::HfFamilyRules rules;
  if (type == "llama") {
    rules.config_class = "LlamaConfig";
    rules.defaults = {{"num_key_value_heads", nullptr},
                      {"head_dim", nullptr},
                      {"rms_norm_eps", 1e-6},
                      {"max_position_embeddings", 2048}};
  } else if (type == "mistral") {
    rules.config_class = "MistralConfig";
    // A window of 4096 over every layer unless config.json says null.
    rules.reads = {"sliding_window"};
    rules.sliding_layer = [](std::int64_t, const nlohmann::json&) { return true; };
    rules.defaults = {{"num_key_value_heads", 8},
                      {"head_dim", nullptr},
                      {"rms_norm_eps", 1e-6},
                      {"sliding_window", 4096},
                      {"max_position_embeddings", 4096 * 32}};
  } else if (type == "qwen2") {
    rules.config_class = "Qwen2Config";
    rules.defaults = {
        {"num_key_value_heads", 32}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 32768}};
  }
  layers::DecoderSpec spec = layers::read_hf_decoder_config(args.config, "llama", label, rules);
  spec.model_type = type;
  if (type == "mistral") {
    // Mistral's attention has no biases.
    spec.qkv_bias = spec.o_bias = spec.mlp_bias = false;
  } else if (type == "qwen2") {
    // Qwen2 always has q/k/v biases and none on o_proj or the MLP (its config has no switch);
    // it windows attention only when use_sliding_window is set, which the shared reader refuses.
    spec.qkv_bias = true;
    spec.o_bias = spec.mlp_bias = false;
  } else if (type != "llama") {
    throw InputError(fmt::format("{}: model_type '{}' is not one this plugin runs (llama, mistral, qwen2)", label, type));
  }
  return layers::make_decoder_model(std::move(spec), args, host);
}

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)

}  // namespace zoo::llama
