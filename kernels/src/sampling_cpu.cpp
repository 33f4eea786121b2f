// Reductions over a row of logits used when picking tokens.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "zoo/kernels/cpu_ops.hpp"

namespace zoo::kernels::cpu {
namespace {
// Strict "ranks before" order: larger value first, ties to the lower index. NaN ranks above
// every number, as in torch.argmax / torch.topk, which also keeps the order strict-weak (std
// algorithms misbehave with a plain `>` when NaN is present).
inline bool ranks_before(const float* v, std::int64_t a, std::int64_t b) {
  const bool nan_a = std::isnan(v[a]), nan_b = std::isnan(v[b]);
  if (nan_a || nan_b) return nan_a && (!nan_b || a < b);
  return v[a] > v[b] || (v[a] == v[b] && a < b);
}
}  // namespace

std::int64_t argmax(std::span<const float> values) {
  if (values.empty()) throw std::invalid_argument("argmax: empty input");
  const float* v = values.data();
  std::int64_t best = 0;
  const auto n = static_cast<std::int64_t>(values.size());
  for (std::int64_t i = 1; i < n; ++i) {
    if (ranks_before(v, i, best)) best = i;
  }
  return best;
}

void log_softmax(const float* x, float* out, std::int64_t n) {
  if (n <= 0) return;
  const float max_value = *std::max_element(x, x + n);
  if (std::isinf(max_value) && max_value < 0) {
    // Every entry is -inf: there is no distribution; torch yields NaN as well.
    std::fill(out, out + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(std::exp(x[i] - max_value));
  const double log_normalizer = static_cast<double>(max_value) + std::log(sum);
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(x[i]) - log_normalizer);
}

void top_k(std::span<const float> values, int k, std::int64_t* indices) {
  const auto n = static_cast<std::int64_t>(values.size());
  if (k < 0 || k > n) {
    throw std::invalid_argument("top_k: k = " + std::to_string(k) + " is outside [0, " + std::to_string(n) + "]");
  }
  if (k == 0) return;
  const float* v = values.data();
  if (k == 1) {
    indices[0] = argmax(values);
    return;
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  const auto cmp = [v](std::int64_t a, std::int64_t b) { return ranks_before(v, a, b); };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp);
  std::copy(order.begin(), order.begin() + k, indices);
}

}  // namespace zoo::kernels::cpu
