#pragma once
// Checked size arithmetic and value ranges for numbers that come from user files (config.json,
// model YAML, flags). Every product or sum that sizes an allocation or a loop goes through here,
// so an absurd value is rejected by name before anything is allocated, instead of wrapping
// around into a tiny buffer (heap corruption) or a zero divisor (SIGFPE).
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "zoo/error.hpp"

namespace zoo {

// The largest KV-cache capacity (tokens) a model may be asked for: 16M, above every context
// length shipped today (10M), small enough that max_context times any bounded per-token size
// stays far from 64-bit overflow.
inline constexpr std::int64_t kMaxContextTokens = std::int64_t{1} << 24;
// The most ranks a model may be split over (model.tensor_parallel, --tensor-parallel): more than
// any host has GPUs, and few enough that a mistyped value does not start thousands of threads.
inline constexpr std::int64_t kMaxTensorParallel = 64;

// a * b for non-negative sizes; InputError "<what>: A x B overflows" when the product does not fit
// in int64. `what` names the field or quantity ("ckpt/config.json: num_attention_heads x head_dim").
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &out))
    throw InputError(fmt::format("{}: {} x {} does not fit in a 64-bit size", what, a, b));
  return out;
}

inline std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &out))
    throw InputError(fmt::format("{}: {} + {} does not fit in a 64-bit size", what, a, b));
  return out;
}

// The product of all factors, checked at every step (a later 0 must not hide an earlier overflow).
inline std::int64_t checked_product(std::initializer_list<std::int64_t> factors, std::string_view what) {
  std::int64_t out = 1;
  for (auto f : factors) {
    if (f < 0 || __builtin_mul_overflow(out, f, &out))
      throw InputError(fmt::format("{}: the product does not fit in a 64-bit size", what));
  }
  return out;
}

// A count read from a file: InputError "<what> = N is out of range (LO..HI)" unless lo <= n <= hi.
inline std::int64_t check_range(std::int64_t n, std::int64_t lo, std::int64_t hi, std::string_view what) {
  if (n < lo || n > hi) throw InputError(fmt::format("{} = {} is out of range (expected {}..{})", what, n, lo, hi));
  return n;
}

// A real number that must be finite and inside (lo, hi) (both exclusive): rejects NaN, Inf and
// values that make the math meaningless (a rope base of 1e-300, a norm epsilon of 1e308).
inline double check_open_range(double x, double lo, double hi, std::string_view what) {
  if (!std::isfinite(x)) throw InputError(fmt::format("{} = {} is not a finite number", what, x));
  if (!(x > lo && x < hi))
    throw InputError(fmt::format("{} = {} is out of range (expected a value above {} and below {})", what, x, lo, hi));
  return x;
}

}  // namespace zoo
