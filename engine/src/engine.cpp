// The engine's scheduler (zoo/engine/engine.hpp).
#include "zoo/engine/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "prefix_cache.hpp"
#include "zoo/error.hpp"
#include "zoo/sampling.hpp"

namespace zoo::engine {

const char* finish_reason_name(FinishReason reason) {
  return reason == FinishReason::stop ? "stop" : "length";
}

struct Engine::Sequence {
  std::int64_t request = -1;
  GenerationRequest params;
  Sampler sampler;
  std::vector<std::int64_t> tokens;  // the prompt, then what was generated
  std::vector<SampledToken> picked;  // one per generated token
  std::vector<SampledToken> prompt_scores;  // with prompt_logprobs: min(computed, prompt - 1) of them
  std::int64_t computed = 0;         // tokens in the runner's cache
  std::int64_t cached = 0;           // prompt tokens the prefix cache supplied (first admission)
  SequenceId id = -1;                // the runner's sequence while running
  std::shared_ptr<SequenceDriver> driver;  // a driven request: its positions and picks are the driver's
  std::int64_t driven_prompt = 0;          // its positions when added

  // Positions whose inputs are known.
  std::int64_t length() const { return driver ? driver->known() : static_cast<std::int64_t>(tokens.size()); }
  std::int64_t remaining() const { return length() - computed; }
  std::int64_t generated() const { return static_cast<std::int64_t>(picked.size()); }
  std::int64_t prompt_size() const { return driver ? driven_prompt : static_cast<std::int64_t>(params.prompt.size()); }
  // Whether it may take from or give to the prefix cache.
  bool cacheable() const { return !driver && params.prompt_logprobs < 0; }
  bool scores() const { return params.prompt_logprobs >= 0; }
  // Prompt rows still to score from `computed` on (their logits are needed).
  std::int64_t unscored() const { return scores() ? std::max<std::int64_t>(0, prompt_size() - 1 - computed) : 0; }
  // Tokens to compute this step out of `budget`: a decode's one, else a chunk, scored chunks capped.
  std::int64_t chunk(std::int64_t budget) const {
    if (remaining() == 1) return 1;
    std::int64_t want = std::min(remaining(), std::max<std::int64_t>(budget, 0));
    if (unscored() > 0) want = std::min(want, kScoreChunkTokens);
    return want;
  }
};

Engine::Engine(Runner& runner, EngineOptions options) : runner_(runner), options_(options) {
  if (options_.max_running <= 0 || options_.max_batched_tokens <= 0)
    throw InputError(fmt::format("engine: max_running ({}) and max_batched_tokens ({}) must be positive",
                                 options_.max_running, options_.max_batched_tokens));
  if (options_.prefix_cache_entries < 0)
    throw InputError(fmt::format("engine: prefix_cache_entries ({}) must not be negative", options_.prefix_cache_entries));
  const auto groups = runner_.pool().groups;
  cache_on_ = options_.prefix_cache_entries > 0 &&
              std::all_of(groups.begin(), groups.end(), [](const auto& group) { return group.window == 0; });
  cache_ = std::make_unique<PrefixCache>(runner_, options_.prefix_cache_entries);
  note_pool();
}

Engine::~Engine() {
  // Running sequences first, then (cache_'s destructor) the cached prefixes.
  for (auto& sequence : running_)
    if (sequence->id >= 0) runner_.close_sequence(sequence->id);
}

void Engine::open_with_prefix(Sequence& sequence) {
  sequence.computed = 0;
  if (cache_on_ && sequence.cacheable()) {
    ++stats_.prefix_queries;
    // The longest cached prefix, or a running sequence's pages if it lends more.
    const PrefixCache::Match best = cache_->longest(sequence.tokens);
    std::int64_t best_tokens = best.tokens;
    // A running sequence with the same prompt start (n choices of one prompt, a shared system
    // prompt) lends its computed whole pages too: they no longer change.
    Sequence* lender = nullptr;
    for (const auto& running : running_) {
      const std::int64_t n = shared_pages(*running, sequence) * kKvPageTokens;
      if (n > best_tokens) {
        best_tokens = n;
        lender = running.get();
      }
    }
    if (lender) {
      sequence.id = runner_.fork_sequence(lender->id, best_tokens);
      sequence.computed = best_tokens;
      if (sequence.picked.empty()) sequence.cached = best_tokens;
      ++stats_.prefix_hits;
      stats_.prefix_hit_tokens += best_tokens;
      return;
    }
    if (best.tokens > 0) {
      sequence.id = cache_->fork(best);
      sequence.computed = best_tokens;
      if (sequence.picked.empty()) sequence.cached = best_tokens;
      ++stats_.prefix_hits;
      stats_.prefix_hit_tokens += best_tokens;
      return;
    }
  }
  sequence.id = runner_.open_sequence();
}

std::int64_t Engine::shared_pages(const Sequence& lender, const Sequence& sequence, bool computed) {
  if (lender.id < 0 || !lender.cacheable() || !sequence.cacheable()) return 0;
  // Whole pages of the same tokens, leaving the borrower at least one token to compute.
  const auto limit = std::min<std::int64_t>(computed ? lender.computed : static_cast<std::int64_t>(lender.tokens.size()),
                                            static_cast<std::int64_t>(sequence.tokens.size()) - 1);
  if (limit < kKvPageTokens || lender.tokens.front() != sequence.tokens.front()) return 0;
  const auto end = std::mismatch(sequence.tokens.begin(), sequence.tokens.begin() + limit, lender.tokens.begin()).first;
  return (end - sequence.tokens.begin()) / kKvPageTokens;
}

bool Engine::wait_for_lender(const Sequence& sequence) const {
  if (!cache_on_ || !sequence.cacheable()) return false;
  for (const auto& running : running_)
    if (shared_pages(*running, sequence, false) > shared_pages(*running, sequence, true) &&
        running->computed < running->prompt_size())
      return true;
  return false;
}

void Engine::retire(Sequence& sequence) {
  if (!cache_on_ || !sequence.cacheable() || sequence.computed < kKvPageTokens) {
    runner_.close_sequence(sequence.id);
  } else if (cache_->insert(sequence.id,
                            std::vector<std::int64_t>(sequence.tokens.begin(),
                                                      sequence.tokens.begin() + sequence.computed))) {
    ++stats_.prefix_evictions;
  }
  sequence.id = -1;
}

bool Engine::evict_one(std::vector<std::int64_t>* free) {
  if (!cache_->evict_one(free)) return false;
  ++stats_.prefix_evictions;
  return true;
}

std::int64_t Engine::add(GenerationRequest request) {
  const auto prompt = static_cast<std::int64_t>(request.prompt.size());
  if (prompt == 0) throw InputError("engine: a request needs at least one prompt token");
  if (request.max_new_tokens < 0 || (request.max_new_tokens == 0 && request.prompt_logprobs < 0))
    throw InputError(fmt::format("engine: max_new_tokens must be positive (0 only when scoring the prompt), got {}",
                                 request.max_new_tokens));
  check_fits(prompt + request.max_new_tokens,
             fmt::format("the prompt's {} tokens plus max_new_tokens {}", prompt, request.max_new_tokens));
  if (request.top_logprobs > kMaxTopLogprobs || request.prompt_logprobs > kMaxTopLogprobs)
    throw InputError(fmt::format("top_logprobs {} or prompt_logprobs {} is above {}", request.top_logprobs,
                                 request.prompt_logprobs, kMaxTopLogprobs));
  auto sequence = std::make_unique<Sequence>(
      Sequence{next_request_, request, Sampler(request.sampling), request.prompt, {}, {}, 0, 0, -1});
  waiting_.push_back(std::move(sequence));
  return next_request_++;
}

void Engine::check_fits(std::int64_t positions, const std::string& what) const {
  const std::int64_t limit = runner_.max_context();
  if (positions > limit) throw InputError(fmt::format("{} exceed the context limit of {} tokens", what, limit));
  // A sequence that would need more pages than the pool has could never finish.
  const std::int64_t pages = (positions + kKvPageTokens - 1) / kKvPageTokens;
  for (const auto& group : runner_.pool().groups)
    if (pages > group.capacity)
      throw InputError(fmt::format("{} need {} KV pages, the pool holds {}", what, pages, group.capacity));
}

std::int64_t Engine::add(DrivenRequest request) {
  if (!request.driver) throw std::invalid_argument("engine: a driven request without a driver");
  SequenceDriver& driver = *request.driver;
  if (driver.done() || driver.known() < 1)
    throw InputError("engine: a driven request needs a position to compute and must not be done");
  check_fits(driver.max_positions(), fmt::format("the request's {} positions at most", driver.max_positions()));
  auto sequence = std::make_unique<Sequence>(Sequence{next_request_, {}, Sampler(SamplingOptions{}), {}, {}, {}, 0, 0, -1});
  sequence->driven_prompt = driver.known();
  sequence->driver = std::move(request.driver);
  waiting_.push_back(std::move(sequence));
  return next_request_++;
}

bool Engine::fits(const std::vector<std::int64_t>& needed, std::vector<std::int64_t>& free) const {
  for (std::size_t g = 0; g < needed.size(); ++g)
    if (needed[g] > free[g]) return false;
  for (std::size_t g = 0; g < needed.size(); ++g) free[g] -= needed[g];
  return true;
}

// Gives the sequence's pages back; it waits at the front of the queue and is recomputed from its
// prompt and generated tokens when it is admitted again. Its sampler keeps its state, so the
// tokens it still draws are the ones it would have drawn.
void Engine::preempt(Sequence& sequence) {
  runner_.close_sequence(sequence.id);
  sequence.id = -1;
  sequence.computed = 0;
  sequence.prompt_scores.clear();  // scored again as the prompt is recomputed
  ++stats_.preemptions;
  const auto it =
      std::find_if(running_.begin(), running_.end(), [&](const auto& s) { return s.get() == &sequence; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
}

bool Engine::samples(const Sequence& sequence, std::int64_t tokens) {
  return tokens == sequence.remaining() && (sequence.driver || sequence.params.max_new_tokens > 0);
}

Completion Engine::complete(Sequence& sequence, FinishReason finish) {
  Completion completion{sequence.request,         {}, std::move(sequence.picked), finish, sequence.prompt_size(),
                        sequence.cached,           std::move(sequence.prompt_scores)};
  if (!sequence.driver) completion.ids.assign(sequence.tokens.begin() + completion.prompt_tokens, sequence.tokens.end());
  retire(sequence);
  return completion;
}

void Engine::note_pool() {
  for (const auto& group : runner_.pool().groups)
    if (group.used >= stats_.peak_pages_used) {
      stats_.peak_pages_used = group.used;
      stats_.pages_capacity = group.capacity;
    }
}

bool Engine::cancel(std::int64_t request) {
  const auto match = [&](const auto& sequence) { return sequence->request == request; };
  if (const auto it = std::find_if(waiting_.begin(), waiting_.end(), match); it != waiting_.end()) {
    waiting_.erase(it);
    return true;
  }
  if (const auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
    runner_.close_sequence((*it)->id);
    running_.erase(it);
    return true;
  }
  return false;
}

std::vector<Completion> Engine::step() {
  const auto started = std::chrono::steady_clock::now();
  last_tokens_.clear();
  last_driven_.clear();
  std::vector<std::int64_t> free;
  for (const auto& group : runner_.pool().groups) free.push_back(group.capacity - group.used);

  struct Planned {
    Sequence* sequence;
    std::int64_t tokens;
    bool samples;
  };
  std::vector<Planned> plan;
  std::int64_t budget = options_.max_batched_tokens;

  // 1. Every running sequence's next tokens (decodes first, oldest first); when pages run out the
  // newest running sequence is preempted, possibly the one asking.
  for (std::size_t i = 0; i < running_.size();) {
    Sequence& sequence = *running_[i];
    const std::int64_t want = sequence.chunk(budget);
    if (want == 0) {
      ++i;
      continue;
    }
    if (fits(runner_.pages_needed(sequence.id, want), free)) {
      plan.push_back({&sequence, want, samples(sequence, want)});
      budget -= want;
      ++i;
      continue;
    }
    if (evict_one(&free)) continue;  // cached prefixes go before running sequences
    Sequence& newest = *running_.back();
    // Pages planned for the newest sequence in this step go back to `free` with it.
    const auto planned =
        std::find_if(plan.begin(), plan.end(), [&](const Planned& p) { return p.sequence == &newest; });
    if (planned != plan.end()) {
      const auto needed = runner_.pages_needed(newest.id, planned->tokens);
      for (std::size_t g = 0; g < free.size(); ++g) free[g] += needed[g];
      budget += planned->tokens;
      plan.erase(planned);
    }
    const auto before = runner_.pool().groups;
    preempt(newest);
    const auto after = runner_.pool().groups;
    for (std::size_t g = 0; g < free.size(); ++g) free[g] += before[g].used - after[g].used;
    if (&newest == &sequence) continue;  // running_[i] is now the next sequence (or the end)
  }

  // 2. Waiting requests, first come first served, while the budget, the running limit and the
  // pool allow their first chunk.
  while (!waiting_.empty() && budget > 0 &&
         static_cast<std::int64_t>(running_.size()) < options_.max_running) {
    Sequence& sequence = *waiting_.front();
    // Pages a running prompt is computing now are worth a step's wait (n choices of one prompt
    // compute it once).
    if (wait_for_lender(sequence)) break;
    open_with_prefix(sequence);
    const std::int64_t want = sequence.chunk(budget);
    if (!fits(runner_.pages_needed(sequence.id, want), free)) {
      runner_.close_sequence(sequence.id);
      sequence.id = -1;
      sequence.computed = 0;
      if (evict_one(&free)) continue;  // room from cached prefixes, then try again
      break;
    }
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    plan.push_back({&sequence, want, samples(sequence, want)});
    budget -= want;
  }
  stats_.peak_running = std::max(stats_.peak_running, static_cast<std::int64_t>(running_.size()));
  if (plan.empty()) {
    if (!idle()) throw std::logic_error("engine: nothing could be scheduled although requests remain");
    return {};
  }

  // 3. One forward pass over every planned slice.
  std::vector<ForwardStep> steps(plan.size());
  ForwardBatch batch;
  std::vector<SampleRequest> draws(plan.size());
  for (std::size_t i = 0; i < plan.size(); ++i) {
    Sequence& sequence = *plan[i].sequence;
    ForwardStep& step = steps[i];
    batch.slices.push_back({sequence.id, sequence.computed, &step});
    stats_.rows += plan[i].tokens;
    if (sequence.driver) {
      step = sequence.driver->step(sequence.computed, sequence.computed + plan[i].tokens);
      stats_.prompt_tokens += std::max<std::int64_t>(
          0, std::min(sequence.computed + plan[i].tokens, sequence.driven_prompt) - sequence.computed);
      continue;
    }
    step.ids =
        std::span<const std::int64_t>(sequence.tokens)
            .subspan(static_cast<std::size_t>(sequence.computed), static_cast<std::size_t>(plan[i].tokens));
    step.outputs = OutputRequest{.logits = plan[i].samples};
    if (const std::int64_t scored = std::min(sequence.unscored(), plan[i].tokens); scored > 0) {
      // Row r scores the token after it: prompt position computed + r + 1.
      step.outputs.logits = step.outputs.all_positions = true;
      step.outputs.score_ids = std::span<const std::int64_t>(sequence.tokens)
                                   .subspan(static_cast<std::size_t>(sequence.computed) + 1, static_cast<std::size_t>(scored));
      step.outputs.score_top = sequence.params.prompt_logprobs;
    }
    if (plan[i].samples) {
      draws[i] = sequence.sampler.request(sequence.prompt_size());
      step.outputs.sample = draws[i];
      step.outputs.top_logprobs = sequence.params.top_logprobs;
    }
    if (sequence.computed < static_cast<std::int64_t>(sequence.params.prompt.size()))
      stats_.prompt_tokens += std::min<std::int64_t>(
          plan[i].tokens, static_cast<std::int64_t>(sequence.params.prompt.size()) - sequence.computed);
  }
  const auto submitting = std::chrono::steady_clock::now();
  runner_.submit(batch);
  stats_.submit_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - submitting).count();
  note_pool();
  std::vector<ForwardResult> results = runner_.wait();
  const auto waited = std::chrono::steady_clock::now();
  ++stats_.steps;
  if (const nlohmann::json runner_stats = runner_.stats(); runner_stats.contains("device_seconds"))
    stats_.device_seconds = runner_stats["device_seconds"].get<double>();

  // 4. The picks: a token per sampling slice; finished sequences leave.
  std::vector<Completion> done;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    Sequence& sequence = *plan[i].sequence;
    sequence.computed += plan[i].tokens;
    for (auto& scored : results[i].scores) sequence.prompt_scores.push_back(std::move(scored));
    if (!sequence.driver && sequence.params.max_new_tokens == 0 && sequence.remaining() == 0) {  // scored only
      done.push_back(complete(sequence, FinishReason::length));
      continue;
    }
    if (!plan[i].samples) continue;
    if (sequence.driver) {
      last_driven_.push_back(sequence.request);
      ++stats_.generated_tokens;
      if (sequence.driver->accept(results[i])) done.push_back(complete(sequence, FinishReason::stop));
      continue;
    }
    SampledToken picked;
    if (results[i].sampled) {
      picked = *results[i].sampled;
    } else {  // the runner returned the logits row: the host picks by the same rule
      const auto row = results[i].logits.span<float>();
      picked = sample_logits(row, draws[i]);
      if (sequence.params.top_logprobs >= 0) fill_logprobs(row, picked, sequence.params.top_logprobs);
    }
    if (!picked.valid())
      throw ValidationError(
          fmt::format("engine: request {}: the model returned non-finite logits for new token {} ({}); the "
                      "weights or the compute "
                      "dtype are broken",
                      sequence.request, sequence.generated(),
                      picked.bad_index >= 0 ? fmt::format("{} at id {}", picked.bad_value, picked.bad_index)
                                            : "every one is -inf"));
    sequence.tokens.push_back(picked.id);
    sequence.picked.push_back(picked);
    last_tokens_.push_back({sequence.request, picked, {}});
    if (sequence.scores() && sequence.picked.size() == 1) last_tokens_.back().prompt_scores = sequence.prompt_scores;
    ++stats_.generated_tokens;
    const auto& eos = sequence.params.eos_token_ids;
    const bool stop = std::find(eos.begin(), eos.end(), picked.id) != eos.end();
    if (!stop && sequence.generated() < sequence.params.max_new_tokens) continue;
    done.push_back(complete(sequence, stop ? FinishReason::stop : FinishReason::length));
  }
  std::erase_if(running_, [](const auto& sequence) { return sequence->id < 0; });
  const auto finished = std::chrono::steady_clock::now();
  stats_.seconds += std::chrono::duration<double>(finished - started).count();
  stats_.host_seconds += std::chrono::duration<double>((submitting - started) + (finished - waited)).count();
  return done;
}

}  // namespace zoo::engine
