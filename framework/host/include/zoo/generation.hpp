#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "zoo/model.hpp"
#include "zoo/sampling.hpp"

namespace zoo {

struct SamplingOptions {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  std::uint64_t seed = 0;
  float min_p = 0.0f;        // 0: off
  // Over the sequence's own tokens (SampleRequest has the rules): repetition over prompt and
  // output (1: off, HF's repetition_penalty), frequency and presence over the output (0: off, as
  // OpenAI's and vLLM's). They apply under greedy decoding too.
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // Added to these ids' logits (OpenAI's logit_bias): ids ascending and distinct, biases in [-100, 100].
  std::vector<std::pair<std::int64_t, float>> logit_bias;
};

// Picks the next token from one row of logits, drawing the uniform numbers from a SplitMix64
// stream seeded by the options. Options are checked on construction (InputErrors named after the
// CLI flags): top-k or top-p with temperature 0 is an error, since greedy decoding ignores them.
class Sampler {
 public:
  explicit Sampler(SamplingOptions options);
  // What to ask for the next token: the options and, unless greedy, the next uniform draw (one
  // per sampled token). For sessions that sample on their device. `output_start`: the prompt's
  // length (where the penalties' output tokens begin).
  SampleRequest request(std::int64_t output_start = 0);
  // Whether a penalty or a bias changes the row before the pick (SampleRequest::penalized).
  bool penalized() const;
  // sample_logits(logits, request()).id; the row is not checked.
  std::int64_t next(std::span<const float> logits);

 private:
  SampleRequest settings(std::int64_t output_start) const;  // request() without the draw
  SamplingOptions options_;
  std::uint64_t state_;
  std::vector<std::pair<float, std::int64_t>> scratch_;
};

struct GenerationOptions {
  int max_new_tokens = 16;
  SamplingOptions sampling;
  std::vector<std::int64_t> eos_token_ids;  // stop after emitting any of them (a model may have several)
  // Where each token is picked. Session: the session samples where its logits are
  // (OutputRequest::sample), falling back to the host when it cannot. Host: the session returns the
  // logits row and the host samples it (the path before device sampling, kept for A/B). None: the
  // session computes its default outputs and nothing is picked; `feed` supplies every next token
  // and the fed tokens are what comes out (timing a model that has no text head).
  enum class Pick { Session, Host, None };
  Pick pick = Pick::Session;
  // The token fed back after each new one, given that new token; unset: the token itself. A
  // benchmark over random weights feeds a fixed sequence, since such weights may repeat one token
  // forever and a real loop would then stop at an eos or stall in a cache.
  std::function<std::int64_t(std::int64_t)> feed;
};

// Prefills the prompt in a fresh session, then decodes one token at a time, asking the session to
// sample (OutputRequest::sample) so a device that can keeps the logits to itself; a session that
// returns logits instead is sampled on the host, to the same ids (see GenerationOptions::pick). `on_token` (optional) sees each
// new id as it is produced. Logits holding NaN or +inf (or only -inf) are a
// ValidationError: nothing is sampled from a broken forward pass.
std::vector<std::int64_t> generate(Session& session, const Prompt& prompt, const GenerationOptions& options,
                                   const std::function<void(std::int64_t)>& on_token = {});

}  // namespace zoo
