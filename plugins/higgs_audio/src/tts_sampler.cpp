#include "tts_sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "zoo/error.hpp"
#include "zoo/random.hpp"

namespace zoo::higgs {
namespace {

bool greedy(const TtsSampling& s) { return s.temperature <= kGreedyTemperature; }

}  // namespace

std::int64_t argmax_first(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("argmax of an empty row");
  std::size_t best = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) throw std::invalid_argument(fmt::format("logits hold NaN at index {}", i));
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<std::int64_t>(best);
}

std::vector<double> filtered_probabilities(std::span<const float> logits, const TtsSampling& sampling) {
  if (greedy(sampling)) throw std::invalid_argument("filtered_probabilities at a greedy temperature");
  const std::size_t V = logits.size();
  if (V == 0) throw std::invalid_argument("filtered_probabilities of an empty row");
  std::vector<double> scaled(V);
  for (std::size_t i = 0; i < V; ++i) {
    if (std::isnan(logits[i])) throw std::invalid_argument(fmt::format("logits hold NaN at index {}", i));
    scaled[i] = static_cast<double>(logits[i]) / static_cast<double>(sampling.temperature);
  }
  const double top = *std::max_element(scaled.begin(), scaled.end());
  if (!std::isfinite(top)) throw std::invalid_argument("logits are all -inf (or +inf present)");

  // Top-k: keep every entry >= the k-th largest value, ties included.
  std::vector<std::size_t> order;  // the survivors
  order.reserve(V);
  if (sampling.top_k > 0 && static_cast<std::size_t>(sampling.top_k) < V) {
    std::vector<double> values(scaled);
    const auto kth_at = values.begin() + (sampling.top_k - 1);
    std::nth_element(values.begin(), kth_at, values.end(), std::greater<>());
    const double kth = *kth_at;
    for (std::size_t i = 0; i < V; ++i)
      if (scaled[i] >= kth) order.push_back(i);
  } else {
    for (std::size_t i = 0; i < V; ++i) order.push_back(i);
  }
  // -inf entries carry no mass either way; leave them out of the softmax.
  std::erase_if(order, [&](std::size_t i) { return std::isinf(scaled[i]); });

  double total = 0;
  for (std::size_t i : order) total += std::exp(scaled[i] - top);

  // Top-p over the survivors, by value descending (ties to the lower index): rank r is removed when
  // the cumulative probability of ranks < r already exceeds top_p (the reference's "cum > p,
  // shifted right by one, rank 0 kept"). A heap ranks only as many as are kept.
  if (sampling.top_p < 1.0f) {
    const double p = static_cast<double>(sampling.top_p);
    const auto after = [&](std::size_t a, std::size_t b) { return scaled[a] < scaled[b] || (scaled[a] == scaled[b] && a > b); };
    std::make_heap(order.begin(), order.end(), after);
    std::vector<std::size_t> ranked;
    double cum = 0;
    while (!order.empty() && (ranked.empty() || cum / total <= p)) {
      std::pop_heap(order.begin(), order.end(), after);
      ranked.push_back(order.back());
      order.pop_back();
      cum += std::exp(scaled[ranked.back()] - top);
    }
    order = std::move(ranked);
    total = cum;
  }

  std::vector<double> probs(V, 0.0);
  for (std::size_t i : order) probs[i] = std::exp(scaled[i] - top) / total;
  return probs;
}

TtsSampler::TtsSampler(TtsSampling sampling) : sampling_(sampling), state_(sampling.seed) {
  if (!std::isfinite(sampling_.temperature) || sampling_.temperature < 0)
    throw InputError(fmt::format("temperature must be a finite number >= 0, got {}", sampling_.temperature));
  if (!(sampling_.top_p >= 0.0f && sampling_.top_p <= 1.0f))
    throw InputError(fmt::format("top-p must be within [0, 1], got {}", sampling_.top_p));
}

std::int64_t TtsSampler::sample(std::span<const float> logits) {
  if (greedy(sampling_)) return argmax_first(logits);
  const std::vector<double> probs = filtered_probabilities(logits, sampling_);
  const double u = uniform01(state_);
  double cum = 0;
  std::int64_t last = -1;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    last = static_cast<std::int64_t>(i);
    cum += probs[i];
    if (u < cum) return last;
  }
  return last;  // u within rounding of 1: the last token with mass
}

std::vector<std::int64_t> TtsSampler::sample_rows(std::span<const float> logits, std::int64_t num_codebooks) {
  if (num_codebooks <= 0 || logits.size() % static_cast<std::size_t>(num_codebooks) != 0)
    throw std::invalid_argument(fmt::format("{} logits do not split into {} codebooks", logits.size(), num_codebooks));
  const std::size_t V = logits.size() / static_cast<std::size_t>(num_codebooks);
  std::vector<std::int64_t> codes(static_cast<std::size_t>(num_codebooks));
  for (std::size_t c = 0; c < codes.size(); ++c) codes[c] = sample(logits.subspan(c * V, V));
  return codes;
}

}  // namespace zoo::higgs
