// Phi-3 (Phi3ForCausalLM): a Llama-shaped decoder whose checkpoint fuses q|k|v into qkv_proj and
// gate|up into gate_up_proj. The SDK's slicing source presents the fused tensors as the parts the
// shared runtime reads (no copy); the rest is config: partial rotary and a sliding window over
// every layer when sliding_window is set. LongRoPE (the 128k models) is refused by the RoPE reader.
#include <fmt/format.h>

#include "zoo/error.hpp"
#include "zoo/layers/hf_config.hpp"
#include "zoo/plugin_abi.hpp"
#include "zoo/sliced_weight_source.hpp"

namespace zoo::phi3 {
namespace {

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"phi3", nullptr};
  static const char* const architectures[] = {"Phi3ForCausalLM", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "phi3", "0.1.0", model_types, architectures};
  return &d;
}

// Phi3Config runs the default RoPE or LongRoPE only: it renames "su" and "yarn" to longrope and
// refuses the rest (validate_rope). The shared reader would run a "yarn" or "linear" as such.
void refuse_other_rope_types(const nlohmann::json& config, const std::string& label) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!config.is_object() || !config.contains(key) || !config.at(key).is_object()) continue;
    const auto& rope = config.at(key);
    for (const char* type_key : {"rope_type", "type"}) {
      if (!rope.contains(type_key) || rope.at(type_key) == "default") continue;
      throw InputError(
          fmt::format("{}: {}.{} {} is not supported: Phi3Config runs it as LongRoPE (su, yarn, longrope) "
                      "or refuses it, and the decoder has no LongRoPE",
                      label, key, type_key, rope.at(type_key).dump()));
    }
  }
}

std::unique_ptr<Model> create(const ModelArgs& args, Host& host) {
  layers::HfFamilyRules rules;
  // original_max_position_embeddings serves LongRoPE only, which the RoPE reader refuses.
  rules.reads = {"partial_rotary_factor", "sliding_window", "original_max_position_embeddings"};
  rules.sliding_layer = [](std::int64_t, const nlohmann::json&) { return true; };
  // Phi3Config's defaults (transformers 5.25): no window, eps 1e-5 (not the 1e-6 of most classes).
  rules.config_class = "Phi3Config";
  rules.defaults = {{"num_key_value_heads", nullptr},
                    {"rms_norm_eps", 1e-5},
                    {"sliding_window", nullptr},
                    {"max_position_embeddings", 4096}};
  refuse_other_rope_types(args.config, "phi3 config");
  layers::DecoderSpec spec = layers::read_hf_decoder_config(args.config, "phi3", "phi3 config", rules);
  const auto& n = spec.names;
  std::vector<SliceRule> fused = {
      {"self_attn.qkv_proj.weight",
       {{n.q_proj + ".weight", spec.q_dim()}, {n.k_proj + ".weight", spec.kv_dim()}, {n.v_proj + ".weight", spec.kv_dim()}}},
      {"mlp.gate_up_proj.weight",
       {{n.gate_proj + ".weight", spec.intermediate_size}, {n.up_proj + ".weight", spec.intermediate_size}}},
  };
  ModelArgs sliced = args;
  sliced.weights = std::make_shared<SlicedWeightSource>(args.weights, std::move(fused));
  return layers::make_decoder_model(std::move(spec), sliced, host);
}

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)

}  // namespace zoo::phi3
