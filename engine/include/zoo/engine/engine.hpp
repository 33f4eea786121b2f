#pragma once
// The engine: many generation requests over one model's batch Runner (zoo/batch.hpp). Each step
// runs every running sequence's next token and fills the rest of a token budget with prompt
// chunks (chunked prefill), admitting waiting requests while the KV pool has pages; a sequence
// that cannot get a page preempts the newest running one, which is recomputed later from its
// prompt and the tokens it already produced. Each request samples with its own seeded Sampler, one
// draw per token, so its ids are those of its run alone (zoo::generate) whatever else is batched.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zoo/batch.hpp"
#include "zoo/generation.hpp"
#include "zoo/model.hpp"
#include "zoo/sequence_driver.hpp"

namespace zoo::engine {

class PrefixCache;  // engine/src/prefix_cache.hpp

struct EngineOptions {
  std::int64_t max_running = 256;          // sequences decoding at once
  std::int64_t max_batched_tokens = 2048;  // rows per step: decode tokens plus prompt chunks
  // The prefix cache: finished sequences kept (with their KV pages) so that a new request whose
  // prompt begins with the same full pages of tokens forks them instead of computing them again;
  // least recently used first out when pages or sequences run short. Running sequences lend their
  // computed pages the same way (a request waits a step for pages a running prompt is computing:
  // n choices of one prompt compute it once). 0: off. The runner must allow
  // max_running + prefix_cache_entries sequences. Models with sliding-window layers cache nothing
  // (their pages behind the window are gone).
  std::int64_t prefix_cache_entries = 0;
};

struct GenerationRequest {
  std::vector<std::int64_t> prompt;
  int max_new_tokens = 16;  // 0 only with prompt_logprobs: the prompt is scored, nothing generated
  SamplingOptions sampling;
  std::vector<std::int64_t> eos_token_ids;  // empty: only the length ends it
  int top_logprobs = -1;                    // >= 0: each token's logprob (and the top n) in Completion
  // >= 0: every prompt token after the first is scored (its logprob given what precedes it, and
  // the n likeliest), as a completions API's `echo` with `logprobs` needs. Such a request takes
  // nothing from the prefix cache (cached tokens have no logits) and computes at most
  // kScoreChunkTokens prompt tokens per step (each scored row is a row of logits on the device).
  int prompt_logprobs = -1;
};
inline constexpr std::int64_t kScoreChunkTokens = 512;

// A request whose positions a SequenceDriver supplies and picks (speech: rows of codebooks fed
// back through a row table): scheduled as text is (chunked prefill, a position per decode step,
// preemption by recompute: the driver keeps its picks and random stream, so it draws what it
// would have), never taken from or kept in the prefix cache. The caller keeps the driver to read
// its results; the engine holds it until the request completes or is cancelled.
struct DrivenRequest {
  std::shared_ptr<SequenceDriver> driver;
};

enum class FinishReason { length, stop };
const char* finish_reason_name(FinishReason reason);

struct Completion {
  std::int64_t request = -1;  // the id add() returned
  std::vector<std::int64_t> ids;
  std::vector<SampledToken> tokens;  // with logprobs, when asked
  FinishReason finish = FinishReason::length;
  std::int64_t prompt_tokens = 0;
  std::int64_t cached_tokens = 0;  // prompt tokens the prefix cache supplied
  // With prompt_logprobs: prompt_scores[j] scores prompt token j + 1 (prompt_tokens - 1 of them).
  std::vector<SampledToken> prompt_scores;
};

// A token a request got in a step (streaming reads these; the Completion repeats them).
struct TokenEvent {
  std::int64_t request = -1;
  SampledToken token;
  // With the first token of a request with prompt_logprobs: its prompt's scores (a streaming
  // `echo` sends them before the first token).
  std::vector<SampledToken> prompt_scores;
};

struct EngineStats {
  std::int64_t steps = 0, rows = 0, prompt_tokens = 0, generated_tokens = 0, preemptions = 0;
  std::int64_t peak_running = 0;
  std::int64_t peak_pages_used = 0, pages_capacity = 0;  // of the fullest group
  std::int64_t prefix_queries = 0, prefix_hits = 0, prefix_hit_tokens = 0, prefix_evictions = 0;
  double seconds = 0;                                    // in step()
  // Of those, the host's own work while the device waits for it: scheduling before submit() and
  // the picks after wait() (what preparing step n+1 during step n could hide).
  double host_seconds = 0;
  double submit_seconds = 0;  // in Runner::submit(): preparing the step and launching it
  // The device's own time in those steps, from each step's first copy to its last, where the
  // runner measures it (its stats() key "device_seconds"; CUDA): seconds - device_seconds is what
  // the device spent waiting for the host within steps.
  double device_seconds = 0;
};

class Engine {
 public:
  Engine(Runner& runner, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; returns its id. InputError when it can never run: an empty prompt, a prompt
  // plus max_new_tokens beyond the runner's context limit (both numbers named), more pages than
  // the pool holds, or bad sampling options.
  std::int64_t add(GenerationRequest request);
  // Queues a driven request (ids from the same counter). InputError when it can never run: a
  // driver that is done or has no position, or whose max_positions() exceed the context limit or
  // the pool. Its Completion has no ids (finish: stop when the driver ended it).
  std::int64_t add(DrivenRequest request);
  bool idle() const { return waiting_.empty() && running_.empty(); }
  std::int64_t waiting() const { return static_cast<std::int64_t>(waiting_.size()); }
  std::int64_t running() const { return static_cast<std::int64_t>(running_.size()); }
  // One forward pass; the requests that finished in it.
  std::vector<Completion> step();
  // The tokens picked in the last step(), one per request that sampled (those that finished too).
  const std::vector<TokenEvent>& last_tokens() const { return last_tokens_; }
  // The driven requests whose driver accepted a pick in the last step() (finished ones too).
  const std::vector<std::int64_t>& last_driven() const { return last_driven_; }
  // Drops a request, waiting or running (its pages go back at once); false when it is unknown or
  // already finished. Not called during step().
  bool cancel(std::int64_t request);
  const EngineStats& stats() const { return stats_; }

 private:
  struct Sequence;
  bool fits(const std::vector<std::int64_t>& needed, std::vector<std::int64_t>& free) const;
  // Opens the runner's sequence for a waiting one: a fork of the longest cached prefix of its
  // tokens (whole pages, at least one token left to compute), else a new sequence.
  void open_with_prefix(Sequence& sequence);
  // Whole pages `lender` holds (computed ones, or all it will hold once its prompt is in) that
  // begin `sequence` too, leaving `sequence` at least one token to compute.
  static std::int64_t shared_pages(const Sequence& lender, const Sequence& sequence, bool computed = true);
  // Whether a running sequence is still computing pages this waiting one could borrow.
  bool wait_for_lender(const Sequence& sequence) const;
  // Pages a sequence of `positions` takes at most; InputError naming them when the context limit
  // or the pool could never hold them (`what` says what they are).
  void check_fits(std::int64_t positions, const std::string& what) const;
  // Keeps a finished sequence's pages for its prefix, or closes it.
  void retire(Sequence& sequence);
  // Closes the least recently used cached prefix (counted); false when none is left. `free` gains its pages.
  bool evict_one(std::vector<std::int64_t>* free);
  void preempt(Sequence& sequence);
  // Whether computing `tokens` of the sequence ends its prompt and draws a token.
  static bool samples(const Sequence& sequence, std::int64_t tokens);
  // Its Completion; the sequence retires (cached or closed).
  Completion complete(Sequence& sequence, FinishReason finish);
  void note_pool();

  Runner& runner_;
  EngineOptions options_;
  std::int64_t next_request_ = 0;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  EngineStats stats_;
  std::vector<TokenEvent> last_tokens_;
  std::vector<std::int64_t> last_driven_;
  std::unique_ptr<PrefixCache> cache_;  // used only when cache_on_
  bool cache_on_ = false;
};

}  // namespace zoo::engine
