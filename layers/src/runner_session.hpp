#pragma once
// A Session is a batch of one: one sequence of a runner of its own, whose pool holds the context
// limit. Both backends serve sessions this way, so trace, validate, generate and tts run the same
// paged cache, kernels and decode graphs as the batch runtime.
#include <memory>
#include <utility>

#include "zoo/batch.hpp"
#include "zoo/layers/decoder.hpp"
#include "zoo/model.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

class RunnerSession : public Session {
 public:
  explicit RunnerSession(std::unique_ptr<Runner> runner)
      : runner_(std::move(runner)), sequence_(runner_->open_sequence()) {}
  std::int64_t position() const override { return runner_->tokens(sequence_); }
  void reset() override {
    runner_->close_sequence(sequence_);
    sequence_ = runner_->open_sequence();
  }
  ForwardResult forward(const ForwardStep& step, DiagnosticHook* hook) override {
    ForwardBatch batch{{SequenceSlice{sequence_, runner_->tokens(sequence_), &step}}};
    runner_->submit(batch, hook);
    return std::move(runner_->wait().front());
  }

 private:
  std::unique_ptr<Runner> runner_;
  SequenceId sequence_;
};

// The options of a Session's runner: one sequence, whose pool holds the context limit.
inline RunnerOptions session_options(std::int64_t max_context) {
  return {.kv_pages = (max_context + kKvPageTokens - 1) / kKvPageTokens, .max_sequences = 1};
}

}  // namespace zoo::layers
