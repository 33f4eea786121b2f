#include "zoo/generation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "zoo/error.hpp"
#include "zoo/random.hpp"

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

}  // namespace

Sampler::Sampler(SamplingOptions options) : options_(options), state_(options.seed) {
  // These come straight from command-line flags, hence InputErrors named after the flags.
  if (!(options_.temperature >= 0) || !std::isfinite(options_.temperature))
    throw InputError(fmt::format("--temperature: must be a finite number >= 0, got {}", options_.temperature));
  if (options_.top_k < 0) throw InputError(fmt::format("--top-k: must be >= 0, got {}", options_.top_k));
  if (!(options_.top_p >= 0 && options_.top_p <= 1))
    throw InputError(fmt::format("--top-p: must be within [0, 1], got {}", options_.top_p));
  // Greedy decoding takes the argmax, which top-k and top-p never change: a filter given without a
  // temperature would be silently ignored, so say so instead.
  if (options_.temperature == 0.0f && options_.top_k > 0)
    throw InputError(fmt::format("--top-k {}: has no effect under greedy decoding (temperature 0); give --temperature "
                                 "to sample",
                                 options_.top_k));
  if (options_.temperature == 0.0f && options_.top_p < 1.0f)
    throw InputError(fmt::format("--top-p {}: has no effect under greedy decoding (temperature 0); give --temperature "
                                 "to sample",
                                 options_.top_p));
}

std::int64_t Sampler::next(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("Sampler::next: empty logits");
  if (options_.temperature == 0.0f) return greedy(logits);

  // Candidates ordered by scaled logit, ties to the lower index; only the top-k need sorting.
  scratch_.clear();
  scratch_.reserve(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    scratch_.emplace_back(rank_value(logits[i]) / options_.temperature, static_cast<std::int64_t>(i));
  auto before = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  std::size_t keep = scratch_.size();
  if (options_.top_k > 0) keep = std::min(keep, static_cast<std::size_t>(options_.top_k));
  std::partial_sort(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(keep), scratch_.end(), before);
  scratch_.resize(keep);

  const double top = scratch_.front().first;
  if (!std::isfinite(top)) return scratch_.front().second;  // nothing has probability: fall back to greedy
  std::vector<double> prob(keep);
  double total = 0;
  for (std::size_t i = 0; i < keep; ++i) total += prob[i] = std::exp(static_cast<double>(scratch_[i].first) - top);

  // Nucleus: the smallest prefix whose probability mass reaches top_p (at least one token).
  if (options_.top_p < 1.0f) {
    double mass = 0;
    std::size_t n = 0;
    while (n < keep) {
      mass += prob[n++];
      if (mass >= options_.top_p * total) break;
    }
    keep = n;
    total = mass;
  }

  const double u = uniform01(state_) * total;
  double cumulative = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    cumulative += prob[i];
    if (u < cumulative) return scratch_[i].second;
  }
  return scratch_[keep - 1].second;  // rounding left u at the very top
}

std::vector<std::int64_t> generate(Session& session, const Prompt& prompt, const GenerationOptions& options,
                                   const std::function<void(std::int64_t)>& on_token) {
  if (prompt.ids.empty()) throw std::invalid_argument("generate: the prompt has no tokens");
  std::vector<std::int64_t> out;
  if (options.max_new_tokens <= 0) return out;
  out.reserve(static_cast<std::size_t>(options.max_new_tokens));

  Sampler sampler(options.sampling);
  const OutputRequest last_logits{.hidden = false, .logits = true, .all_positions = false};
  session.reset();
  ForwardResult result = session.forward(prompt.step(last_logits));
  while (true) {
    const HostTensor& logits = result.logits;
    if (logits.empty() || logits.shape().empty() || logits.shape().back() <= 0 || logits.dtype() != DType::F32)
      throw std::runtime_error(fmt::format("generate: the model returned no float32 logits (shape {})",
                                           shape_str(logits.shape())));
    if (logits.shape().size() != 2)
      throw std::runtime_error(fmt::format("generate: the model returned logits of shape {}, not [rows, vocab]",
                                           shape_str(logits.shape())));
    const auto vocab = static_cast<std::size_t>(logits.shape().back());
    const auto all = logits.span<float>();
    const auto row = all.subspan(all.size() - vocab);  // the last row
    // NaN or +inf logits mean the forward pass is broken (bad weights, overflow in a low-precision
    // dtype); a token drawn from them would be noise presented as output. -inf alone is a masked
    // token, fine unless every token is masked.
    const auto bad = std::find_if(row.begin(), row.end(), [](float x) { return std::isnan(x) || x == INFINITY; });
    const bool all_masked = std::all_of(row.begin(), row.end(), [](float x) { return x == -INFINITY; });
    if (bad != row.end() || all_masked)
      throw ValidationError(fmt::format(
          "generate: the model returned non-finite logits for new token {} ({}); the weights or the compute dtype "
          "are broken",
          out.size(), bad != row.end() ? fmt::format("{} at id {}", *bad, bad - row.begin()) : "every one is -inf"));
    const std::int64_t token = sampler.next(row);
    out.push_back(token);
    if (on_token) on_token(token);
    if (std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), token) != options.eos_token_ids.end()) break;
    if (static_cast<int>(out.size()) >= options.max_new_tokens) break;
    // The token just produced is fed back; no forward pass after the last one is needed.
    result = session.forward(ForwardStep{std::span<const std::int64_t>(&out.back(), 1), {}, {}, last_logits});
  }
  return out;
}

}  // namespace zoo
