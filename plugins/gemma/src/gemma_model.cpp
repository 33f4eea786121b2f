// Gemma 1, 2 and 3 (text): the shared decoder runtime with Gemma's differences stated as data.
// All three scale embeddings by sqrt(hidden_size) and norm with 1 + w, and their MLP is GeGLU
// (the tanh GELU). Gemma 2 and 3 add sandwich norms around both sublayers, a query scale from
// query_pre_attn_scalar and sliding-window layers; Gemma 2 caps attention scores and logits with
// tanh; Gemma 3 norms q and k per head and gives its sliding layers a RoPE base of their own.
#include <fmt/format.h>

#include <cmath>

#include "zoo/error.hpp"
#include "zoo/layers/hf_config.hpp"
#include "zoo/plugin_abi.hpp"

namespace zoo::gemma {
namespace {

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"gemma", "gemma2", "gemma3_text", nullptr};
  static const char* const architectures[] = {"GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "gemma", "0.1.0", model_types, architectures};
  return &d;
}

// What each Gemma's transformers config reads, its defaults (transformers 5.25's GemmaConfig,
// Gemma2Config, Gemma3TextConfig; docs/validation.md lists them), and which layers it slides when
// config.json has no layer_types: Gemma 2 every other layer from the first, Gemma 3 all but every Nth.
layers::HfFamilyRules rules_for(const std::string& type, const nlohmann::json& config, const std::string& label) {
  layers::HfFamilyRules rules;
  // Shared by the three classes.
  rules.defaults = {{"head_dim", 256},
                    {"rms_norm_eps", 1e-6},
                    {"tie_word_embeddings", true},
                    {"attention_bias", false},
                    {"rope_theta", 10000.0}};
  if (type == "gemma") {
    // GemmaMLP reads hidden_act, whose legacy "gelu" GemmaConfig.__post_init__ turns into
    // gelu_pytorch_tanh; hidden_activation (read by 4.x from transformers#29402 until #35235) is not.
    rules.config_class = "GemmaConfig";
    rules.gelu_means_tanh = true;
    rules.defaults.update({{"hidden_act", "gelu_pytorch_tanh"},
                           {"num_key_value_heads", 16},
                           {"max_position_embeddings", 8192}});
    return rules;
  }
  // Gemma2MLP and Gemma3MLP read hidden_activation (no conversion of "gelu"); hidden_act is not read.
  rules.activation_field = "hidden_activation";
  rules.reads = {"query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "sliding_window",
                 "layer_types"};
  rules.defaults.update({{"hidden_activation", "gelu_pytorch_tanh"},
                         {"num_key_value_heads", 4},
                         {"query_pre_attn_scalar", 256},
                         {"sliding_window", 4096}});
  if (type == "gemma2") {
    rules.config_class = "Gemma2Config";
    rules.defaults.update({{"attn_logit_softcapping", 50.0},
                           {"final_logit_softcapping", 30.0},
                           {"max_position_embeddings", 8192}});
    rules.sliding_layer = [](std::int64_t l, const nlohmann::json&) { return (l + 1) % 2 != 0; };
  } else {
    rules.config_class = "Gemma3TextConfig";
    // default_theta {"global": 1e6, "local": 1e4}.
    rules.defaults.update({{"attn_logit_softcapping", nullptr},
                           {"final_logit_softcapping", nullptr},
                           {"max_position_embeddings", 131072},
                           {"rope_theta", 1000000.0},
                           {"rope_local_base_freq", 10000.0}});
    // Older configs say sliding_window_pattern; transformers 5 saves it as _sliding_window_pattern.
    rules.reads.insert({"rope_local_base_freq", "sliding_window_pattern", "_sliding_window_pattern"});
    std::int64_t pattern = 6;  // Gemma3TextConfig: kwargs.get("sliding_window_pattern", 6)
    for (const char* key : {"_sliding_window_pattern", "sliding_window_pattern"}) {
      if (!config.contains(key) || config.at(key).is_null()) continue;
      const auto& v = config.at(key);
      if (!v.is_number_integer() || v.get<std::int64_t>() <= 0 || v.get<std::int64_t>() > 4096)
        throw InputError(fmt::format("{}: {} {} must be an integer in 1..4096", label, key, v.dump()));
      pattern = v.get<std::int64_t>();
    }
    rules.sliding_layer = [pattern](std::int64_t l, const nlohmann::json&) { return (l + 1) % pattern != 0; };
  }
  return rules;
}

std::unique_ptr<Model> create(const ModelArgs& args, Host& host) {
  const std::string type = layers::hf_model_type(args.config, "gemma");
  if (type != "gemma" && type != "gemma2" && type != "gemma3_text")
    throw InputError(fmt::format("gemma config: model_type '{}' is not one this plugin runs (gemma, gemma2, "
                                 "gemma3_text)",
                                 type));
  const std::string label = type + " config";
  layers::DecoderSpec spec = layers::read_hf_decoder_config(args.config, "gemma", label, rules_for(type, args.config, label));
  spec.model_type = type;
  spec.norm = layers::NormKind::rms_one_plus;
  spec.embed_scale = std::sqrt(static_cast<double>(spec.hidden_size));
  if (type != "gemma") {
    spec.norm_placement = layers::NormPlacement::sandwich;
    spec.names.post_attn_out_norm = "post_attention_layernorm";
    spec.names.pre_mlp_norm = "pre_feedforward_layernorm";
    spec.names.post_mlp_norm = "post_feedforward_layernorm";
  }
  if (type == "gemma3_text") spec.qk_norm = layers::QkNorm::per_head;
  return layers::make_decoder_model(std::move(spec), args, host);
}

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)

}  // namespace zoo::gemma
