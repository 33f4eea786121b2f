#include "zoo/layers/rope.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "zoo/error.hpp"
#include "zoo/kernels/cpu_ops.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {
namespace {

// transformers' _compute_llama3_parameters, in float32 like its tensor ops.
void apply_llama3(std::vector<float>& inv_freq, const RopeParameters& p) {
  const auto factor = static_cast<float>(p.factor);
  const auto low = static_cast<float>(p.low_freq_factor), high = static_cast<float>(p.high_freq_factor);
  const auto old_context = static_cast<float>(p.original_max_position_embeddings);
  const float low_freq_wavelen = static_cast<float>(static_cast<double>(p.original_max_position_embeddings) / p.low_freq_factor);
  const float high_freq_wavelen =
      static_cast<float>(static_cast<double>(p.original_max_position_embeddings) / p.high_freq_factor);
  for (float& f : inv_freq) {
    const float wavelen = static_cast<float>(2 * std::numbers::pi) / f;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const float smooth = (old_context / wavelen - low) / (high - low);
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    f = medium ? (1 - smooth) * scaled / factor + smooth * scaled : scaled;
  }
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// transformers' _compute_yarn_parameters: returns the attention factor.
float apply_yarn(std::vector<float>& inv_freq, const RopeParameters& p, std::int64_t dim) {
  const double base = static_cast<float>(p.theta);
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(static_cast<double>(p.original_max_position_embeddings) /
                                                (rotations * 2 * std::numbers::pi))) /
           (2 * std::log(base));
  };
  double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  const auto factor = static_cast<float>(p.factor);
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const auto pos_freq = static_cast<float>(std::pow(base, static_cast<double>(exponent)));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp((static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f, 1.0f);
    const float extrapolation_factor = 1 - ramp;
    inv_freq[i] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  if (p.attention_factor) return static_cast<float>(*p.attention_factor);
  if (p.mscale && p.mscale_all_dim && *p.mscale != 0 && *p.mscale_all_dim != 0)
    return static_cast<float>(yarn_mscale(p.factor, *p.mscale) / yarn_mscale(p.factor, *p.mscale_all_dim));
  return static_cast<float>(yarn_mscale(p.factor, 1.0));
}

}  // namespace

RopeTable make_rope_table(const RopeParameters& p, std::int64_t head_dim, const std::string& label) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw InputError(fmt::format("{}: head_dim {} must be positive and even for rotary embeddings", label, head_dim));
  if (!(p.factor > 0) || !std::isfinite(p.factor))
    throw InputError(fmt::format("{}: rope factor = {} must be a positive number", label, p.factor));
  RopeTable table;
  table.inv_freq = kernels::cpu::rope_default_inv_freq(head_dim, p.theta);
  if (p.type == "default") {
    table.summary = fmt::format("default, theta {:g}", p.theta);
  } else if (p.type == "linear") {
    for (float& f : table.inv_freq) f /= static_cast<float>(p.factor);
    table.summary = fmt::format("linear x{:g}, theta {:g}", p.factor, p.theta);
  } else if (p.type == "llama3") {
    if (p.original_max_position_embeddings <= 0)
      throw InputError(fmt::format("{}: llama3 rope scaling needs original_max_position_embeddings", label));
    if (!(p.low_freq_factor > 0) || !(p.high_freq_factor > p.low_freq_factor))
      throw InputError(fmt::format("{}: llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor (got {} and {})",
                                   label, p.low_freq_factor, p.high_freq_factor));
    apply_llama3(table.inv_freq, p);
    table.summary = fmt::format("llama3 x{:g}, theta {:g}", p.factor, p.theta);
  } else if (p.type == "yarn") {
    if (p.original_max_position_embeddings <= 0)
      throw InputError(fmt::format("{}: yarn rope scaling needs original_max_position_embeddings", label));
    if (!(p.beta_fast > 0) || !(p.beta_slow > 0))
      throw InputError(fmt::format("{}: yarn beta_fast and beta_slow must be positive", label));
    table.attention_scaling = apply_yarn(table.inv_freq, p, head_dim);
    if (!std::isfinite(table.attention_scaling) || table.attention_scaling <= 0)
      throw InputError(fmt::format("{}: yarn attention factor {} is not a positive number", label, table.attention_scaling));
    table.summary = fmt::format("yarn x{:g}, theta {:g}", p.factor, p.theta);
  } else {
    throw InputError(fmt::format("{}: unsupported rope_type '{}' (supported: default, linear, llama3, yarn)", label, p.type));
  }
  return table;
}

}  // namespace zoo::layers
