#include "zoo/layers/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

#include "zoo/checked.hpp"
#include "zoo/error.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {
namespace {

// Upper bounds far above any released model (largest today: vocab 262k, hidden 25k, ffn 106k,
// 160 layers, 128 heads, head_dim 256), low enough that every size derived from them (weights,
// requirement tables, KV cache at the largest max_context) stays far inside 64 bits and a typo
// or hostile value is rejected by name before anything is allocated.
constexpr std::int64_t kMaxVocab = std::int64_t{1} << 24;
constexpr std::int64_t kMaxHidden = std::int64_t{1} << 18;
constexpr std::int64_t kMaxIntermediate = std::int64_t{1} << 20;
constexpr std::int64_t kMaxLayers = 4096;
constexpr std::int64_t kMaxHeads = 4096;
constexpr std::int64_t kMaxHeadDim = 4096;
constexpr std::int64_t kMaxPositions = std::int64_t{1} << 40;

// The rotary base: frequencies are theta^(-2i/d), which are all 1 (no rotation) at theta 1 and
// collapse to 0 or overflow for values near the double range.
constexpr double kMinRopeTheta = 1.0;
constexpr double kMaxRopeTheta = 1e18;

// An integer that must be a JSON integer in [1, max]. Unsigned values above int64 are reported
// as written (never wrapped to a negative number).
std::int64_t bounded_int(const nlohmann::json& value, const std::string& key, std::int64_t max, const std::string& label) {
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    throw InputError(fmt::format("{}: field '{}' = {} is out of range (expected 1..{})", label, key,
                                 value.get<std::uint64_t>(), max));
  if (!value.is_number_integer()) throw InputError(fmt::format("{}: field '{}' must be an integer", label, key));
  const auto n = value.get<std::int64_t>();
  if (n <= 0) throw InputError(fmt::format("{}: field '{}' must be positive (got {})", label, key, n));
  return check_range(n, 1, max, fmt::format("{}: field '{}'", label, key));
}

bool present(const nlohmann::json& object, const char* key) { return object.contains(key) && !object.at(key).is_null(); }

// Reads an integer field that must be present, positive and at most `max`.
std::int64_t positive_int(const nlohmann::json& config, const char* key, std::int64_t max, const std::string& label) {
  if (!config.contains(key)) throw InputError(fmt::format("{}: missing field '{}'", label, key));
  return bounded_int(config.at(key), key, max, label);
}

// A finite number strictly inside (lo, hi).
double number_in(const nlohmann::json& value, const std::string& what, double lo, double hi, const std::string& label) {
  if (!value.is_number()) throw InputError(fmt::format("{}: field '{}' must be a number", label, what));
  return check_open_range(value.get<double>(), lo, hi, fmt::format("{}: field '{}'", label, what));
}

std::string rope_type(const nlohmann::json& rope) {
  for (const char* key : {"rope_type", "type"})
    if (rope.contains(key) && rope.at(key).is_string()) return rope.at(key).get<std::string>();
  return "default";
}

using nlohmann::json;

// head_dim as the reader will compute it, when the config states enough to know.
std::optional<std::int64_t> stated_head_dim(const json& config) {
  if (present(config, "head_dim")) {
    if (!config.at("head_dim").is_number_integer()) return std::nullopt;
    return config.at("head_dim").get<std::int64_t>();
  }
  if (!present(config, "hidden_size") || !present(config, "num_attention_heads")) return std::nullopt;
  const json& hidden = config.at("hidden_size");
  const json& heads = config.at("num_attention_heads");
  if (!hidden.is_number_integer() || !heads.is_number_integer() || heads.get<std::int64_t>() <= 0) return std::nullopt;
  return hidden.get<std::int64_t>() / heads.get<std::int64_t>();
}

// For a refused field: whether its (present, non-null) value is the one that asks for nothing the
// decoder does not compute.
using RunsFn = bool (*)(const json& value, const json& config);
// The part of a refused value to quote, when the whole value would not say what is wrong.
using WhatFn = std::string (*)(const json& value);

bool is_one(const json& v, const json&) { return v.is_number() && v.get<double>() == 1.0; }
bool is_false(const json& v, const json&) { return v.is_boolean() && !v.get<bool>(); }
bool is_silu(const json& v, const json&) { return v.is_string() && v.get<std::string>() == "silu"; }
bool is_head_dim(const json& v, const json& config) {
  const auto d = stated_head_dim(config);
  return d && v.is_number() && v.get<double>() == static_cast<double>(*d);
}
// The window-switched families state a window and turn it off; in the others a window is on
// whenever it is set.
bool window_off(const json&, const json& config) {
  return config.contains("use_sliding_window") && config.at("use_sliding_window") == false;
}
bool all_full_attention(const json& v, const json&) {
  if (!v.is_array()) return false;
  for (const auto& t : v)
    if (t != "full_attention") return false;
  return true;
}
std::string first_other_layer_type(const json& v) {
  if (v.is_array())
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] != "full_attention") return fmt::format("layer_types[{}] {}", i, v[i].dump());
  return "layer_types " + v.dump();
}

struct Rule {
  HfField field;
  RunsFn runs = nullptr;  // refused fields: null means every value set is refused
  WhatFn what = nullptr;
};

constexpr auto kImplemented = HfFieldUse::implemented;
constexpr auto kRefused = HfFieldUse::refused;
constexpr auto kIgnored = HfFieldUse::ignored;

// The one table. Implemented fields are read by read_hf_decoder_config below (which refuses the
// values it cannot compute); refused and ignored ones are handled from here alone.
const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
      {{"vocab_size", kImplemented, "required, 1..2^24"}},
      {{"hidden_size", kImplemented, "required, 1..2^18"}},
      {{"intermediate_size", kImplemented, "required, 1..2^20"}},
      {{"num_hidden_layers", kImplemented, "required, 1..4096; fewer than the checkpoint's layers is a warning"}},
      {{"num_attention_heads", kImplemented, "required, 1..4096"}},
      {{"num_key_value_heads", kImplemented, "grouped-query attention; default num_attention_heads"}},
      {{"head_dim", kImplemented, "any even value (heads x head_dim may differ from hidden_size); "
                                  "default hidden_size / num_attention_heads"}},
      {{"rms_norm_eps", kImplemented, "in (0, 1)"}},
      {{"rope_theta", kImplemented, "in (1, 1e18)"}},
      {{"rope_scaling", kImplemented, "rope_type default, linear, llama3, yarn"}},
      {{"rope_parameters", kImplemented, "rope_type default, linear, llama3, yarn; partial_rotary_factor 1 only"}},
      {{"max_position_embeddings", kImplemented, "yarn's original_max_position_embeddings when that is not given"}},
      {{"hidden_act", kImplemented, "silu, gelu (erf), gelu_pytorch_tanh: act(gate) * up"}},
      {{"attention_bias", kImplemented, "biases on q/k/v and o"}},
      {{"mlp_bias", kImplemented, "biases on gate/up/down"}},
      {{"tie_word_embeddings", kImplemented, "the head is the embedding table"}},

      {{"partial_rotary_factor", kRefused, "rotary embedding on part of each head; the decoder rotates all of head_dim (1.0)"},
       is_one},
      {{"rotary_pct", kRefused, "rotary embedding on part of each head; the decoder rotates all of head_dim (1.0)"},
       is_one},
      {{"rotary_dim", kRefused, "rotary embedding on part of each head; the decoder rotates all of head_dim"},
       is_head_dim},
      {{"use_sliding_window", kRefused, "sliding-window attention; the decoder attends to the whole context (false)"},
       is_false},
      {{"sliding_window", kRefused,
        "sliding-window attention, on unless use_sliding_window is false; the decoder attends to the whole context"},
       window_off},
      {{"layer_types", kRefused, "the decoder runs full_attention layers only"}, all_full_attention,
       first_other_layer_type},
      {{"attn_logit_softcapping", kRefused, "tanh capping of attention scores (null)"}},
      {{"final_logit_softcapping", kRefused, "tanh capping of the logits (null)"}},
      {{"query_pre_attn_scalar", kRefused, "attention scale other than 1/sqrt(head_dim)"}, is_head_dim},
      {{"hidden_activation", kRefused, "an MLP activation other than silu"}, is_silu},
      {{"original_max_position_embeddings", kRefused,
        "a base length for RoPE scaling at the top level (LongRoPE); read where the family's scaling does not use it"}},
      {{"rope_local_base_freq", kRefused, "a RoPE base of its own for sliding-window layers"}},
      {{"sliding_window_pattern", kRefused, "which layers slide (every Nth is global)"}},
      {{"_sliding_window_pattern", kRefused, "which layers slide (every Nth is global), as transformers 5 saves it"}},
      {{"use_bidirectional_attention", kRefused, "attention that is not causal (false)"}, is_false},
      {{"embedding_multiplier", kRefused, "scaled embeddings (1.0)"}, is_one},
      {{"scale_emb", kRefused, "scaled embeddings (1)"}, is_one},
      {{"residual_multiplier", kRefused, "scaled residual branches (1.0)"}, is_one},
      {{"scale_depth", kRefused, "depth-scaled residual branches"}},
      {{"attention_multiplier", kRefused, "an attention scale other than 1/sqrt(head_dim)"}},
      {{"logits_scaling", kRefused, "logits divided by a factor (1.0)"}, is_one},
      {{"logit_scale", kRefused, "logits multiplied by a factor (1.0)"}, is_one},
      {{"dim_model_base", kRefused, "a head input scaled by hidden_size / dim_model_base"}},
      {{"clip_qkv", kRefused, "q/k/v clamped to a range (null)"}},
      {{"attention_chunk_size", kRefused, "chunked local attention (null)"}},
      {{"quantization_config", kRefused, "quantized weights with scales the decoder does not apply"}},
      {{"num_experts", kRefused, "mixture-of-experts MLPs (in the families that read them)"}},
      {{"num_local_experts", kRefused, "mixture-of-experts MLPs (in the families that read them)"}},
      {{"num_experts_per_tok", kRefused, "mixture-of-experts routing (in the families that read it)"}},
      {{"moe_intermediate_size", kRefused, "mixture-of-experts MLPs (in the families that read them)"}},
      {{"norm_topk_prob", kRefused, "mixture-of-experts routing (in the families that read it)"}},
      {{"decoder_sparse_step", kRefused, "which layers are mixtures of experts (in the families that read it)"}},
      {{"mlp_only_layers", kRefused, "which layers are mixtures of experts (in the families that read it)"}},
      {{"shared_expert_intermediate_size", kRefused, "a shared expert beside the routed ones (in the families that read it)"}},
      {{"qkv_bias", kRefused, "biases on q/k/v, stated in config.json (in the families that read it)"}, is_false},
      {{"n_shared_experts", kRefused, "shared experts beside the routed ones"}},

      {{"architectures", kIgnored, "picks the plugin"}},
      {{"model_type", kIgnored, "picks the plugin"}},
      {{"transformers_version", kIgnored, "metadata"}},
      {{"_name_or_path", kIgnored, "metadata"}},
      {{"torch_dtype", kIgnored, "the dtype it was saved in; zoo computes in the device's dtype"}},
      {{"dtype", kIgnored, "the dtype it was saved in; zoo computes in the device's dtype"}},
      {{"initializer_range", kIgnored, "training only"}},
      {{"use_cache", kIgnored, "the decoder always keeps a KV cache"}},
      {{"bos_token_id", kIgnored, "token ids for prompts and generation, not the forward pass"}},
      {{"eos_token_id", kIgnored, "token ids for prompts and generation, not the forward pass"}},
      {{"pad_token_id", kIgnored, "token ids for prompts and generation, not the forward pass"}},
      {{"attention_dropout", kIgnored, "dropout is off at inference"}},
      {{"resid_pdrop", kIgnored, "dropout is off at inference"}},
      {{"embd_pdrop", kIgnored, "dropout is off at inference"}},
      {{"max_window_layers", kIgnored, "which layers a sliding window covers, in the families that read it"}},
      {{"cache_implementation", kIgnored, "how transformers stores its cache, not what it holds"}},
      {{"pretraining_tp", kIgnored, "split matmuls of the same product"}},
      {{"router_aux_loss_coef", kIgnored, "training only (the router's load-balancing loss)"}},
      {{"output_router_logits", kIgnored, "training only (the router's load-balancing loss)"}},
  };
  return table;
}

const Rule* find_rule(std::string_view name) {
  for (const Rule& rule : rules())
    if (name == rule.field.name) return &rule;
  return nullptr;
}

// Refuses the fields that ask for math the decoder does not do for this family (those the family
// reads are read below); names the unknown ones.
void check_fields(const json& config, const std::string& label, const HfFamilyRules& family,
                  std::vector<std::string>& warnings) {
  for (const Rule& rule : rules()) {
    if (rule.field.use != kRefused || !present(config, rule.field.name)) continue;
    if (family.reads.count(rule.field.name) || family.activation_field == rule.field.name) continue;
    const json& value = config.at(rule.field.name);
    if (rule.runs && rule.runs(value, config)) continue;
    const std::string what = rule.what ? rule.what(value) : fmt::format("{} {}", rule.field.name, value.dump());
    throw InputError(fmt::format("{}: {} is not supported: {}", label, what, rule.field.note));
  }
  std::vector<std::string> unknown;
  for (const auto& item : config.items())
    if (!find_rule(item.key())) unknown.push_back("'" + item.key() + "'");
  if (!unknown.empty())
    warnings.push_back(fmt::format("{}: ignoring config.json field{} the reader does not know: {}", label,
                                   unknown.size() == 1 ? "" : "s", fmt::join(unknown, ", ")));
}

}  // namespace

const std::vector<HfField>& hf_config_fields() {
  static const std::vector<HfField> fields = [] {
    std::vector<HfField> out;
    for (const Rule& rule : rules()) out.push_back(rule.field);
    return out;
  }();
  return fields;
}

const char* hf_field_use_name(HfFieldUse use) {
  switch (use) {
    case HfFieldUse::implemented: return "implemented";
    case HfFieldUse::refused: return "refused";
    case HfFieldUse::ignored: return "ignored";
  }
  return "?";
}

std::string hf_model_type(const nlohmann::json& config, const std::string& fallback) {
  if (config.is_object() && config.contains("model_type") && config.at("model_type").is_string())
    return config.at("model_type").get<std::string>();
  return fallback;
}

bool hf_bool(const nlohmann::json& config, const char* key, bool fallback, const std::string& label) {
  if (!present(config, key)) return fallback;
  if (!config.at(key).is_boolean()) throw InputError(fmt::format("{}: field '{}' must be true or false", label, key));
  return config.at(key).get<bool>();
}

namespace {

bool keyed_by_layer_type(const json& rope) {
  return rope.is_object() && (rope.contains("full_attention") || rope.contains("sliding_attention"));
}

RopeParameters read_rope(const nlohmann::json& config, const std::string& label, bool partial_rotary) {
  // Newer configs nest everything under rope_parameters; older ones have a flat rope_theta and
  // the scaling under rope_scaling. A null flat value means "see the nested one".
  const nlohmann::json* rope = nullptr;
  std::string where;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!present(config, key)) continue;
    // Of another type it is a config we cannot read, not one without scaling.
    if (!config.at(key).is_object())
      throw InputError(fmt::format("{}: {} must be an object (or null), got {}", label, key, config.at(key).type_name()));
    if (!rope) {
      rope = &config.at(key);
      where = key;
    } else if (*rope != config.at(key)) {  // which one transformers honours differs by version
      throw InputError(fmt::format("{}: rope_parameters and rope_scaling disagree; keep one of them", label));
    }
  }
  RopeParameters p;
  if (rope && keyed_by_layer_type(*rope))
    throw InputError(fmt::format("{}: {} keyed by layer type is not supported: RoPE parameters per layer type", label,
                                 where));
  if (rope) p.type = rope_type(*rope);
  // Transformers 5 keeps the rotary fraction with the other RoPE settings, whatever the type.
  if (rope && present(*rope, "partial_rotary_factor")) {
    if (!partial_rotary && !is_one(rope->at("partial_rotary_factor"), config))
      throw InputError(fmt::format("{}: {}.partial_rotary_factor {} is not supported: {}", label, where,
                                   rope->at("partial_rotary_factor").dump(),
                                   find_rule("partial_rotary_factor")->field.note));
    p.partial_rotary_factor = number_in(rope->at("partial_rotary_factor"), where + ".partial_rotary_factor", 0.0, 1.0 + 1e-9, label);
  }
  if (present(config, "rope_theta")) {
    p.theta = number_in(config.at("rope_theta"), "rope_theta", kMinRopeTheta, kMaxRopeTheta, label);
  } else if (rope && present(*rope, "rope_theta")) {
    p.theta = number_in(rope->at("rope_theta"), where + ".rope_theta", kMinRopeTheta, kMaxRopeTheta, label);
  }
  if (p.type == "default") return p;
  if (p.type != "linear" && p.type != "llama3" && p.type != "yarn")
    throw InputError(fmt::format("{}: unsupported rope_type '{}' (supported: default, linear, llama3, yarn)", label, p.type));
  auto number = [&](const char* key, double lo, double hi) {
    return number_in(rope->at(key), where + "." + key, lo, hi, label);
  };
  if (!present(*rope, "factor")) throw InputError(fmt::format("{}: {} '{}' needs a 'factor'", label, where, p.type));
  p.factor = number("factor", 0.0, 1e6);
  if (present(*rope, "original_max_position_embeddings")) {
    p.original_max_position_embeddings =
        bounded_int(rope->at("original_max_position_embeddings"), where + ".original_max_position_embeddings",
                    kMaxPositions, label);
  } else if (p.type == "llama3") {
    throw InputError(fmt::format("{}: {} llama3 needs 'original_max_position_embeddings'", label, where));
  } else if (p.type == "yarn" && present(config, "max_position_embeddings")) {
    p.original_max_position_embeddings =
        bounded_int(config.at("max_position_embeddings"), "max_position_embeddings", kMaxPositions, label);
  }
  if (p.type == "llama3") {
    for (const char* key : {"low_freq_factor", "high_freq_factor"})
      if (!present(*rope, key)) throw InputError(fmt::format("{}: {} llama3 needs '{}'", label, where, key));
    p.low_freq_factor = number("low_freq_factor", 0.0, 1e6);
    p.high_freq_factor = number("high_freq_factor", 0.0, 1e6);
  }
  if (p.type == "yarn") {
    if (present(*rope, "attention_factor")) p.attention_factor = number("attention_factor", 0.0, 1e6);
    if (present(*rope, "mscale")) p.mscale = number("mscale", -1e6, 1e6);
    if (present(*rope, "mscale_all_dim")) p.mscale_all_dim = number("mscale_all_dim", -1e6, 1e6);
    if (present(*rope, "beta_fast")) p.beta_fast = number("beta_fast", 0.0, 1e6);
    if (present(*rope, "beta_slow")) p.beta_slow = number("beta_slow", 0.0, 1e6);
    p.truncate = hf_bool(*rope, "truncate", true, label);
  }
  return p;
}

// The activation `field` names: silu, gelu (erf) or gelu_pytorch_tanh; InputError otherwise.
Activation read_activation(const json& config, const HfFamilyRules& family, const std::string& label) {
  const std::string& field = family.activation_field;
  if (!present(config, field.c_str())) return Activation::silu;
  const json& v = config.at(field);
  if (v == "silu") return Activation::silu;
  if (v == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  if (v == "gelu") return family.gelu_means_tanh ? Activation::gelu_tanh : Activation::gelu;
  throw InputError(fmt::format("{}: unsupported {} {} (supported: silu, gelu, gelu_pytorch_tanh)", label, field, v.dump()));
}

// Which layers slide, and through how many tokens: config.json's layer_types when it has them,
// else the family's rule; none where use_sliding_window is false (transformers then drops the
// window whatever the layer types say).
void read_layer_types(const json& config, const HfFamilyRules& family, DecoderSpec& c, const std::string& label) {
  if (!family.sliding_layer) return;  // the table refuses windows for this family
  if (present(config, "use_sliding_window") && !hf_bool(config, "use_sliding_window", false, label)) return;
  std::vector<bool> sliding(static_cast<std::size_t>(c.num_layers));
  if (present(config, "layer_types")) {
    const json& types = config.at("layer_types");
    if (!types.is_array() || static_cast<std::int64_t>(types.size()) != c.num_layers)
      throw InputError(fmt::format("{}: layer_types must be a list of {} entries (num_hidden_layers)", label, c.num_layers));
    for (std::size_t l = 0; l < types.size(); ++l) {
      if (types[l] != "full_attention" && types[l] != "sliding_attention")
        throw InputError(fmt::format("{}: layer_types[{}] {} is not supported: the decoder runs full_attention and "
                                     "sliding_attention layers",
                                     label, l, types[l].dump()));
      sliding[l] = types[l] == "sliding_attention";
    }
  } else {
    for (std::int64_t l = 0; l < c.num_layers; ++l) sliding[static_cast<std::size_t>(l)] = family.sliding_layer(l, config);
  }
  // Without a window size transformers runs those layers with full attention.
  if (std::find(sliding.begin(), sliding.end(), true) == sliding.end() || !present(config, "sliding_window")) return;
  const std::int64_t window = bounded_int(config.at("sliding_window"), "sliding_window", kMaxPositions, label);
  c.layers.assign(static_cast<std::size_t>(c.num_layers), LayerSpec{});
  for (std::size_t l = 0; l < sliding.size(); ++l)
    if (sliding[l]) c.layers[l] = {AttentionKind::sliding, window, 0};
}

// The mixture-of-experts layers (families reading num_experts), by the rule of transformers: a
// layer is sparse unless listed in mlp_only_layers, when there are experts and (layer + 1) is a
// multiple of decoder_sparse_step.
void read_moe(const json& config, const HfFamilyRules& family, DecoderSpec& c, const std::string& label) {
  if (!family.reads.count("num_experts")) return;
  const char* experts_key = present(config, "num_experts") ? "num_experts" : "num_local_experts";
  if (!present(config, experts_key)) return;  // a dense model of the family
  const json& experts = config.at(experts_key);
  if (experts.is_number_integer() && experts.get<std::int64_t>() == 0) return;
  constexpr std::int64_t kMaxExperts = 4096;
  c.moe.experts = bounded_int(experts, experts_key, kMaxExperts, label);
  c.moe.top_k = positive_int(config, "num_experts_per_tok", c.moe.experts, label);
  c.moe.intermediate_size = positive_int(config, "moe_intermediate_size", kMaxIntermediate, label);
  c.moe.normalize_top_k = hf_bool(config, "norm_topk_prob", false, label);
  if (family.reads.count("shared_expert_intermediate_size") && present(config, "shared_expert_intermediate_size")) {
    const json& shared = config.at("shared_expert_intermediate_size");
    if (!(shared.is_number_integer() && shared.get<std::int64_t>() == 0))
      c.moe.shared_intermediate_size =
          bounded_int(shared, "shared_expert_intermediate_size", kMaxIntermediate, label);
  }
  const std::int64_t step =
      present(config, "decoder_sparse_step") ? bounded_int(config.at("decoder_sparse_step"), "decoder_sparse_step", kMaxLayers, label) : 1;
  std::set<std::int64_t> dense;
  if (present(config, "mlp_only_layers")) {
    const json& only = config.at("mlp_only_layers");
    if (!only.is_array()) throw InputError(fmt::format("{}: field 'mlp_only_layers' must be a list of layer indices", label));
    for (const auto& v : only) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= c.num_layers)
        throw InputError(fmt::format("{}: mlp_only_layers entry {} is not a layer index (0..{})", label, v.dump(),
                                     c.num_layers - 1));
      dense.insert(v.get<std::int64_t>());
    }
  }
  if (c.layers.empty()) c.layers.assign(static_cast<std::size_t>(c.num_layers), LayerSpec{});
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    if (!dense.count(l) && (l + 1) % step == 0) c.layers[static_cast<std::size_t>(l)].mlp = MlpKind::moe;
}

// The RoPE tables: one for every layer, or (families reading rope_local_base_freq) the full
// layers' and the sliding layers' own, from rope_parameters keyed by layer type (transformers 5)
// or from rope_theta + rope_scaling and rope_local_base_freq (older configs).
void read_ropes(const json& config, const HfFamilyRules& family, DecoderSpec& c, const std::string& label) {
  const bool partial = family.reads.count("partial_rotary_factor") > 0;
  const bool local = family.reads.count("rope_local_base_freq") > 0;
  RopeParameters full, slide;
  const bool keyed = present(config, "rope_parameters") && keyed_by_layer_type(config.at("rope_parameters"));
  if (keyed && local) {
    for (const auto& [type, out] : {std::pair<const char*, RopeParameters*>{"full_attention", &full},
                                    {"sliding_attention", &slide}}) {
      json part = json::object();
      if (config.at("rope_parameters").contains(type)) part["rope_parameters"] = config.at("rope_parameters").at(type);
      *out = read_rope(part, label + " (rope_parameters." + type + ")", partial);
    }
  } else {
    full = read_rope(config, label, partial);
    if (local) {
      slide.theta = present(config, "rope_local_base_freq")
                        ? number_in(config.at("rope_local_base_freq"), "rope_local_base_freq", kMinRopeTheta,
                                    kMaxRopeTheta, label)
                        : 10000.0;  // transformers' default local base
    }
  }
  double factor = full.partial_rotary_factor;
  if (partial && present(config, "partial_rotary_factor"))
    factor = number_in(config.at("partial_rotary_factor"), "partial_rotary_factor", 0.0, 1.0 + 1e-9, label);
  if (factor != 1.0) {
    // transformers: int(head_dim * factor) dimensions rotate.
    const auto rotary = static_cast<std::int64_t>(static_cast<double>(c.head_dim) * factor);
    if (rotary <= 0 || rotary % 2 != 0)
      throw InputError(fmt::format("{}: partial_rotary_factor {} gives {} rotary dimensions of head_dim {}; it must "
                                   "be even and positive",
                                   label, factor, rotary, c.head_dim));
    c.rotary_dim = rotary;
  }
  c.ropes = {make_rope_table(full, c.rotary(), label)};
  if (!local || c.layers.empty()) return;
  c.ropes.push_back(make_rope_table(slide, c.rotary(), label));
  for (auto& layer : c.layers)
    if (layer.attention == AttentionKind::sliding) layer.rope = 1;
}

}  // namespace

RopeParameters read_hf_rope_parameters(const nlohmann::json& config, const std::string& label) {
  return read_rope(config, label, false);
}

DecoderSpec read_hf_decoder_config(const nlohmann::json& config, const std::string& family, const std::string& label,
                                   const HfFamilyRules& rules) {
  if (!config.is_object()) throw InputError(fmt::format("{}: config is not a JSON object", label));
  DecoderSpec c;
  check_fields(config, label, rules, c.config_warnings);
  c.family = family;
  c.model_type = hf_model_type(config, "");
  c.vocab_size = positive_int(config, "vocab_size", kMaxVocab, label);
  c.hidden_size = positive_int(config, "hidden_size", kMaxHidden, label);
  c.intermediate_size = positive_int(config, "intermediate_size", kMaxIntermediate, label);
  c.num_layers = positive_int(config, "num_hidden_layers", kMaxLayers, label);
  c.num_heads = positive_int(config, "num_attention_heads", kMaxHeads, label);
  c.num_kv_heads = present(config, "num_key_value_heads") ? positive_int(config, "num_key_value_heads", kMaxHeads, label)
                                                          : c.num_heads;
  // Newer configs state head_dim (it may differ from hidden / heads); older ones derive it.
  if (present(config, "head_dim")) {
    c.head_dim = positive_int(config, "head_dim", kMaxHeadDim, label);
  } else {
    if (c.hidden_size % c.num_heads != 0)
      throw InputError(fmt::format("{}: hidden_size {} is not divisible by num_attention_heads {} and no head_dim is given",
                                   label, c.hidden_size, c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  // rms_norm_eps is added to a mean of squares: meaningful only small and positive.
  if (config.contains("rms_norm_eps")) c.rms_norm_eps = number_in(config.at("rms_norm_eps"), "rms_norm_eps", 0.0, 1.0, label);

  c.activation = read_activation(config, rules, label);
  auto scalar = [&](const char* key) {
    return rules.reads.count(key) && present(config, key) ? number_in(config.at(key), key, 0.0, 1e9, label) : 0.0;
  };
  c.attn_softcap = scalar("attn_logit_softcapping");
  c.final_softcap = scalar("final_logit_softcapping");
  if (const double s = scalar("query_pre_attn_scalar"); s > 0) c.query_scale = 1.0 / std::sqrt(s);
  c.qkv_bias = c.o_bias = hf_bool(config, "attention_bias", false, label);
  c.mlp_bias = hf_bool(config, "mlp_bias", false, label);
  if (config.contains("tie_word_embeddings")) {
    if (!config.at("tie_word_embeddings").is_boolean())
      throw InputError(fmt::format("{}: field 'tie_word_embeddings' must be true or false", label));
    c.tie_word_embeddings = config.at("tie_word_embeddings").get<bool>();
  }
  if (present(config, "max_position_embeddings"))
    c.max_position_embeddings =
        bounded_int(config.at("max_position_embeddings"), "max_position_embeddings", kMaxPositions, label);
  // A window that is switched off is still a window size: a nonsense one is a broken config. (0 with
  // use_sliding_window false is how transformers 5 writes some families' switched-off window.)
  if (present(config, "sliding_window") &&
      !(config.at("sliding_window") == 0 && present(config, "use_sliding_window") &&
        config.at("use_sliding_window") == false))
    (void)bounded_int(config.at("sliding_window"), "sliding_window", kMaxPositions, label);
  read_layer_types(config, rules, c, label);
  read_moe(config, rules, c, label);
  read_ropes(config, rules, c, label);
  c.check(label);
  return c;
}

}  // namespace zoo::layers
