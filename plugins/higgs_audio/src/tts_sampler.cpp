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

void filter_survivors(std::span<const float> logits, const TtsSampling& sampling, FilterScratch& scratch,
                      Survivors& out) {
  if (greedy(sampling)) throw std::invalid_argument("filtered_probabilities at a greedy temperature");
  const std::size_t V = logits.size();
  if (V == 0) throw std::invalid_argument("filtered_probabilities of an empty row");
  // x / temperature (in double) is strictly increasing in the float logit x, so the top and the
  // top-k threshold are found on the logits themselves and only the survivors are scaled.
  std::size_t best = 0;
  for (std::size_t i = 0; i < V; ++i) {
    if (std::isnan(logits[i])) throw std::invalid_argument(fmt::format("logits hold NaN at index {}", i));
    if (logits[i] > logits[best]) best = i;
  }
  const double temperature = sampling.temperature;
  const auto scaled = [&](std::size_t i) { return static_cast<double>(logits[i]) / temperature; };
  const double top = scaled(best);
  if (!std::isfinite(top)) throw std::invalid_argument("logits are all -inf (or +inf present)");

  // Top-k: keep every entry >= the k-th largest value, ties included; -inf entries carry no mass
  // either way and are left out of the softmax.
  float kth = -std::numeric_limits<float>::infinity();
  if (sampling.top_k > 0 && static_cast<std::size_t>(sampling.top_k) < V) {
    scratch.values.assign(logits.begin(), logits.end());
    const auto kth_at = scratch.values.begin() + (sampling.top_k - 1);
    std::nth_element(scratch.values.begin(), kth_at, scratch.values.end(), std::greater<>());
    kth = *kth_at;
  }
  auto& order = out.index;
  order.clear();
  for (std::size_t i = 0; i < V; ++i)
    if (logits[i] >= kth && !std::isinf(logits[i])) order.push_back(i);

  double total = 0;
  for (std::size_t i : order) total += std::exp(scaled(i) - top);

  // Top-p over the survivors, by value descending (ties to the lower index): rank r is removed when
  // the cumulative probability of ranks < r already exceeds top_p (the reference's "cum > p,
  // shifted right by one, rank 0 kept"). A heap ranks only as many as are kept.
  if (sampling.top_p < 1.0f) {
    const double p = static_cast<double>(sampling.top_p);
    const auto after = [&](std::size_t a, std::size_t b) { return logits[a] < logits[b] || (logits[a] == logits[b] && a > b); };
    std::make_heap(order.begin(), order.end(), after);
    auto& ranked = scratch.ranked;
    ranked.clear();
    double cum = 0;
    while (!order.empty() && (ranked.empty() || cum / total <= p)) {
      std::pop_heap(order.begin(), order.end(), after);
      ranked.push_back(order.back());
      order.pop_back();
      cum += std::exp(scaled(ranked.back()) - top);
    }
    order.assign(ranked.begin(), ranked.end());
    std::sort(order.begin(), order.end());  // back to index order
    total = cum;
  }
  out.probability.resize(order.size());
  for (std::size_t j = 0; j < order.size(); ++j) out.probability[j] = std::exp(scaled(order[j]) - top) / total;
}

std::vector<double> filtered_probabilities(std::span<const float> logits, const TtsSampling& sampling) {
  FilterScratch scratch;
  Survivors survivors;
  filter_survivors(logits, sampling, scratch, survivors);
  std::vector<double> probs(logits.size(), 0.0);
  for (std::size_t j = 0; j < survivors.index.size(); ++j) probs[survivors.index[j]] = survivors.probability[j];
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
  filter_survivors(logits, sampling_, scratch_, survivors_);
  const double u = uniform01(state_);
  double cum = 0;
  std::int64_t last = -1;
  for (std::size_t j = 0; j < survivors_.index.size(); ++j) {  // index order, as the CDF runs
    if (survivors_.probability[j] <= 0) continue;
    last = static_cast<std::int64_t>(survivors_.index[j]);
    cum += survivors_.probability[j];
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
