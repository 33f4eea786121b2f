#include "qwen3_config.hpp"

#include <fmt/format.h>

#include "zoo/checked.hpp"
#include "zoo/error.hpp"

namespace zoo::qwen3 {
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

// The rotary base: frequencies are theta^(-2i/d), which are all 1 (no rotation) at theta 1 and
// collapse to 0 or overflow for values near the double range.
constexpr double kMinRopeTheta = 1.0;
constexpr double kMaxRopeTheta = 1e18;

bool truthy(const nlohmann::json& config, const char* key) {
  return config.contains(key) && config.at(key).is_boolean() && config.at(key).get<bool>();
}

}  // namespace

Qwen3Config Qwen3Config::parse(const nlohmann::json& config, const std::string& label) {
  if (!config.is_object()) throw InputError(fmt::format("{}: config is not a JSON object", label));
  Qwen3Config c;
  c.vocab_size = positive_int(config, "vocab_size", kMaxVocab, label);
  c.hidden_size = positive_int(config, "hidden_size", kMaxHidden, label);
  c.intermediate_size = positive_int(config, "intermediate_size", kMaxIntermediate, label);
  c.num_layers = positive_int(config, "num_hidden_layers", kMaxLayers, label);
  c.num_heads = positive_int(config, "num_attention_heads", kMaxHeads, label);
  c.num_kv_heads = config.contains("num_key_value_heads") && !config.at("num_key_value_heads").is_null()
                       ? positive_int(config, "num_key_value_heads", kMaxHeads, label)
                       : c.num_heads;
  // Qwen3 states head_dim explicitly (0.6B: 16 x 128 != 1024); older configs derive it.
  if (config.contains("head_dim") && !config.at("head_dim").is_null()) {
    c.head_dim = positive_int(config, "head_dim", kMaxHeadDim, label);
  } else {
    if (c.hidden_size % c.num_heads != 0)
      throw InputError(fmt::format("{}: hidden_size {} is not divisible by num_attention_heads {} and no head_dim is given",
                                   label, c.hidden_size, c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  // Every derived size, checked once here so that no later product can wrap around.
  checked_mul(c.num_heads, c.head_dim, label + ": num_attention_heads x head_dim");
  if (c.parameter_count_checked(label) <= 0) throw InputError(fmt::format("{}: the model has no parameters", label));
  if (c.head_dim % 2 != 0) throw InputError(fmt::format("{}: head_dim {} must be even for rotary embeddings", label, c.head_dim));
  if (c.num_heads % c.num_kv_heads != 0)
    throw InputError(fmt::format("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", label,
                                 c.num_heads, c.num_kv_heads));
  // rms_norm_eps is added to a mean of squares: meaningful only small and positive.
  if (config.contains("rms_norm_eps")) c.rms_norm_eps = number_in(config.at("rms_norm_eps"), "rms_norm_eps", 0.0, 1.0, label);

  // rope_theta is flat in older configs, under rope_parameters in newer ones; null means "see nested".
  const nlohmann::json* rope = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (config.contains(key) && config.at(key).is_object()) {
      rope = &config.at(key);
      break;
    }
  if (rope) {
    const std::string type = rope->contains("rope_type") && rope->at("rope_type").is_string()
                                 ? rope->at("rope_type").get<std::string>()
                                 : (rope->contains("type") && rope->at("type").is_string() ? rope->at("type").get<std::string>()
                                                                                           : "default");
    if (type != "default")
      throw InputError(fmt::format("{}: unsupported rope_type '{}' (only default rotary embeddings are supported)", label, type));
  }
  if (config.contains("rope_theta") && !config.at("rope_theta").is_null()) {
    c.rope_theta = number_in(config.at("rope_theta"), "rope_theta", kMinRopeTheta, kMaxRopeTheta, label);
  } else if (rope && rope->contains("rope_theta") && !rope->at("rope_theta").is_null()) {
    c.rope_theta = number_in(rope->at("rope_theta"), "rope_parameters.rope_theta", kMinRopeTheta, kMaxRopeTheta, label);
  }

  if (truthy(config, "use_sliding_window"))
    throw InputError(fmt::format("{}: unsupported use_sliding_window: true (sliding-window attention)", label));
  if (truthy(config, "attention_bias")) throw InputError(fmt::format("{}: unsupported attention_bias: true", label));
  if (truthy(config, "mlp_bias")) throw InputError(fmt::format("{}: unsupported mlp_bias: true", label));
  if (config.contains("hidden_act") && config.at("hidden_act") != "silu")
    throw InputError(fmt::format("{}: unsupported hidden_act {} (only silu)", label, config.at("hidden_act").dump()));
  if (config.contains("tie_word_embeddings")) {
    if (!config.at("tie_word_embeddings").is_boolean())
      throw InputError(fmt::format("{}: field 'tie_word_embeddings' must be true or false", label));
    c.tie_word_embeddings = config.at("tie_word_embeddings").get<bool>();
  }
  if (config.contains("max_position_embeddings") && config.at("max_position_embeddings").is_number_integer())
    c.max_position_embeddings = config.at("max_position_embeddings").get<std::int64_t>();
  return c;
}

std::int64_t Qwen3Config::parameter_count_checked(const std::string& label) const {
  auto mul = [&](std::initializer_list<std::int64_t> f) { return checked_product(f, label + ": parameter count"); };
  auto add = [&](std::int64_t a, std::int64_t b) { return checked_add(a, b, label + ": parameter count"); };
  const std::int64_t qkv = add(q_dim(), mul({2, kv_dim()}));
  const std::int64_t attn = add(add(mul({hidden_size, qkv}), mul({q_dim(), hidden_size})), mul({2, head_dim}));
  const std::int64_t layer = add(add(attn, mul({3, hidden_size, intermediate_size})), mul({2, hidden_size}));
  return add(add(mul({vocab_size, hidden_size, tie_word_embeddings ? 1 : 2}), mul({num_layers, layer})), hidden_size);
}

std::int64_t Qwen3Config::parameter_count() const { return parameter_count_checked("qwen3 config"); }

std::int64_t Qwen3Config::kv_cache_elements(std::int64_t max_context, const std::string& label) const {
  check_range(max_context, 1, kMaxContextTokens, label + ": max_context");
  return checked_product({2, num_layers, max_context, kv_dim()}, label + ": KV cache of max_context " +
                                                                     std::to_string(max_context) + " tokens");
}

std::string Qwen3Config::summary() const {
  return fmt::format("qwen3 {:.2f}B params: {} layers, hidden {}, {} heads / {} kv x {}, ffn {}, vocab {}{}",
                     static_cast<double>(parameter_count()) / 1e9, num_layers, hidden_size, num_heads, num_kv_heads,
                     head_dim, intermediate_size, vocab_size, tie_word_embeddings ? ", tied head" : "");
}

}  // namespace zoo::qwen3
