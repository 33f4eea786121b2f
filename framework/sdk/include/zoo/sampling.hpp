#pragma once
// The one rule for picking a token from a row of logits (the host reference that device kernels
// follow). In the SDK, so a backend that computes its logits on the host samples them itself.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "zoo/model.hpp"

namespace zoo {

// The sampling rule, shared by the host Sampler and the sessions that sample where their logits are
// (OutputRequest::sample): a device kernel follows it to the same id. Checks the row (NaN or +inf
// anywhere, or -inf everywhere: SampledToken::valid()), then picks:
//   temperature 0: the largest logit, ties to the lower index, NaN never wins;
//   else the candidates are the logits divided by the temperature (float32; NaN ranks as -inf),
//   ordered by value, ties to the lower index; top-k keeps the first k; top-p keeps the shortest
//   prefix whose mass (exp(value - max), float64) reaches top_p of the kept mass (so at least one
//   token, and the one crossing the threshold); min-p keeps the prefix whose weights are at least
//   min_p times the first's; the pick is the first candidate whose cumulative
//   mass exceeds u times the kept mass (the last one if rounding leaves u at the very top). When
//   the largest candidate is -inf nothing has probability, and the pick is the greedy one.
// Request fields are not checked here (Sampler does that).
SampledToken sample_logits(std::span<const float> logits, const SampleRequest& request);
// The penalties of `request` (SampleRequest::repetition_penalty and the rest) applied to `logits`
// in place, given the sequence's tokens (positions 0 .. tokens.size() - 1; those from
// request.output_start on are its output), in this order and arithmetic, which device kernels
// follow bit for bit, float32 throughout: first each biased id gets x + bias (logit_bias), then for
// each id in the sequence, (1) x > 0 ? x / repetition :
// x * repetition; then, when it occurs c > 0 times among the output, (2) x - frequency * c and (3)
// x - presence (vLLM's rule, which torch computes in the same operations). A penalty that is off
// (1, 0, 0) is skipped. Ids must be within the row.
void apply_penalties(std::span<float> logits, std::span<const std::int32_t> tokens, const SampleRequest& request);
// The distribution sample_logits draws from (penalties already applied): per id, its probability
// after the temperature and the filters, 0 for the ids they drop (sums to 1 in float64); for
// temperature 0, 1 at the greedy pick. A reference for tests against other implementations.
std::vector<double> sampling_distribution(std::span<const float> logits, const SampleRequest& request);
// Sets token.logprob (log-softmax of the raw row at token.id, float64 sums in index order; NaN
// counts as -inf) and token.top: the `top` likeliest ids with theirs, ties to the lower id.
void fill_logprobs(std::span<const float> logits, SampledToken& token, int top);
// The same, reusing `scratch` across calls.
SampledToken sample_logits(std::span<const float> logits, const SampleRequest& request,
                           std::vector<std::pair<float, std::int64_t>>& scratch);

}  // namespace zoo
