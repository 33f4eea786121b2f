// OLMo-2 (Olmo2ForCausalLM): the shared decoder with its norms after the sublayers instead of
// before (each block is h += norm(attn(h)); h += norm(mlp(h)), no input norm) and q/k normed over
// the whole projection before RoPE, not per head.
#include "zoo/layers/hf_config.hpp"
#include "zoo/plugin_abi.hpp"

namespace zoo::olmo2 {
namespace {

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"olmo2", nullptr};
  static const char* const architectures[] = {"Olmo2ForCausalLM", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "olmo2", "0.1.0", model_types, architectures};
  return &d;
}

std::unique_ptr<Model> create(const ModelArgs& args, Host& host) {
  // Olmo2Config's defaults (transformers 5.25): eps 1e-5, not the 1e-6 of most classes.
  layers::HfFamilyRules rules;
  rules.config_class = "Olmo2Config";
  rules.defaults = {
      {"num_key_value_heads", nullptr}, {"rms_norm_eps", 1e-5}, {"max_position_embeddings", 2048}};
  layers::DecoderSpec spec = layers::read_hf_decoder_config(args.config, "olmo2", "olmo2 config", rules);
  spec.norm_placement = layers::NormPlacement::post;
  spec.qk_norm = layers::QkNorm::whole;
  spec.names.post_attn_out_norm = "post_attention_layernorm";
  spec.names.post_mlp_norm = "post_feedforward_layernorm";
  return layers::make_decoder_model(std::move(spec), args, host);
}

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)

}  // namespace zoo::olmo2
