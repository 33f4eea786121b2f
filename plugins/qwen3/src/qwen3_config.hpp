#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace zoo::qwen3 {

// The subset of a HF Qwen3 config.json this plugin runs. Anything outside the supported set (other
// rope types, sliding windows, attention/MLP biases) is rejected by parse() with the field named.
struct Qwen3Config {
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  std::int64_t max_position_embeddings = 0;

  // `label` names the source in messages ("ckpt/config.json", or "config.json text_config").
  static Qwen3Config parse(const nlohmann::json& config, const std::string& label);
  std::string summary() const;
  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
  std::int64_t parameter_count() const;
  // The same, throwing InputError naming `label` if it does not fit in 64 bits (parse() checks
  // this, so parameter_count() of a parsed config cannot overflow).
  std::int64_t parameter_count_checked(const std::string& label) const;
  // K and V cache elements for `max_context` tokens (both caches, all layers); InputError naming
  // max_context when it is out of range or the size does not fit in 64 bits.
  std::int64_t kv_cache_elements(std::int64_t max_context, const std::string& label) const;
};

}  // namespace zoo::qwen3
