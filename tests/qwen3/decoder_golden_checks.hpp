#pragma once
// Checks every decoder plugin's fixture tests share (tests/qwen3, tests/llama): greedy generation
// against transformers' generated_ids, KV-cache decode against full re-prefills, and the step's
// returned logits against the traced ones.
#include <algorithm>
#include <span>

#include "qwen3/fixture_test_util.hpp"
#include "zoo/compare.hpp"
#include "zoo/generation.hpp"
#include "zoo/trace.hpp"

namespace zoo::ptest {

inline HostTensor last_logits(Session& session, std::span<const std::int64_t> ids) {
  ForwardResult r = session.forward(ForwardStep{ids, {}, {}, OutputRequest{}});
  REQUIRE(r.logits.shape().size() == 2);
  REQUIRE(r.logits.shape()[0] == 1);
  return std::move(r.logits);
}

// What a step returns is the last row of the traced [T, V] logits, up to summation order: the
// returned row is its own 1-row product (so a hook never changes results), the tap a T-row one.
inline void check_returned_row_is_last_traced(const HostTensor& traced, const ForwardResult& out, std::int64_t T) {
  const auto V = traced.shape()[1];
  REQUIRE(out.logits.shape() == Shape{1, V});
  const TensorView last{traced.as<float>() + (T - 1) * V, DType::F32, {1, V}, Device{}};
  const auto same = compare_tensors("logits", last, out.logits.view(), 0, true);
  CHECK(same.max_abs <= 1e-4);
  CHECK(same.argmax_matches == 1);
}

// Greedy generate() equals transformers' golden_generate.safetensors for its full length, streams
// what it returns, leaves the last token unfed, and repeats itself on the same (reset) session.
inline void check_generation_matches_golden(Model& model, const Prompt& prompt, const fs::path& dir) {
  const auto expected = TraceFile(dir / "golden_generate.safetensors").ids("generated_ids");
  REQUIRE(expected.size() >= 2);
  GenerationOptions options;
  options.max_new_tokens = static_cast<int>(expected.size());
  auto session = model.new_session();
  std::vector<std::int64_t> streamed;
  const auto ids = generate(*session, prompt, options, [&](std::int64_t id) { streamed.push_back(id); });
  CHECK(ids == expected);
  CHECK(streamed == ids);
  CHECK(session->position() == static_cast<std::int64_t>(prompt.ids.size() + expected.size() - 1));
  CHECK(generate(*session, prompt, options) == ids);
}

// Prefill the prompt, then decode up to `max_steps` golden tokens one at a time; after each step
// the last logits equal a fresh session's prefill of the whole sequence. Then a chunked prefill
// (a multi-token step after a prefill) must agree too.
inline void check_kv_cache_matches_prefill(Model& model, const Prompt& prompt, const fs::path& dir,
                                           std::size_t max_steps) {
  const auto generated = TraceFile(dir / "golden_generate.safetensors").ids("generated_ids");
  const std::size_t k = std::min(max_steps, generated.size());
  REQUIRE(k >= 3);
  auto cached = model.new_session();
  auto fresh = model.new_session();
  std::vector<std::int64_t> sequence = prompt.ids;
  // Two sessions of one model are independent and deterministic.
  CHECK(max_abs_diff(last_logits(*cached, sequence), last_logits(*fresh, sequence)) == 0.0);
  for (std::size_t i = 0; i < k; ++i) {
    INFO("decode step " << i);
    const std::int64_t token = generated[i];
    const HostTensor step = last_logits(*cached, std::span<const std::int64_t>(&token, 1));
    sequence.push_back(token);
    CHECK(cached->position() == static_cast<std::int64_t>(sequence.size()));
    fresh->reset();
    CHECK(fresh->position() == 0);
    const HostTensor full = last_logits(*fresh, sequence);
    const double diff = max_abs_diff(step, full);
    INFO("max |decode - prefill| = " << diff << ", max |logit| = " << max_abs(full));
    CHECK(diff <= 1e-4 * std::max(1.0, max_abs(full)));
  }

  auto chunked = model.new_session();
  const std::size_t split = prompt.ids.size() / 2;
  (void)last_logits(*chunked, std::span<const std::int64_t>(sequence.data(), split));
  const HostTensor rest =
      last_logits(*chunked, std::span<const std::int64_t>(sequence.data() + split, sequence.size() - split));
  fresh->reset();
  const HostTensor full = last_logits(*fresh, sequence);
  CHECK(max_abs_diff(rest, full) <= 1e-4 * std::max(1.0, max_abs(full)));
}

}  // namespace zoo::ptest
