// Batch-invariant mode (model.batch_invariant, zoo/batch_invariant.hpp): every sequence's tokens,
// logits and logprobs are bitwise those of its run alone, whatever shares its steps, on the CPU
// (float32, in CI) and on CUDA (bf16). The default mode's rule (batch_test_util.hpp: a first
// difference only at a near tie) tolerates near ties; this mode tolerates nothing. What the mode
// cannot promise is refused by name.
#include <cstring>

#include "engine/batch_test_util.hpp"
#include "qwen3/fixture_test_util.hpp"
#include "test_skip.hpp"
#include "zoo/batch_invariant.hpp"
#include "zoo/error.hpp"
#if defined(ZOO_WITH_CUDA)
#include "cuda/cuda_model_util.hpp"
#include "zoo/kernels/cuda/common.hpp"
#endif

namespace zoo::ptest {
namespace {

// The dense families' fixtures (head dims the CUDA kernels serve).
const char* const kInvariantFixtures[] = {"qwen3-tiny-hd64", "llama-tiny-hd128", "qwen2-tiny",
                                          "mistral-sw-tiny", "gemma-tiny",       "gemma2-tiny",
                                          "gemma3-tiny",     "phi3-tiny",        "olmo2-tiny"};

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Tokens equal, and each token's logit, logprob and top-n bitwise equal.
void check_bitwise(const engine::Completion& alone, const engine::Completion& other,
                   const std::string& what) {
  INFO(what);
  REQUIRE(other.ids == alone.ids);
  REQUIRE(other.tokens.size() == alone.tokens.size());
  for (std::size_t i = 0; i < alone.tokens.size(); ++i) {
    INFO("new token " << i);
    const SampledToken &a = alone.tokens[i], &b = other.tokens[i];
    CHECK(same_bits(a.logit, b.logit));
    CHECK(same_bits(a.logprob, b.logprob));
    REQUIRE(a.top.size() == b.top.size());
    for (std::size_t j = 0; j < a.top.size(); ++j) {
      CHECK(a.top[j].first == b.top[j].first);
      CHECK(same_bits(a.top[j].second, b.top[j].second));
    }
  }
}

// Ten sequences alone (each on its own runner, its prompt in one chunk; and through a Session),
// then five at a time with prompts chunked by 40 tokens beside decodes, then six growing ones in a
// pool small enough to preempt (the recompute included): bitwise equal. Whether preemption happened.
bool check_invariant(Model& model, const std::string& name) {
  const auto& lengths = kCudaBatchLengths;
  const std::int64_t vocab = model.info().vocab_size;
  const auto request = [&](std::size_t i) {
    auto r = greedy_request(prompt_ids(lengths[i], vocab, i), 4 + static_cast<int>(i % 4) * 5);
    r.top_logprobs = 3;
    return r;
  };
  std::vector<engine::GenerationRequest> requests;
  std::vector<engine::Completion> alone;
  for (std::size_t i = 0; i < std::size(lengths); ++i) {
    // Alone: its own runner, the prompt in one chunk, decode graphs of bucket 1.
    auto runner = model.new_runner({.kv_pages = 64, .max_sequences = 1});
    alone.push_back(
        std::move(run_engine(*runner, {request(i)}, {.max_running = 1, .max_batched_tokens = 4096})[0]));
    // A Session (a runner of one sequence that grows its storage) gives the same ids.
    const AloneRun session = greedy_alone(model, prompt_ids(lengths[i], vocab, i), request(i).max_new_tokens);
    check_same_ids(session, alone.back().ids, fmt::format("{} sequence {}: engine alone vs session", name, i),
                   0.0f);
    requests.push_back(request(i));
  }
  // Batched: five at a time, prompts chunked by 40 tokens, decodes beside prefills.
  auto runner = model.new_runner({.kv_pages = 256, .max_sequences = 8});
  CHECK(runner->stats()["batch_invariant"] == true);
  engine::EngineStats stats;
  const auto batched = run_engine(*runner, requests, {.max_running = 5, .max_batched_tokens = 40}, &stats);
  CHECK(stats.peak_running == 5);
  if (runner->stats().contains("graph_steps"))  // CUDA: decode steps replayed as graphs count too
    CHECK(runner->stats()["graph_steps"].get<std::int64_t>() > 0);
  for (std::size_t i = 0; i < std::size(lengths); ++i)
    check_bitwise(alone[i], batched[i],
                  fmt::format("{} sequence {} ({} prompt tokens), batched", name, i, lengths[i]));

  // A pool too small for six sequences that grow by 30 tokens each: the newest are preempted and
  // later recompute their prompt and generated tokens as one prefill.
  std::vector<engine::GenerationRequest> growing;
  std::vector<engine::Completion> growing_alone;
  for (int i = 0; i < 6; ++i) {
    auto r = greedy_request(prompt_ids(20 + i, vocab, 200 + i), 30);
    r.top_logprobs = 3;
    auto one = model.new_runner({.kv_pages = 64, .max_sequences = 1});
    growing_alone.push_back(
        std::move(run_engine(*one, {r}, {.max_running = 1, .max_batched_tokens = 4096})[0]));
    growing.push_back(std::move(r));
  }
  auto small = model.new_runner({.kv_pages = 10, .max_sequences = 6});
  engine::EngineStats small_stats;
  const auto preempted =
      run_engine(*small, std::move(growing), {.max_running = 6, .max_batched_tokens = 64}, &small_stats);
  // Windowed layers give pages back as they go: a family whose every layer is windowed may fit.
  for (std::size_t i = 0; i < preempted.size(); ++i)
    check_bitwise(
        growing_alone[i], preempted[i],
        fmt::format("{} growing sequence {} ({} preemptions in the run)", name, i, small_stats.preemptions));
  return small_stats.preemptions > 0;
}

TEST_CASE(
    "batch-invariant mode on the CPU: each sequence's tokens and logprobs are bitwise those of its run "
    "alone on every dense family (chunked prefill, decodes beside prefills, preemption)") {
  int fixtures_preempted = 0;
  for (const char* name : kInvariantFixtures) {
    INFO("fixture " << name);
    OpenedModel opened = open_fixture(fixture_dir(name), true, 1, true);
    REQUIRE(opened.model->need_extension<BatchInvariant>().batch_invariant());
    fixtures_preempted += check_invariant(*opened.model, name) ? 1 : 0;
  }
  CHECK(fixtures_preempted >= 6);  // of nine: the recompute path is exercised, not assumed
}

TEST_CASE("batch-invariant mode: several ranks and mixture-of-experts layers are refused by name") {
  CHECK_THROWS_WITH(open_fixture(fixture_dir("qwen3-tiny"), false, 2, true),
                    Catch::Contains("batch_invariant with tensor_parallel 2"));
  CHECK_THROWS_WITH(open_fixture(fixture_dir("qwen3-moe-tiny"), false, 1, true),
                    Catch::Contains("batch_invariant with mixture-of-experts layers"));
}

TEST_CASE(
    "CUDA runner, batch-invariant: each sequence's tokens and logprobs are bitwise those of its run alone on "
    "every dense family (chunked prefill, decodes beside prefills, graphs, preemption)",
    "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  int fixtures_preempted = 0;
  for (const char* name : kInvariantFixtures) {
    INFO("fixture " << name);
    const auto loaded = cuda_test::load_cuda_fixture(fixture_dir(name), 1024, 1, true);
    fixtures_preempted += check_invariant(*loaded->model, name) ? 1 : 0;
  }
  CHECK(fixtures_preempted >= 6);
#endif
}

TEST_CASE("CUDA runner, batch-invariant: a plugin without the mode is refused by the host", "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  // Its model does not offer the extension: refused, not run in the default mode.
  CHECK_THROWS_WITH(cuda_test::load_cuda_fixture(fixture_dir("higgs-tiny-hd128"), 1024, 1, true),
                    Catch::Contains("(plugin higgs_audio) does not compute batch-invariantly"));
#endif
}

TEST_CASE("batch-invariant mode: a plugin without it is refused by the host") {
  // On the CPU too (its body would honour the mode; the plugin's model does not offer it).
  CHECK_THROWS_WITH(open_fixture(fixture_dir("higgs-tiny"), false, 1, true),
                    Catch::Contains("(plugin higgs_audio) does not compute batch-invariantly"));
}

}  // namespace
}  // namespace zoo::ptest
