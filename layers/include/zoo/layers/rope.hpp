#pragma once
// Rotary-embedding frequency tables, computed once per model the way transformers computes them
// (float32 arithmetic in the same order), so kernels take a table instead of a theta and every
// scaling scheme costs nothing per token.
#include <cstdint>
#include <optional>
#include <string>

#include "zoo/layers/decoder.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

struct RopeParameters {
  std::string type = "default";  // default | linear | llama3 | yarn
  double theta = 10000.0;
  double factor = 1.0;  // linear, llama3, yarn
  // llama3: frequencies with wavelength above original/low_freq_factor are divided by factor,
  // below original/high_freq_factor kept, and smoothly interpolated in between.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 0;  // llama3, yarn
  // yarn
  std::optional<double> attention_factor;
  std::optional<double> mscale, mscale_all_dim;
  double beta_fast = 32.0, beta_slow = 1.0;
  bool truncate = true;
  double partial_rotary_factor = 1.0;  // as stated in the RoPE parameters (transformers 5 keeps it there)
};

// The table for `head_dim` (even). InputError naming `label` when the parameters make no sense
// (factor <= 0, low_freq_factor >= high_freq_factor, ...).
RopeTable make_rope_table(const RopeParameters& p, std::int64_t head_dim, const std::string& label);

}  // namespace zoo::layers
