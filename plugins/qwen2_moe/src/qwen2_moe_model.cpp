// Qwen2-MoE (Qwen2MoeForCausalLM, Qwen1.5-MoE): Qwen2's attention (q/k/v biases, which its config
// states as qkv_bias, default on) with a mixture of experts on the sparse layers, and beside the
// routed experts a shared expert scaled by a sigmoid gate (MoeSpec::shared_intermediate_size).
#include "zoo/layers/hf_config.hpp"
#include "zoo/plugin_abi.hpp"

namespace zoo::qwen2_moe {
namespace {

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"qwen2_moe", nullptr};
  static const char* const architectures[] = {"Qwen2MoeForCausalLM", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "qwen2_moe", "0.1.0", model_types, architectures};
  return &d;
}

std::unique_ptr<Model> create(const ModelArgs& args, Host& host) {
  // Qwen2MoeConfig's defaults (transformers 5.25; docs/validation.md lists them). It has no
  // num_local_experts (no attribute_map): transformers leaves that field unread, so it is not read here.
  layers::HfFamilyRules rules;
  rules.config_class = "Qwen2MoeConfig";
  rules.defaults = {{"num_key_value_heads", 16}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 32768}};
  rules.reads = {"num_experts",         "num_experts_per_tok", "moe_intermediate_size",
                 "norm_topk_prob",      "decoder_sparse_step", "mlp_only_layers",
                 "shared_expert_intermediate_size", "qkv_bias"};
  layers::DecoderSpec spec = layers::read_hf_decoder_config(args.config, "qwen2_moe", "qwen2_moe config", rules);
  spec.qkv_bias = layers::hf_bool(args.config, "qkv_bias", true, "qwen2_moe config");
  spec.o_bias = false;
  return layers::make_decoder_model(std::move(spec), args, host);
}

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)

}  // namespace zoo::qwen2_moe
