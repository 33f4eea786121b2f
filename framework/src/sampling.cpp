#include "zoo/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace zoo {

namespace {

// NaN never wins; -inf only when everything is.
float rank_value(float x) { return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x; }

std::int64_t greedy(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (rank_value(logits[i]) > rank_value(logits[best])) best = i;
  return static_cast<std::int64_t>(best);
}

// The pick of sample_logits (temperature > 0); `scratch` is reused across calls.
std::int64_t pick(std::span<const float> logits, const SampleRequest& r,
                  std::vector<std::pair<float, std::int64_t>>& scratch) {
  // Filter: candidates ordered by scaled logit, ties to the lower index; only the top-k need sorting.
  scratch.clear();
  scratch.reserve(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    scratch.emplace_back(rank_value(logits[i]) / r.temperature, static_cast<std::int64_t>(i));
  auto before = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  std::size_t keep = scratch.size();
  if (r.top_k > 0) keep = std::min(keep, static_cast<std::size_t>(r.top_k));
  std::partial_sort(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(keep), scratch.end(), before);
  scratch.resize(keep);

  const double top = scratch.front().first;
  if (!std::isfinite(top)) return scratch.front().second;  // nothing has probability: fall back to greedy
  std::vector<double> prob(keep);
  double total = 0;
  for (std::size_t i = 0; i < keep; ++i) total += prob[i] = std::exp(static_cast<double>(scratch[i].first) - top);

  // Nucleus: the smallest prefix whose probability mass reaches top_p (at least one token).
  if (r.top_p < 1.0f) {
    double mass = 0;
    std::size_t n = 0;
    while (n < keep) {
      mass += prob[n++];
      if (mass >= r.top_p * total) break;
    }
    keep = n;
    total = mass;
  }

  // Pick with the caller's uniform draw.
  const double u = r.u * total;
  double cumulative = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    cumulative += prob[i];
    if (u < cumulative) return scratch[i].second;
  }
  return scratch[keep - 1].second;  // rounding left u at the very top
}

}  // namespace

SampledToken sample_logits(std::span<const float> logits, const SampleRequest& request,
                           std::vector<std::pair<float, std::int64_t>>& scratch) {
  if (logits.empty()) throw std::invalid_argument("sample_logits: empty logits");
  SampledToken out;
  const auto bad = std::find_if(logits.begin(), logits.end(), [](float x) { return std::isnan(x) || x == INFINITY; });
  if (bad != logits.end()) {
    out.bad_index = bad - logits.begin();
    out.bad_value = *bad;
  }
  out.all_masked = std::all_of(logits.begin(), logits.end(), [](float x) { return x == -INFINITY; });
  out.id = request.temperature == 0.0f ? greedy(logits) : pick(logits, request, scratch);
  out.logit = logits[static_cast<std::size_t>(out.id)];
  return out;
}


SampledToken sample_logits(std::span<const float> logits, const SampleRequest& request) {
  std::vector<std::pair<float, std::int64_t>> scratch;
  return sample_logits(logits, request, scratch);
}


}  // namespace zoo
