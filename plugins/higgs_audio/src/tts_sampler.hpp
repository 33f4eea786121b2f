#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

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
class TtsSampler {
 public:
  explicit TtsSampler(TtsSampling sampling);
  const TtsSampling& sampling() const { return sampling_; }
  // One code from one row of logits.
  std::int64_t sample(std::span<const float> logits);
  // One code per codebook from logits [K, V] (row-major), codebook 0 first.
  std::vector<std::int64_t> sample_rows(std::span<const float> logits, std::int64_t num_codebooks);

 private:
  TtsSampling sampling_;
  std::uint64_t state_;
  FilterScratch scratch_;
  Survivors survivors_;
};

}  // namespace zoo::higgs
