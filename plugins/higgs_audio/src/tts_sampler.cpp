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

bool TtsSampler::greedy() const { return higgs::greedy(sampling_); }

std::int64_t TtsSampler::sample(std::span<const float> logits) {
  if (greedy()) return argmax_first(logits);
  filter_survivors(logits, sampling_, scratch_, survivors_);
  return draw(uniform01(state_));  // drawn after the row passed its checks, as ever
}

std::int64_t TtsSampler::sample(std::span<const float> logits, double u) {
  if (greedy()) return argmax_first(logits);
  filter_survivors(logits, sampling_, scratch_, survivors_);
  return draw(u);
}

std::int64_t TtsSampler::draw(double u) const {
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

namespace {

std::size_t codebook_width(std::span<const float> logits, std::int64_t num_codebooks) {
  if (num_codebooks <= 0 || logits.size() % static_cast<std::size_t>(num_codebooks) != 0)
    throw std::invalid_argument(fmt::format("{} logits do not split into {} codebooks", logits.size(), num_codebooks));
  return logits.size() / static_cast<std::size_t>(num_codebooks);
}

}  // namespace

std::vector<std::int64_t> TtsSampler::sample_rows(std::span<const float> logits, std::int64_t num_codebooks) {
  const std::size_t V = codebook_width(logits, num_codebooks);
  std::vector<std::int64_t> codes(static_cast<std::size_t>(num_codebooks));
  for (std::size_t c = 0; c < codes.size(); ++c) codes[c] = sample(logits.subspan(c * V, V));
  return codes;
}

std::vector<std::int64_t> TtsSampler::sample_rows(std::span<const float> logits, std::int64_t num_codebooks,
                                                  std::span<const double> u) {
  const std::size_t V = codebook_width(logits, num_codebooks);
  const bool draws = !greedy();
  if (draws && u.size() != static_cast<std::size_t>(num_codebooks))
    throw std::invalid_argument(fmt::format("{} uniforms for {} codebooks", u.size(), num_codebooks));
  std::vector<std::int64_t> codes(static_cast<std::size_t>(num_codebooks));
  for (std::size_t c = 0; c < codes.size(); ++c) codes[c] = sample(logits.subspan(c * V, V), draws ? u[c] : 0.0);
  return codes;
}

std::vector<double> TtsSampler::uniforms(std::int64_t n) {
  std::vector<double> u;
  if (greedy()) return u;
  for (std::int64_t i = 0; i < n; ++i) u.push_back(uniform01(state_));
  return u;
}

HeadSampleRequest TtsSampler::head_request(std::int64_t num_codebooks, std::span<const double> u) const {
  // The device rule's greedy is temperature 0; this sampler's is any temperature up to kGreedyTemperature.
  return {.rule = SegmentSampleRule::threshold_top_k_index_cdf,
          .segments = num_codebooks,
          .temperature = greedy() ? 0.0f : sampling_.temperature,
          .top_k = sampling_.top_k,
          .top_p = sampling_.top_p,
          .u = greedy() ? std::span<const double>() : u};
}

std::vector<std::int64_t> TtsSampler::accept(std::span<const SampledToken> picks) const {
  std::vector<std::int64_t> codes;
  for (const SampledToken& pick : picks) {
    // The messages of argmax_first and filter_survivors, which would have refused the same row.
    if (pick.bad_index >= 0 && std::isnan(pick.bad_value))
      throw std::invalid_argument(fmt::format("logits hold NaN at index {}", pick.bad_index));
    if (!greedy() && (pick.bad_index >= 0 || pick.all_masked))
      throw std::invalid_argument("logits are all -inf (or +inf present)");
    codes.push_back(pick.id);
  }
  return codes;
}

}  // namespace zoo::higgs
