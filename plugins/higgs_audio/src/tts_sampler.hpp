#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "zoo/model.hpp"

namespace zoo::higgs {

// Per-codebook sampling parameters of the TTS loop. Defaults are the first-party recommended
// settings (sglang-omni cookbook: temperature 0.8, top_k 50, no top-p).
struct TtsSampling {
  float temperature = 0.8f;  // <= kGreedyTemperature: argmax
  int top_k = 50;            // <= 0: off
  float top_p = 1.0f;        // >= 1: off
  std::uint64_t seed = 0;
};

// At or below this temperature the reference takes the argmax (dividing would overflow).
inline constexpr float kGreedyTemperature = 1e-5f;

// The distribution one codebook row is drawn from, as the first-party sampler defines it:
// logits / temperature, then top-k (everything below the k-th largest value removed, so ties with
// it stay), then top-p over the survivors (sorted descending, a token is removed when the
// cumulative probability *before* it already exceeds top_p, so the crossing token stays and the
// top token always does), then softmax. Removed entries get probability 0. Computed in double.
// Ties in the top-p sort go to the lower index. Throws std::invalid_argument on NaN logits, on
// logits that are all -inf, or when called at a greedy temperature.
std::vector<double> filtered_probabilities(std::span<const float> logits, const TtsSampling& sampling);

// The same distribution kept sparse: the tokens with probability (ascending index) and theirs.
// `scratch` is reused across rows so a frame's draws allocate nothing.
struct Survivors {
  std::vector<std::size_t> index;
  std::vector<double> probability;
};
struct FilterScratch {
  std::vector<float> values;       // the top-k selection's copy of the row
  std::vector<std::size_t> ranked;  // the top-p ranking
};
void filter_survivors(std::span<const float> logits, const TtsSampling& sampling, FilterScratch& scratch,
                      Survivors& out);

// First maximal index (NaN rejected), as torch.argmax on finite rows.
std::int64_t argmax_first(std::span<const float> logits);

// Draws codebook rows. Reproducible: the only randomness is a SplitMix64 stream seeded with
// `seed`, one 53-bit uniform per draw, mapped through the inverse CDF of filtered_probabilities
// (first index whose cumulative probability exceeds u). Greedy draws consume no randomness.
// The same rule runs on a device as zoo::SegmentSampleRule::threshold_top_k_index_cdf: uniforms()
// draws a row's uniforms, head_request() asks a session for the picks and accept() checks them as
// sample() checks a row, so either side gives the same codes from the same stream.
class TtsSampler {
 public:
  explicit TtsSampler(TtsSampling sampling);
  const TtsSampling& sampling() const { return sampling_; }
  bool greedy() const;
  // One code from one row of logits.
  std::int64_t sample(std::span<const float> logits);
  // The same with a uniform drawn earlier (uniforms()); it is not read when greedy.
  std::int64_t sample(std::span<const float> logits, double u);
  // One code per codebook from logits [K, V] (row-major), codebook 0 first.
  std::vector<std::int64_t> sample_rows(std::span<const float> logits, std::int64_t num_codebooks);
  // The same with the row's uniforms drawn earlier: [K], or empty when greedy.
  std::vector<std::int64_t> sample_rows(std::span<const float> logits, std::int64_t num_codebooks,
                                        std::span<const double> u);
  // The next n uniforms of the stream (none when greedy: greedy draws consume none).
  std::vector<double> uniforms(std::int64_t n);
  // Picking a row of K codebooks on a session's device with uniforms `u` (uniforms(K)); `u` must
  // outlive the forward step.
  HeadSampleRequest head_request(std::int64_t num_codebooks, std::span<const double> u) const;
  // The codes of device picks, refused (std::invalid_argument, as sample() refuses the row) where
  // the row held NaN, or, when not greedy, +inf or only -inf.
  std::vector<std::int64_t> accept(std::span<const SampledToken> picks) const;
  // The stream's state: equal states have drawn equally many uniforms from one seed.
  std::uint64_t state() const { return state_; }

 private:
  std::int64_t draw(double u) const;  // from survivors_

  TtsSampling sampling_;
  std::uint64_t state_;
  FilterScratch scratch_;
  Survivors survivors_;
};

}  // namespace zoo::higgs
