// Speech in the engine: Higgs TTS requests as driven sequences (zoo::SpeechSteps) share forward
// passes with each other, and each gets the frames of its run alone (Speech::synthesize through a
// Session) for its seed: the delay state machine and the seeded sampler are the driver's, whatever
// it is batched with, preempted or not.
#include <algorithm>
#include <functional>
#include <limits>

#include "higgs/tiny_speech.hpp"
#include "qwen3/fixture_test_util.hpp"
#include "scoped_env.hpp"
#include "test_skip.hpp"
#include "zoo/batch.hpp"
#include "zoo/engine/engine.hpp"
#include "zoo/speech.hpp"
#if defined(ZOO_WITH_CUDA)
#include "cuda/cuda_model_util.hpp"
#include "zoo/kernels/cuda/common.hpp"
#endif

namespace zoo::ptest {
namespace {

// Requests of different lengths, samplers and seeds (greedy, sampled, top-p) and a cloned voice.
std::vector<SpeechRequest> speech_requests(std::int64_t vocab) {
  std::vector<SpeechRequest> requests;
  const char* texts[] = {"hello there", "a", "the quick brown fox jumps", "zoo", "one more line of speech", "ok"};
  for (int i = 0; i < 6; ++i) {
    SpeechRequest r = tiny_speech(texts[i], vocab);
    r.seed = static_cast<std::uint64_t>(i);
    r.max_steps = 12 + 7 * i;
    r.temperature = i == 0 ? 0.0f : i % 2 == 0 ? 1.2f : 0.8f;
    r.top_k = i == 3 ? 0 : 50;
    r.top_p = i == 3 ? 0.9f : 1.0f;
    if (i == 4) {
      r.reference_text = "ref";
      r.reference_codes = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}};
    }
    requests.push_back(std::move(r));
  }
  return requests;
}

struct Driven {
  std::shared_ptr<SpeechSequence> sequence;
  std::vector<std::vector<std::int64_t>> streamed;  // progress()'s new frames, in order
};

// Every request through one engine over `runner`; each sequence's streamed frames collected after
// the steps that picked for it.
std::vector<Driven> run_speech(Model& model, Runner& runner, const std::vector<SpeechRequest>& requests,
                               engine::EngineOptions options, engine::EngineStats& stats) {
  engine::Engine eng(runner, options);
  std::vector<Driven> driven;
  for (const auto& request : requests) {
    driven.push_back({model.need_extension<SpeechSteps>().start_speech(request), {}});
    REQUIRE(eng.add(engine::DrivenRequest{driven.back().sequence}) == static_cast<std::int64_t>(driven.size()) - 1);
  }
  std::vector<bool> completed(driven.size(), false);
  for (int steps = 0; !eng.idle(); ++steps) {
    REQUIRE(steps < 10000);
    for (const auto& completion : eng.step()) {
      CHECK(completion.ids.empty());
      completed[static_cast<std::size_t>(completion.request)] = true;
    }
    for (const std::int64_t request : eng.last_driven()) {
      Driven& d = driven[static_cast<std::size_t>(request)];
      const SpeechProgress progress = d.sequence->progress();
      d.streamed.insert(d.streamed.end(), progress.new_frames.begin(), progress.new_frames.end());
    }
  }
  CHECK(std::all_of(completed.begin(), completed.end(), [](bool c) { return c; }));
  stats = eng.stats();
  return driven;
}

void check_equal_alone(Model& model, const std::vector<SpeechRequest>& requests, const std::vector<Driven>& driven) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i);
    const SpeechResult alone = model.need_extension<Speech>().synthesize(requests[i]);
    REQUIRE(driven[i].sequence->done());
    const SpeechResult batched = driven[i].sequence->result();
    CHECK(!alone.frames.empty());  // speech, not an empty run
    CHECK(batched.steps == alone.steps);
    CHECK(batched.finished == alone.finished);
    CHECK(batched.prompt_tokens == alone.prompt_tokens);
    CHECK(batched.frames == alone.frames);
    CHECK(driven[i].streamed == alone.frames);
  }
}

TEST_CASE("engine: speech requests share forward passes and each gets the frames of its run alone",
          "[engine][speech]") {
  OpenedModel opened = open_fixture(fixture_dir("higgs-tiny"));
  Model& model = *opened.model;
  const auto requests = speech_requests(320);
  auto runner = model.new_runner({.max_sequences = 8});
  engine::EngineStats stats;
  const auto driven = run_speech(model, *runner, requests, {.max_running = 8, .max_batched_tokens = 64}, stats);
  check_equal_alone(model, requests, driven);
  // Shared forwards: fewer steps than the requests' steps added up, several rows in most.
  std::int64_t alone_steps = 0;
  for (const auto& d : driven) alone_steps += d.sequence->result().steps;
  CHECK(stats.steps < alone_steps / 2);
  CHECK(stats.rows > 2 * stats.steps);
  CHECK(stats.peak_running == 6);
  CHECK(runner->pool().groups.front().used == 0);  // every sequence's pages went back
}

TEST_CASE("engine: speech requests preempted for pages are recomputed and keep their frames", "[engine][speech]") {
  OpenedModel opened = open_fixture(fixture_dir("higgs-tiny"));
  Model& model = *opened.model;
  const auto requests = speech_requests(320);
  // 8 pages of 16 positions: the longest request alone needs 5, six at once cannot all stay.
  auto runner = model.new_runner({.kv_pages = 8, .max_sequences = 8});
  engine::EngineStats stats;
  const auto driven = run_speech(model, *runner, requests, {.max_running = 8, .max_batched_tokens = 24}, stats);
  CHECK(stats.preemptions > 0);
  check_equal_alone(model, requests, driven);
}

TEST_CASE("engine: a speech request that can never fit is refused when added", "[engine][speech]") {
  OpenedModel opened = open_fixture(fixture_dir("higgs-tiny"));
  Model& model = *opened.model;
  auto runner = model.new_runner({.kv_pages = 2, .max_sequences = 2});
  engine::Engine eng(*runner);
  SpeechRequest request = tiny_speech("hello there");
  request.max_steps = 100;
  const std::shared_ptr<SpeechSequence> sequence = model.need_extension<SpeechSteps>().start_speech(request);
  CHECK_THAT(input_error_of([&] { eng.add(engine::DrivenRequest{sequence}); }),
             Catch::Matchers::Contains("KV pages"));
}

// A greedy request alone through a Session, the codes picked on the host from the audio logits, so
// each row's smallest top-2 margin over its codebooks is known.
struct AloneSpeech {
  SpeechResult result;
  std::vector<float> margins;  // per row
};
[[maybe_unused]] AloneSpeech speech_alone(Model& model, const SpeechRequest& request) {  // CUDA builds only
  const test::ScopedEnv host("ZOO_TTS_HOST_SAMPLING", "1");
  const auto sequence = model.need_extension<SpeechSteps>().start_speech(request);
  auto session = model.new_session();
  AloneSpeech alone;
  for (std::int64_t begin = 0;;) {
    const std::int64_t end = sequence->known();
    const ForwardResult out = session->forward(sequence->step(begin, end));
    begin = end;
    const HostTensor* logits = out.find_extra("audio_logits");
    REQUIRE(logits != nullptr);
    const std::int64_t K = logits->shape()[0], V = logits->shape()[1];
    float row_margin = std::numeric_limits<float>::infinity();
    for (std::int64_t c = 0; c < K; ++c) {
      std::vector<float> v(logits->as<float>() + c * V, logits->as<float>() + (c + 1) * V);
      std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<>());
      row_margin = std::min(row_margin, v[0] - v[1]);
    }
    alone.margins.push_back(row_margin);
    if (sequence->accept(out)) break;
  }
  alone.result = sequence->result();
  return alone;
}

// The CUDA runner's table rows, audio head and device picks in batched steps (graphs included):
// each greedy request's frames equal its run alone, or differ first where the alone run was within
// bf16 noise of a tie (reported), the batch issue's rule.
TEST_CASE("engine: speech requests batched on the CUDA runner give the frames of their runs alone (bf16 rule)",
          "[engine][speech][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  auto loaded = cuda_test::load_cuda_fixture(fixture_dir("higgs-tiny-hd128"));
  Model& model = *loaded->model;
  std::vector<SpeechRequest> requests;
  for (int i = 0; i < 12; ++i) {
    SpeechRequest r = tiny_speech(std::string(static_cast<std::size_t>(1 + i % 5), 'a' + static_cast<char>(i)) + " speech", 256);
    r.temperature = 0.0f;
    r.max_steps = 20 + 3 * i;
    requests.push_back(std::move(r));
  }
  auto runner = model.new_runner({.max_sequences = 16});
  engine::EngineStats stats;
  const auto driven = run_speech(model, *runner, requests, {.max_running = 16, .max_batched_tokens = 256}, stats);
  CHECK(stats.rows > 4 * stats.steps);
  int equal = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i);
    const AloneSpeech alone = speech_alone(model, requests[i]);
    const SpeechResult batched = driven[i].sequence->result();
    CHECK(driven[i].streamed == batched.frames);
    if (batched.frames == alone.result.frames && batched.steps == alone.result.steps) {
      ++equal;
      continue;
    }
    // Frame t holds rows t .. t + K - 1: the first differing frame names the rows to look at.
    const std::size_t K = alone.result.frames.empty() ? 1 : alone.result.frames.front().size();
    std::size_t t = 0;
    while (t < std::min(batched.frames.size(), alone.result.frames.size()) && batched.frames[t] == alone.result.frames[t]) ++t;
    float margin = std::numeric_limits<float>::infinity();
    for (std::size_t r = t; r < std::min(t + K, alone.margins.size()); ++r) margin = std::min(margin, alone.margins[r]);
    WARN("request " << i << ": first difference at frame " << t << ", alone top-2 margin there " << margin);
    CHECK(margin < 0.08f);  // as the text runner tests (kCudaTieMargin in batch_test_util.hpp)
  }
  CHECK(equal >= static_cast<int>(requests.size()) / 2);
#endif
}

}  // namespace
}  // namespace zoo::ptest
