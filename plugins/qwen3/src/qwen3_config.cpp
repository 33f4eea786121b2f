#include "qwen3_config.hpp"

#include <fmt/format.h>

#include "zoo/error.hpp"

namespace zoo::qwen3 {
namespace {

// Reads an integer field that must be present and positive.
std::int64_t positive_int(const nlohmann::json& config, const char* key, const std::string& label) {
  if (!config.contains(key)) throw InputError(fmt::format("{}: missing field '{}'", label, key));
  const auto& value = config.at(key);
  if (!value.is_number_integer()) throw InputError(fmt::format("{}: field '{}' must be an integer", label, key));
  const auto n = value.get<std::int64_t>();
  if (n <= 0) throw InputError(fmt::format("{}: field '{}' must be positive (got {})", label, key, n));
  return n;
}

double positive_number(const nlohmann::json& value, const std::string& what, const std::string& label) {
  if (!value.is_number()) throw InputError(fmt::format("{}: field '{}' must be a number", label, what));
  const double x = value.get<double>();
  if (!(x > 0)) throw InputError(fmt::format("{}: field '{}' must be positive", label, what));
  return x;
}

bool truthy(const nlohmann::json& config, const char* key) {
  return config.contains(key) && config.at(key).is_boolean() && config.at(key).get<bool>();
}

}  // namespace

Qwen3Config Qwen3Config::parse(const nlohmann::json& config, const std::string& label) {
  if (!config.is_object()) throw InputError(fmt::format("{}: config is not a JSON object", label));
  Qwen3Config c;
  c.vocab_size = positive_int(config, "vocab_size", label);
  c.hidden_size = positive_int(config, "hidden_size", label);
  c.intermediate_size = positive_int(config, "intermediate_size", label);
  c.num_layers = positive_int(config, "num_hidden_layers", label);
  c.num_heads = positive_int(config, "num_attention_heads", label);
  c.num_kv_heads = config.contains("num_key_value_heads") && !config.at("num_key_value_heads").is_null()
                       ? positive_int(config, "num_key_value_heads", label)
                       : c.num_heads;
  // Qwen3 states head_dim explicitly (0.6B: 16 x 128 != 1024); older configs derive it.
  if (config.contains("head_dim") && !config.at("head_dim").is_null()) {
    c.head_dim = positive_int(config, "head_dim", label);
  } else {
    if (c.hidden_size % c.num_heads != 0)
      throw InputError(fmt::format("{}: hidden_size {} is not divisible by num_attention_heads {} and no head_dim is given",
                                   label, c.hidden_size, c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) throw InputError(fmt::format("{}: head_dim {} must be even for rotary embeddings", label, c.head_dim));
  if (c.num_heads % c.num_kv_heads != 0)
    throw InputError(fmt::format("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", label,
                                 c.num_heads, c.num_kv_heads));
  if (config.contains("rms_norm_eps")) c.rms_norm_eps = positive_number(config.at("rms_norm_eps"), "rms_norm_eps", label);

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
    c.rope_theta = positive_number(config.at("rope_theta"), "rope_theta", label);
  } else if (rope && rope->contains("rope_theta") && !rope->at("rope_theta").is_null()) {
    c.rope_theta = positive_number(rope->at("rope_theta"), "rope_parameters.rope_theta", label);
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

std::int64_t Qwen3Config::parameter_count() const {
  const std::int64_t attn = hidden_size * (q_dim() + 2 * kv_dim()) + q_dim() * hidden_size + 2 * head_dim;
  const std::int64_t mlp = 3 * hidden_size * intermediate_size;
  const std::int64_t layer = attn + mlp + 2 * hidden_size;
  return vocab_size * hidden_size * (tie_word_embeddings ? 1 : 2) + num_layers * layer + hidden_size;
}

std::string Qwen3Config::summary() const {
  return fmt::format("qwen3 {:.2f}B params: {} layers, hidden {}, {} heads / {} kv x {}, ffn {}, vocab {}{}",
                     static_cast<double>(parameter_count()) / 1e9, num_layers, hidden_size, num_heads, num_kv_heads,
                     head_dim, intermediate_size, vocab_size, tie_word_embeddings ? ", tied head" : "");
}

}  // namespace zoo::qwen3
