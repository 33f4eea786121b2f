// Qwen3 (Qwen3ForCausalLM): a dense decoder whose attention normalizes each head of q and k
// (RMSNorm over head_dim) before RoPE. Everything else is the shared decoder runtime
// (layers/decoder.hpp) reading the standard Hugging Face config and tensor names.
#include "zoo/layers/hf_config.hpp"
#include "zoo/plugin_abi.hpp"

namespace zoo::qwen3 {
namespace {

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"qwen3", nullptr};
  static const char* const architectures[] = {"Qwen3ForCausalLM", "Qwen3Model", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "qwen3", "0.2.0", model_types, architectures};
  return &d;
}

std::unique_ptr<Model> create(const ModelArgs& args, Host& host) {
  // Qwen3Config's defaults (transformers 5.25; docs/validation.md lists them): head_dim 128, not
  // hidden_size / num_attention_heads.
  layers::HfFamilyRules rules;
  rules.config_class = "Qwen3Config";
  rules.defaults = {{"num_key_value_heads", 32},
                    {"head_dim", 128},
                    {"rms_norm_eps", 1e-6},
                    {"max_position_embeddings", 32768}};
  layers::DecoderSpec spec = layers::read_hf_decoder_config(args.config, "qwen3", "qwen3 config", rules);
  spec.qk_norm = layers::QkNorm::per_head;
  return layers::make_decoder_model(std::move(spec), args, host);
}

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)

}  // namespace zoo::qwen3
