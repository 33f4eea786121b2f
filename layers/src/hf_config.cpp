#include "zoo/layers/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
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
bool is_false(const json& v, const json&) {
  return v.is_boolean() && !v.get<bool>();
}
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
      {{"num_hidden_layers", kImplemented,
        "required, 1..4096; fewer than the checkpoint's layers is a warning"}},
      {{"num_attention_heads", kImplemented, "required, 1..4096"}},
      {{"num_key_value_heads", kImplemented,
        "grouped-query attention; absent: the class default, else refused"}},
      {{"head_dim", kImplemented,
        "any even value (heads x head_dim may differ from hidden_size); absent: the class default, else "
        "hidden_size / num_attention_heads"}},
      {{"rms_norm_eps", kImplemented, "in (0, 1); absent: the class default, else refused"}},
      {{"rope_theta", kImplemented, "in (1, 1e18)"}},
      {{"rope_scaling", kImplemented, "rope_type default, linear, llama3, yarn"}},
      {{"rope_parameters", kImplemented,
        "rope_type default, linear, llama3, yarn; partial_rotary_factor 1 only"}},
      {{"max_position_embeddings", kImplemented,
        "yarn's original_max_position_embeddings when that is not given"}},
      {{"hidden_act", kImplemented,
        "silu, gelu (erf), gelu_pytorch_tanh and the ACT2FN names of the same functions: act(gate) * up"}},
      {{"attention_bias", kImplemented, "biases on q/k/v and o"}},
      {{"mlp_bias", kImplemented, "biases on gate/up/down"}},
      {{"tie_word_embeddings", kImplemented, "the head is the embedding table"}},

      {{"partial_rotary_factor", kRefused,
        "rotary embedding on part of each head; the decoder rotates all of head_dim (1.0)"},
       is_one},
      {{"rotary_pct", kRefused,
        "rotary embedding on part of each head; the decoder rotates all of head_dim (1.0)"},
       is_one},
      {{"rotary_dim", kRefused, "rotary embedding on part of each head; the decoder rotates all of head_dim"},
       is_head_dim},
      {{"use_sliding_window", kRefused,
        "sliding-window attention; the decoder attends to the whole context (false)"},
       is_false},
      {{"sliding_window", kRefused,
        "sliding-window attention, on unless use_sliding_window is false; the decoder attends to the whole "
        "context"},
       window_off},
      {{"layer_types", kRefused, "the decoder runs full_attention layers only"},
       all_full_attention,
       first_other_layer_type},
      {{"attn_logit_softcapping", kRefused, "tanh capping of attention scores (null)"}},
      {{"final_logit_softcapping", kRefused, "tanh capping of the logits (null)"}},
      {{"query_pre_attn_scalar", kRefused, "attention scale other than 1/sqrt(head_dim)"}, is_head_dim},
      {{"hidden_activation", kIgnored,
        "read only where the family's transformers MLP reads it (HfFamilyRules::activation_field); "
        "elsewhere transformers never reads it, and a warning names one naming another function"}},
      {{"original_max_position_embeddings", kRefused,
        "a base length for RoPE scaling at the top level (LongRoPE); read where the family's scaling does "
        "not use it"}},
      {{"rope_local_base_freq", kRefused, "a RoPE base of its own for sliding-window layers"}},
      {{"sliding_window_pattern", kRefused, "which layers slide (every Nth is global)"}},
      {{"_sliding_window_pattern", kRefused,
        "which layers slide (every Nth is global), as transformers 5 saves it"}},
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
      {{"decoder_sparse_step", kRefused,
        "which layers are mixtures of experts (in the families that read it)"}},
      {{"mlp_only_layers", kRefused, "which layers are mixtures of experts (in the families that read it)"}},
      {{"shared_expert_intermediate_size", kRefused,
        "a shared expert beside the routed ones (in the families that read it)"}},
      {{"qkv_bias", kRefused, "biases on q/k/v, stated in config.json (in the families that read it)"},
       is_false},
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

const char* class_of(const HfFamilyRules& family) {
  return family.config_class.empty() ? "the family's transformers config class" : family.config_class.c_str();
}

// config.json with the family's class defaults filled in where it lacks a field (as from_dict
// does), checked: a default for a field the reader would not read is a plugin bug.
json with_class_defaults(const json& config, const HfFamilyRules& family) {
  if (!family.defaults.is_object()) throw std::logic_error("HfFamilyRules::defaults must be a JSON object");
  json out = config;
  for (const auto& [key, value] : family.defaults.items()) {
    const Rule* rule = find_rule(key);
    if (!(rule && rule->field.use == kImplemented) && !family.reads.count(key) &&
        key != family.activation_field)
      throw std::logic_error(
          fmt::format("HfFamilyRules::defaults names '{}', which the reader does not read for {}", key,
                      class_of(family)));
    // The RoPE bases apply inside the RoPE parameters (read_ropes), not as a flat field.
    if (key == "rope_theta" || key == "rope_local_base_freq") continue;
    if (!out.contains(key)) out[key] = value;
  }
  return out;
}

// A field Zoo reads a value of, that config.json and the class defaults both lack.
void require(const json& config, const std::string& key, const HfFamilyRules& family,
             const std::string& label) {
  if (!config.contains(key))
    throw InputError(
        fmt::format("{}: missing field '{}' (no default of {} to take)", label, key, class_of(family)));
}

// A RoPE base the RoPE parameters do not state: the class default, else the mixin's default_theta.
double default_base(const HfFamilyRules& family, const char* key, const std::string& label) {
  if (!family.defaults.contains(key) || family.defaults.at(key).is_null()) return 10000.0;
  return number_in(family.defaults.at(key), key, kMinRopeTheta, kMaxRopeTheta, label);
}

}  // namespace

const std::vector<HfFallback>& hf_shared_fallbacks() {
  static const std::vector<HfFallback> table = {
      {"hidden_act", "\"silu\"", "the default of every config class Zoo reads whose plugin states none"},
      {"head_dim", "hidden_size / num_attention_heads",
       "the modeling code's getattr(config, \"head_dim\", hidden_size // num_attention_heads)"},
      {"rope_theta", "10000.0", "RotaryEmbeddingConfigMixin.default_theta"},
      {"tie_word_embeddings", "false",
       "the default of every config class Zoo reads whose plugin states none"},
      {"attention_bias", "false",
       "the default of every class that has the field (the others have no such biases)"},
      {"mlp_bias", "false",
       "the default of the one class that has the field (the others' MLPs have no biases)"},
      {"norm_topk_prob", "false", "the default of every mixture-of-experts class Zoo reads"},
      {"decoder_sparse_step", "1", "the default of every mixture-of-experts class Zoo reads"},
      {"mlp_only_layers", "[]", "the default of every mixture-of-experts class Zoo reads (None, made [])"},
  };
  return table;
}

const std::vector<std::string>& hf_refused_when_absent() {
  static const std::vector<std::string> fields = {"num_key_value_heads",
                                                  "rms_norm_eps",
                                                  "sliding_window",
                                                  "query_pre_attn_scalar",
                                                  "attn_logit_softcapping",
                                                  "final_logit_softcapping",
                                                  "num_experts",
                                                  "shared_expert_intermediate_size"};
  return fields;
}

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

// `default_theta`: the base when neither rope_theta nor the RoPE parameters state one.
RopeParameters read_rope(const nlohmann::json& config, const std::string& label, bool partial_rotary,
                         double default_theta) {
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
  // transformers 5 keeps a nested rope_theta over the flat one (setdefault), 4.x read the flat one:
  // two values are a config whose base depends on the version.
  p.theta = default_theta;
  if (present(config, "rope_theta"))
    p.theta = number_in(config.at("rope_theta"), "rope_theta", kMinRopeTheta, kMaxRopeTheta, label);
  if (rope && present(*rope, "rope_theta")) {
    const double nested =
        number_in(rope->at("rope_theta"), where + ".rope_theta", kMinRopeTheta, kMaxRopeTheta, label);
    if (present(config, "rope_theta") && nested != p.theta)
      throw InputError(fmt::format("{}: rope_theta {} and {}.rope_theta {} disagree; keep one of them", label,
                                   config.at("rope_theta").dump(), where, rope->at("rope_theta").dump()));
    p.theta = nested;
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

// The function an ACT2FN name computes, where Zoo computes that function (transformers 5.25,
// activations.py): swish is nn.SiLU; gelu_python is the erf formula of gelu; gelu_new,
// gelu_python_tanh and gelu_accurate are the tanh formula of gelu_pytorch_tanh with the same
// constants, gelu_fast the same with sqrt(2/pi) rounded to 0.7978845608 (closer than a float32 ulp).
// gelu_10 (clipped), quick_gelu (sigmoid) and the rest are other functions.
std::optional<Activation> act2fn(const json& v, bool gelu_means_tanh) {
  if (!v.is_string()) return std::nullopt;
  const std::string name = v.get<std::string>();
  if (name == "silu" || name == "swish") return Activation::silu;
  if (name == "gelu") return gelu_means_tanh ? Activation::gelu_tanh : Activation::gelu;
  if (name == "gelu_python") return Activation::gelu;
  for (const char* tanh : {"gelu_pytorch_tanh", "gelu_new", "gelu_python_tanh", "gelu_fast", "gelu_accurate"})
    if (name == tanh) return Activation::gelu_tanh;
  return std::nullopt;
}

const char* activation_name(Activation a) {
  return a == Activation::silu ? "silu" : a == Activation::gelu ? "gelu (erf)" : "gelu_pytorch_tanh";
}

// The activation as the family's transformers MLP picks it: the one field it reads
// (`activation_field`, absent: the class default), never the other spelling, which transformers
// keeps as an unread attribute; that one gets a warning when it names another function.
Activation read_activation(const json& config, const json& original, const HfFamilyRules& family,
                           const std::string& label, std::vector<std::string>& warnings) {
  const std::string& field = family.activation_field;
  Activation act = Activation::silu;  // hf_shared_fallbacks
  if (config.contains(field)) {
    const json& v = config.at(field);
    if (v.is_null())
      throw InputError(fmt::format("{}: field '{}' is null: transformers refuses it (the activation's name)",
                                   label, field));
    const auto named = act2fn(v, family.gelu_means_tanh);
    if (!named)
      throw InputError(
          fmt::format("{}: {} {} is not supported: the MLP computes silu (swish), gelu (gelu_python), "
                      "gelu_pytorch_tanh (gelu_new, gelu_python_tanh, gelu_fast, gelu_accurate)",
                      label, field, v.dump()));
    act = *named;
  }
  const char* other = field == "hidden_act" ? "hidden_activation" : "hidden_act";
  if (present(original, other) && act2fn(original.at(other), false) != act)
    warnings.push_back(fmt::format(
        "{}: {} {} is not read: {}'s MLP runs {} as {} says", label, other, original.at(other).dump(),
        family.config_class.empty() ? "the family" : family.config_class, activation_name(act), field));
  return act;
}

// Which layers slide, and through how many tokens: config.json's layer_types when it has them,
// else the family's rule; none where use_sliding_window is false (transformers then drops the
// window whatever the layer types say).
void read_layer_types(const json& config, const HfFamilyRules& family, DecoderSpec& c, const std::string& label) {
  if (!family.sliding_layer) return;  // the table refuses windows for this family
  if (present(config, "use_sliding_window") && !hf_bool(config, "use_sliding_window", false, label)) return;
  require(config, "sliding_window", family, label);
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
  // The stated count under either name (an attribute_map makes them one field in some classes).
  const char* experts_key = present(config, "num_local_experts") && !present(config, "num_experts")
                                ? "num_local_experts"
                            : config.contains("num_experts") ? "num_experts"
                                                             : "num_local_experts";
  // Absent, the classes take one released model's count (docs/validation.md lists them);
  // null they refuse. Neither is a dense model: 0 is.
  if (!config.contains(experts_key))
    throw InputError(
        fmt::format("{}: missing field 'num_experts' (or num_local_experts); no default of {} to take", label,
                    class_of(family)));
  const json& experts = config.at(experts_key);
  if (experts.is_null())
    throw InputError(fmt::format("{}: field '{}' is null: transformers refuses it (0 is a dense model)",
                                 label, experts_key));
  if (experts.is_number_integer() && experts.get<std::int64_t>() == 0) return;
  constexpr std::int64_t kMaxExperts = 4096;
  c.moe.experts = bounded_int(experts, experts_key, kMaxExperts, label);
  c.moe.top_k = positive_int(config, "num_experts_per_tok", c.moe.experts, label);
  c.moe.intermediate_size = positive_int(config, "moe_intermediate_size", kMaxIntermediate, label);
  c.moe.normalize_top_k = hf_bool(config, "norm_topk_prob", false, label);
  if (family.reads.count("shared_expert_intermediate_size")) {
    // Absent, the class takes one released model's size; 0 is no shared expert.
    require(config, "shared_expert_intermediate_size", family, label);
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
      // As the class's convert_rope_params_to_dict: a part without a base takes the flat
      // rope_theta (full) or rope_local_base_freq (sliding), else the class's default base.
      const char* flat = std::string_view(type) == "full_attention" ? "rope_theta" : "rope_local_base_freq";
      const double base = present(config, flat)
                              ? number_in(config.at(flat), flat, kMinRopeTheta, kMaxRopeTheta, label)
                              : default_base(family, flat, label);
      *out = read_rope(part, label + " (rope_parameters." + type + ")", partial, base);
    }
  } else {
    full = read_rope(config, label, partial, default_base(family, "rope_theta", label));
    if (local) {
      slide.theta = present(config, "rope_local_base_freq")
                        ? number_in(config.at("rope_local_base_freq"), "rope_local_base_freq", kMinRopeTheta,
                                    kMaxRopeTheta, label)
                        : default_base(family, "rope_local_base_freq", label);
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
  return read_rope(config, label, false, 10000.0);
}

DecoderSpec read_hf_decoder_config(const nlohmann::json& original, const std::string& family,
                                   const std::string& label, const HfFamilyRules& rules) {
  if (!original.is_object()) throw InputError(fmt::format("{}: config is not a JSON object", label));
  DecoderSpec c;
  check_fields(original, label, rules, c.config_warnings);
  // From here on config.json as transformers' class sees it: the fields it lacks at their defaults.
  const json config = with_class_defaults(original, rules);
  c.family = family;
  c.model_type = hf_model_type(config, "");
  c.vocab_size = positive_int(config, "vocab_size", kMaxVocab, label);
  c.hidden_size = positive_int(config, "hidden_size", kMaxHidden, label);
  c.intermediate_size = positive_int(config, "intermediate_size", kMaxIntermediate, label);
  c.num_layers = positive_int(config, "num_hidden_layers", kMaxLayers, label);
  c.num_heads = positive_int(config, "num_attention_heads", kMaxHeads, label);
  // Absent, the classes disagree (None, i.e. num_attention_heads, or one model's count; see
  // docs/validation.md); null is None wherever transformers accepts it.
  require(config, "num_key_value_heads", rules, label);
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
  // rms_norm_eps is added to a mean of squares: meaningful only small and positive. Absent, the
  // classes disagree (1e-6 most, 1e-5 some).
  require(config, "rms_norm_eps", rules, label);
  c.rms_norm_eps = number_in(config.at("rms_norm_eps"), "rms_norm_eps", 0.0, 1.0, label);

  c.activation = read_activation(config, original, rules, label, c.config_warnings);
  // Families reading these have them as class defaults; null is "none" for the caps (the classes
  // type them float | None) and refused for the query scale (typed int).
  auto scalar = [&](const char* key, bool nullable) {
    if (!rules.reads.count(key)) return 0.0;
    require(config, key, rules, label);
    if (config.at(key).is_null()) {
      if (nullable) return 0.0;
      throw InputError(fmt::format("{}: field '{}' is null: transformers refuses it", label, key));
    }
    return number_in(config.at(key), key, 0.0, 1e9, label);
  };
  c.attn_softcap = scalar("attn_logit_softcapping", true);
  c.final_softcap = scalar("final_logit_softcapping", true);
  if (const double s = scalar("query_pre_attn_scalar", false); s > 0) c.query_scale = 1.0 / std::sqrt(s);
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
