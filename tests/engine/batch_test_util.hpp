#pragma once
// What the batch tests share (test_batch.cpp, test_tensor_parallel.cpp): prompts, a greedy run of
// one sequence alone with its top-2 margins, the rule comparing a batched run with it (DESIGN.md:
// ids equal; where they differ, the alone run's top-2 margin at the first difference is below the
// tolerance, reported, and the comparison stops there), and an engine run to completion.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "qwen3/fixture_test_util.hpp"
#include "zoo/batch.hpp"
#include "zoo/engine/engine.hpp"
#include "zoo/sampling.hpp"

namespace zoo::ptest {

inline std::vector<std::int64_t> prompt_ids(std::int64_t length, std::int64_t vocab, std::uint64_t salt) {
  std::vector<std::int64_t> ids;
  std::uint64_t x = 0x9e3779b97f4a7c15ull * (salt + 1);
  for (std::int64_t i = 0; i < length; ++i) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    ids.push_back(static_cast<std::int64_t>((x * 0x2545f4914f6cdd1dull) >> 33) % vocab);
  }
  return ids;
}

// A greedy run alone, keeping each step's top-2 margin.
struct AloneRun {
  std::vector<std::int64_t> ids;
  std::vector<float> margins;
};

inline AloneRun greedy_alone(Model& model, const std::vector<std::int64_t>& prompt, int new_tokens) {
  auto session = model.new_session();
  AloneRun run;
  ForwardResult result = session->forward(ForwardStep{prompt, {}, {}, OutputRequest{}});
  for (int i = 0; i < new_tokens; ++i) {
    const auto row = result.logits.span<float>();
    std::vector<float> sorted(row.begin(), row.end());
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    const std::int64_t id = sample_logits(row, SampleRequest{}).id;
    run.ids.push_back(id);
    run.margins.push_back(sorted[0] - sorted[1]);
    if (i + 1 < new_tokens)
      result = session->forward(ForwardStep{std::span<const std::int64_t>(&id, 1), {}, {}, OutputRequest{}});
  }
  return run;
}

// The rule: equal ids, or a first difference where the alone run was within `tolerance` of a tie.
inline void check_same_ids(const AloneRun& alone, const std::vector<std::int64_t>& batched,
                           const std::string& what, float tolerance = 1e-5f) {
  INFO(what);
  REQUIRE(batched.size() == alone.ids.size());
  for (std::size_t i = 0; i < batched.size(); ++i) {
    if (batched[i] == alone.ids[i]) continue;
    WARN(what << ": first difference at new token " << i << " (alone " << alone.ids[i] << ", batched "
              << batched[i] << "), alone top-2 margin " << alone.margins[i]);
    CHECK(alone.margins[i] < tolerance);
    return;
  }
}

// The bound for bf16 is a margin below 1e-2 at a first difference. Measured on the H200 the
// batched path (cuBLASLt GEMMs at m = the step's rows) and a session (a batch of one: GEMV at
// m = 1) give logits that differ by up to ~0.05 on these fixtures, and first
// differences came at alone margins up to 0.058 (docs/performance.md): the bound asserted here is
// that measured one, 0.08, so a wrong page or row (differences of O(1)) still fails.
inline constexpr float kCudaTieMargin = 0.08f;

// The CUDA batch tests' prompt lengths: around page boundaries (16 tokens), a one-token prompt, and
// one longer than their prefill chunks.
inline constexpr std::int64_t kCudaBatchLengths[] = {15, 16, 17, 31, 32, 33, 1, 5, 47, 130};

inline engine::GenerationRequest greedy_request(std::vector<std::int64_t> prompt, int new_tokens) {
  engine::GenerationRequest request;
  request.prompt = std::move(prompt);
  request.max_new_tokens = new_tokens;
  return request;
}

// Runs every request through one engine; the completions by request id.
inline std::vector<engine::Completion> run_engine(Runner& runner,
                                                  std::vector<engine::GenerationRequest> requests,
                                                  engine::EngineOptions options,
                                                  engine::EngineStats* stats = nullptr) {
  engine::Engine eng(runner, options);
  for (auto& request : requests) eng.add(std::move(request));
  std::vector<engine::Completion> done(eng.waiting());
  std::int64_t steps = 0;
  while (!eng.idle()) {
    for (auto& completion : eng.step())
      done[static_cast<std::size_t>(completion.request)] = std::move(completion);
    REQUIRE(++steps < 100000);
  }
  if (stats) *stats = eng.stats();
  return done;
}

}  // namespace zoo::ptest
