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
//
// Candidates are ranked by scaled logit, ties to the lower index, and the draw walks that ranking.
// With top-k only the k best need sorting. Without it, sorting the whole vocabulary would cost
// 20 ms a token on a slow core (151936 entries); a heap ranks lazily instead, only as far as the
// nucleus or the draw reaches (a handful of tokens for a peaked distribution). The full mass is then
// summed in index order rather than rank order, which can move a pick only when the draw lands
// within float64 rounding of a boundary.
std::int64_t pick(std::span<const float> logits, const SampleRequest& r,
                  std::vector<std::pair<float, std::int64_t>>& scratch) {
  scratch.clear();
  scratch.reserve(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    scratch.emplace_back(rank_value(logits[i]) / r.temperature, static_cast<std::int64_t>(i));
  auto before = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  const bool top_k = r.top_k > 0 && static_cast<std::size_t>(r.top_k) < scratch.size();
  std::vector<double> prob;
  std::size_t keep = 0;
  double total = 0;
  if (top_k) {
    keep = static_cast<std::size_t>(r.top_k);
    std::partial_sort(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(keep), scratch.end(), before);
    const double top = scratch.front().first;
    if (!std::isfinite(top)) return scratch.front().second;  // nothing has probability: fall back to greedy
    prob.resize(keep);
    for (std::size_t i = 0; i < keep; ++i) total += prob[i] = std::exp(static_cast<double>(scratch[i].first) - top);
  } else {
    // A heap whose front is the best candidate left; each pop moves it behind the heap.
    const auto worse = [&](const auto& a, const auto& b) { return before(b, a); };
    std::make_heap(scratch.begin(), scratch.end(), worse);
    const double top = scratch.front().first;
    if (!std::isfinite(top)) return scratch.front().second;
    for (const auto& c : scratch) total += std::exp(static_cast<double>(c.first) - top);
    // Ranks the next candidate: appends it to `ranked` and its weight to `prob`, returns the weight.
    std::vector<std::pair<float, std::int64_t>> ranked;
    auto end = scratch.end();
    const auto rank_next = [&]() {
      std::pop_heap(scratch.begin(), end, worse);
      --end;
      ranked.push_back(*end);
      prob.push_back(std::exp(static_cast<double>(end->first) - top));
      return prob.back();
    };
    if (r.top_p < 1.0f || r.min_p > 0.0f) {
      // Nucleus: the smallest prefix whose probability mass reaches top_p (at least one token),
      // cut where a candidate is less likely than min_p times the first (whose weight is 1).
      double mass = 0;
      while (end != scratch.begin()) {
        const double weight = rank_next();
        if (weight < r.min_p && ranked.size() > 1) {
          ranked.pop_back();
          prob.pop_back();
          break;
        }
        mass += weight;
        if (r.top_p < 1.0f && mass >= r.top_p * total) break;
      }
      total = mass;
    } else {
      // Rank only until the draw is reached.
      const double u = r.u * total;
      double cumulative = 0;
      while (end != scratch.begin()) {
        cumulative += rank_next();
        if (u < cumulative) return ranked.back().second;
      }
      return ranked.back().second;  // rounding left u at the very top
    }
    keep = ranked.size();
    std::copy(ranked.begin(), ranked.end(), scratch.begin());
  }

  // Nucleus over the top-k: the smallest prefix whose probability mass reaches top_p.
  if (top_k && r.top_p < 1.0f) {
    double mass = 0;
    std::size_t n = 0;
    while (n < keep) {
      mass += prob[n++];
      if (mass >= r.top_p * total) break;
    }
    keep = n;
    total = mass;
  }
  // Min-p over the top-k: weights are relative to the first candidate, so the cut is at min_p.
  if (top_k && r.min_p > 0.0f) {
    std::size_t n = 1;
    while (n < keep && prob[n] >= r.min_p) ++n;
    if (n < keep) {
      keep = n;
      total = 0;
      for (std::size_t i = 0; i < keep; ++i) total += prob[i];
    }
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


void fill_logprobs(std::span<const float> logits, SampledToken& token, int top) {
  if (logits.empty()) throw std::invalid_argument("fill_logprobs: empty logits");
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, rank_value(x));
  double sum = 0;
  if (std::isfinite(max_logit))
    for (float x : logits) sum += std::exp(static_cast<double>(rank_value(x)) - max_logit);
  const double log_sum = std::isfinite(max_logit) ? max_logit + std::log(sum) : 0.0;
  const auto logprob = [&](std::size_t i) { return static_cast<float>(rank_value(logits[i]) - log_sum); };
  token.logprob = logprob(static_cast<std::size_t>(token.id));
  token.top.clear();
  if (top <= 0) return;
  std::vector<std::int64_t> order(logits.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  const auto n = std::min<std::size_t>(static_cast<std::size_t>(top), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(), [&](auto a, auto b) {
    const float x = rank_value(logits[static_cast<std::size_t>(a)]), y = rank_value(logits[static_cast<std::size_t>(b)]);
    return x != y ? x > y : a < b;
  });
  for (std::size_t i = 0; i < n; ++i) token.top.emplace_back(order[i], logprob(static_cast<std::size_t>(order[i])));
}

void apply_penalties(std::span<float> logits, std::span<const std::int32_t> tokens, const SampleRequest& r) {
  if (!r.penalized()) return;
  for (const auto& [id, bias] : r.logit_bias) {
    if (id < 0 || static_cast<std::size_t>(id) >= logits.size())
      throw std::invalid_argument("apply_penalties: a biased id outside the row");
    logits[static_cast<std::size_t>(id)] = logits[static_cast<std::size_t>(id)] + bias;
  }
  const auto start = static_cast<std::size_t>(std::clamp<std::int64_t>(r.output_start, 0, static_cast<std::int64_t>(tokens.size())));
  // Per id: its count among the output tokens, and whether it occurs anywhere in the sequence.
  std::vector<std::int32_t> count(logits.size(), 0);
  std::vector<std::uint8_t> seen(logits.size(), 0);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto id = static_cast<std::size_t>(tokens[i]);
    if (id >= logits.size()) throw std::invalid_argument("apply_penalties: a token id outside the row");
    seen[id] = 1;
    if (i >= start) ++count[id];
  }
  for (std::size_t v = 0; v < logits.size(); ++v) {
    if (!seen[v]) continue;
    float x = logits[v];
    if (r.repetition_penalty != 1.0f) x = x > 0 ? x / r.repetition_penalty : x * r.repetition_penalty;
    if (count[v] > 0) {
      if (r.frequency_penalty != 0.0f) x = x - r.frequency_penalty * static_cast<float>(count[v]);
      if (r.presence_penalty != 0.0f) x = x - r.presence_penalty;
    }
    logits[v] = x;
  }
}

std::vector<double> sampling_distribution(std::span<const float> logits, const SampleRequest& r) {
  if (logits.empty()) throw std::invalid_argument("sampling_distribution: empty logits");
  std::vector<double> p(logits.size(), 0.0);
  if (r.temperature == 0.0f) {
    p[static_cast<std::size_t>(greedy(logits))] = 1.0;
    return p;
  }
  // The rule of sample_logits, written plainly: rank by scaled value (ties to the lower id), keep
  // the top-k, then the nucleus, then min-p, and normalize the kept weights.
  std::vector<std::pair<float, std::int64_t>> ranked;
  for (std::size_t i = 0; i < logits.size(); ++i)
    ranked.emplace_back(rank_value(logits[i]) / r.temperature, static_cast<std::int64_t>(i));
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  const double top = ranked.front().first;
  if (!std::isfinite(top)) {
    p[static_cast<std::size_t>(ranked.front().second)] = 1.0;
    return p;
  }
  std::size_t keep = r.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(r.top_k), ranked.size()) : ranked.size();
  std::vector<double> weight(keep);
  double total = 0;
  for (std::size_t i = 0; i < keep; ++i) total += weight[i] = std::exp(static_cast<double>(ranked[i].first) - top);
  if (r.top_p < 1.0f) {
    double mass = 0;
    std::size_t n = 0;
    while (n < keep) {
      mass += weight[n++];
      if (mass >= r.top_p * total) break;
    }
    keep = n;
  }
  if (r.min_p > 0.0f) {
    std::size_t n = 1;
    while (n < keep && weight[n] >= r.min_p) ++n;
    keep = n;
  }
  double kept = 0;
  for (std::size_t i = 0; i < keep; ++i) kept += weight[i];
  for (std::size_t i = 0; i < keep; ++i) p[static_cast<std::size_t>(ranked[i].second)] = weight[i] / kept;
  return p;
}

SampledToken sample_logits(std::span<const float> logits, const SampleRequest& request) {
  std::vector<std::pair<float, std::int64_t>> scratch;
  return sample_logits(logits, request, scratch);
}


}  // namespace zoo
