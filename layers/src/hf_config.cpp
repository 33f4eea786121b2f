#include "zoo/layers/hf_config.hpp"

#include <fmt/format.h>

#include "zoo/checked.hpp"
#include "zoo/error.hpp"

namespace zoo::layers {
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

}  // namespace

bool hf_bool(const nlohmann::json& config, const char* key, bool fallback, const std::string& label) {
  if (!present(config, key)) return fallback;
  if (!config.at(key).is_boolean()) throw InputError(fmt::format("{}: field '{}' must be true or false", label, key));
  return config.at(key).get<bool>();
}

RopeParameters read_hf_rope_parameters(const nlohmann::json& config, const std::string& label) {
  // Newer configs nest everything under rope_parameters; older ones have a flat rope_theta and
  // the scaling under rope_scaling. A null flat value means "see the nested one".
  const nlohmann::json* rope = nullptr;
  std::string where;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (config.contains(key) && config.at(key).is_object()) {
      rope = &config.at(key);
      where = key;
      break;
    }
  RopeParameters p;
  if (rope) p.type = rope_type(*rope);
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
  if (present(*rope, "partial_rotary_factor") &&
      !(rope->at("partial_rotary_factor").is_number() && rope->at("partial_rotary_factor").get<double>() == 1.0))
    throw InputError(fmt::format("{}: unsupported {}.partial_rotary_factor (only 1)", label, where));
  return p;
}

DecoderSpec read_hf_decoder_config(const nlohmann::json& config, const std::string& family, const std::string& label) {
  if (!config.is_object()) throw InputError(fmt::format("{}: config is not a JSON object", label));
  DecoderSpec c;
  c.family = family;
  if (config.contains("model_type") && config.at("model_type").is_string()) c.model_type = config.at("model_type");
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

  if (hf_bool(config, "use_sliding_window", false, label))
    throw InputError(fmt::format("{}: unsupported use_sliding_window: true (sliding-window attention)", label));
  if (config.contains("hidden_act") && config.at("hidden_act") != "silu")
    throw InputError(fmt::format("{}: unsupported hidden_act {} (only silu)", label, config.at("hidden_act").dump()));
  c.qkv_bias = c.o_bias = hf_bool(config, "attention_bias", false, label);
  c.mlp_bias = hf_bool(config, "mlp_bias", false, label);
  if (config.contains("tie_word_embeddings")) {
    if (!config.at("tie_word_embeddings").is_boolean())
      throw InputError(fmt::format("{}: field 'tie_word_embeddings' must be true or false", label));
    c.tie_word_embeddings = config.at("tie_word_embeddings").get<bool>();
  }
  if (config.contains("max_position_embeddings") && config.at("max_position_embeddings").is_number_integer())
    c.max_position_embeddings = config.at("max_position_embeddings").get<std::int64_t>();
  c.rope = make_rope_table(read_hf_rope_parameters(config, label), c.head_dim, label);
  c.check(label);
  return c;
}

}  // namespace zoo::layers
