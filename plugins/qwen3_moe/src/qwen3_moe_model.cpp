// Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3's attention (q and k normed per head before RoPE) with a
// mixture of experts in place of the dense MLP on the layers its config makes sparse: a router
// picks num_experts_per_tok of num_experts gated MLPs per token (MlpKind::moe).
#include "zoo/layers/hf_config.hpp"
#include "zoo/plugin_abi.hpp"

namespace zoo::qwen3_moe {
namespace {

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"qwen3_moe", nullptr};
  static const char* const architectures[] = {"Qwen3MoeForCausalLM", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "qwen3_moe", "0.1.0", model_types, architectures};
  return &d;
}

std::unique_ptr<Model> create(const ModelArgs& args, Host& host) {
  // Qwen3MoeConfig's defaults (transformers 5.25; docs/validation.md lists them). Its expert
  // counts and sizes are one released model's, so a config without them is refused.
  layers::HfFamilyRules rules;
  rules.config_class = "Qwen3MoeConfig";
  rules.defaults = {{"num_key_value_heads", 4}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 32768}};
  rules.reads = {"num_experts",    "num_local_experts",   "num_experts_per_tok", "moe_intermediate_size",
                 "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers"};
  layers::DecoderSpec spec = layers::read_hf_decoder_config(args.config, "qwen3_moe", "qwen3_moe config", rules);
  spec.qk_norm = layers::QkNorm::per_head;
  return layers::make_decoder_model(std::move(spec), args, host);
}

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)

}  // namespace zoo::qwen3_moe
