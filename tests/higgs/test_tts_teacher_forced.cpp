// The Higgs TTS loop on the real plugin (higgs-tiny fixture): teacher-forced against transformers'
// multi-step trace (tools/fixtures/make_higgs_tts_fixtures.py), and Model::synthesize end to end.
#include "qwen3/fixture_test_util.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <limits>

#include "test_skip.hpp"
#include "higgs/tiny_speech.hpp"

#include "tts_loop.hpp"
#include "tts_sampler.hpp"
#include "tts_synthesize.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/request.hpp"
#include "zoo/speech.hpp"
#include "zoo/weight_source.hpp"
#if defined(ZOO_WITH_CUDA)
#include "cuda/cuda_model_util.hpp"
#include "zoo/kernels/cuda/common.hpp"
#endif

namespace zoo::ptest {
namespace {

using higgs::CodeRow;

// The rows of synthesize_speech picked where `session` can (on_device) and on the host, for
// several settings and seeds: the same frames; `device_rows` says where the first run picked.
void check_device_picks_equal_host(Session& session, const higgs::TtsShape& shape, std::int64_t vocab,
                                   bool expect_device) {
  struct Setting {
    float temperature;
    int top_k;
    float top_p;
  };
  for (const Setting& s : {Setting{0.0f, 50, 1.0f}, Setting{0.8f, 50, 1.0f}, Setting{1.0f, 0, 0.9f},
                           Setting{1.2f, 5, 1.0f}, Setting{1.5f, 1000, 0.7f}}) {
    for (std::uint64_t seed : {0ull, 1ull, 2ull}) {
      INFO("temperature " << s.temperature << " top_k " << s.top_k << " top_p " << s.top_p << " seed " << seed);
      SpeechRequest request = tiny_speech("hello there", vocab);
      request.temperature = s.temperature;
      request.top_k = s.top_k;
      request.top_p = s.top_p;
      request.seed = seed;
      request.max_steps = 40;
      higgs::SynthesisStats device, host;
      const SpeechResult a = higgs::synthesize_speech(session, shape, request, {}, true, &device);
      const SpeechResult b = higgs::synthesize_speech(session, shape, request, {}, false, &host);
      CHECK(device.device_rows == (expect_device ? a.steps : 0));
      CHECK(host.device_rows == 0);
      CHECK(a.steps == b.steps);
      CHECK(a.finished == b.finished);
      CHECK(a.frames == b.frames);
    }
  }
}

// Step s's audio logits (ours) against transformers' (want), both [K, V].
using StepGate = std::function<void(std::span<const float> ours, const float* want, std::int64_t K, std::int64_t V)>;

// Feeds transformers' reference rows (golden `rows`) back through the model's audio row table and
// gates the audio logits of every step against the golden's; the state machine must stop where
// the reference's did.
void check_teacher_forced(Model& model, const fs::path& dir, const fs::path& golden_path, const StepGate& gate) {
  const TraceFile golden(golden_path);
  const HostTensor rows_t = golden.get("rows");
  const HostTensor logits_t = golden.get("audio_logits");
  const std::int64_t S = rows_t.shape()[0], K = rows_t.shape()[1], V = logits_t.shape()[2];
  REQUIRE(K >= 2);
  REQUIRE(logits_t.shape() == Shape{S, K, V});
  std::vector<CodeRow> rows(static_cast<std::size_t>(S));
  for (std::int64_t s = 0; s < S; ++s)
    rows[s].assign(rows_t.as<std::int64_t>() + s * K, rows_t.as<std::int64_t>() + (s + 1) * K);

  auto session = model.new_session();
  const Prompt prompt = model.prepare(load_request(dir / "request.json"));
  ForwardResult first = session->forward(prompt.step());
  const HostTensor* first_audio = first.find_extra("audio_logits");
  REQUIRE(first_audio != nullptr);
  std::vector<float> first_logits(first_audio->as<float>(), first_audio->as<float>() + first_audio->numel());

  // Rows are fed back through the audio row table the plugin registered (its index comes with
  // every prompt that has audio slots).
  REQUIRE(prompt.table >= 0);
  higgs::SessionRowModel lm(*session, {K, V, model.info().hidden_size, 4096, prompt.table});

  std::int64_t picks = 0;
  const higgs::RowPicker teacher = [&](std::span<const float> logits, std::int64_t index) {
    INFO("step " << index);
    REQUIRE(index < S);
    REQUIRE(static_cast<std::int64_t>(logits.size()) == K * V);
    gate(logits, logits_t.as<float>() + index * K * V, K, V);
    ++picks;
    return rows[index];
  };
  const auto result = higgs::run_tts_loop(std::move(first_logits), lm, teacher, {K, V, 100});
  CHECK(picks == S);
  CHECK(result.stop == higgs::TtsStop::EndOfCodes);
  CHECK(result.eoc_row == golden.ids("eoc_row").at(0));
  CHECK(static_cast<std::int64_t>(result.rows.size()) == S);
  CHECK(result.rows == rows);
  // The last row is emitted, not fed: the cache holds the prompt and S - 1 rows.
  CHECK(session->position() == static_cast<std::int64_t>(prompt.ids.size()) + S - 1);
}

struct Agreement {
  double max_abs = 0, nmse = 0, cosine = 0;
};
Agreement agreement(std::span<const float> ours, const float* want) {
  double max_abs = 0, err = 0, ref = 0, dot = 0, na = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const double a = ours[i], b = want[i];
    max_abs = std::max(max_abs, std::abs(a - b));
    err += (a - b) * (a - b);
    ref += b * b;
    dot += a * b;
    na += a * a;
  }
  return {max_abs, err / ref, dot / std::sqrt(na * ref)};
}

}  // namespace

TEST_CASE("higgs tts: teacher-forced loop matches transformers at every step", "[higgs][tts]") {
  const fs::path dir = fixture_dir("higgs-tiny");
  OpenedModel opened = open_fixture(dir);
  check_teacher_forced(*opened.model, dir, dir / "tts_loop_golden.safetensors",
                       [](std::span<const float> logits, const float* want, std::int64_t K, std::int64_t V) {
                         // The one-step strict gates of configs/higgs-tiny.yaml (CPU float32), at every step.
                         const Agreement m = agreement(logits, want);
                         CHECK(m.max_abs <= 1.5e-3);
                         CHECK(m.nmse <= 1e-8);
                         CHECK(m.cosine >= 0.99999);
                         // Our greedy pick equals transformers' argmax (the trace's gaps are >= 0.2).
                         for (std::int64_t c = 0; c < K; ++c) {
                           const auto ours = higgs::argmax_first(
                               logits.subspan(static_cast<std::size_t>(c * V), static_cast<std::size_t>(V)));
                           CHECK(ours == higgs::argmax_first({want + c * V, static_cast<std::size_t>(V)}));
                         }
                       });
}

// CUDA (bf16) against transformers' bf16 trace made on the GPU host
// (tools/fixtures/make_higgs_tts_fixtures.py --loop-bf16 higgs-tiny-hd128): the row table's sum
// and head run on the device, inside the decode graphs.
TEST_CASE("higgs tts: teacher-forced loop on CUDA matches transformers bf16 at every step", "[higgs][tts][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const fs::path dir = fixture_dir("higgs-tiny-hd128");
  const fs::path golden = dir / "tts_loop_golden-bf16.safetensors";
  INFO("make it on the GPU host, see tests/fixtures/README.md");
  REQUIRE(fs::exists(golden));  // committed: a missing golden is a failure, not a quiet pass
  const ModelArgs args = cuda_test::cuda_bf16_args(dir);
  auto model = registry().create_model(registry().resolve_config(args.config, (dir / "config.json").string()).name, args);
  model->load();
  check_teacher_forced(*model, dir, golden,
                       [](std::span<const float> logits, const float* want, std::int64_t K, std::int64_t V) {
                         // The one-step CUDA gates (tests/cuda/layers/model_parity_test.cpp), at every step.
                         const Agreement m = agreement(logits, want);
                         INFO("cosine " << m.cosine << ", max_abs " << m.max_abs);
                         CHECK(m.cosine >= 0.9999);
                         // Same pick wherever transformers' top-2 margin is more than two bf16 steps.
                         for (std::int64_t c = 0; c < K; ++c) {
                           const std::span<const float> row{want + c * V, static_cast<std::size_t>(V)};
                           const auto top = higgs::argmax_first(row);
                           float second = -std::numeric_limits<float>::infinity();
                           for (std::int64_t i = 0; i < V; ++i)
                             if (i != top) second = std::max(second, row[i]);
                           const double step = std::ldexp(1.0, std::ilogb(std::abs(row[top])) - 7);
                           if (row[top] - second <= 2 * step) continue;
                           CHECK(higgs::argmax_first(logits.subspan(static_cast<std::size_t>(c * V),
                                                                    static_cast<std::size_t>(V))) == top);
                         }
                       });
#endif
}

TEST_CASE("higgs tts: synthesize on the tiny fixture", "[higgs][tts]") {
  OpenedModel opened = open_fixture(fixture_dir("higgs-tiny"));
  Speech& model = opened.model->need_extension<Speech>();
  SpeechRequest request = tiny_speech("hello there");
  request.max_steps = 24;
  std::vector<SpeechProgress> seen;
  const SpeechResult a = model.synthesize(request, [&](const SpeechProgress& p) { seen.push_back(p); });
  CHECK(a.prompt_tokens == 3 + 11);
  CHECK(a.steps <= 24);
  CHECK(static_cast<std::int64_t>(a.frames.size()) == a.steps - 3);
  if (!a.finished) CHECK(a.steps == 24);
  REQUIRE(static_cast<std::int64_t>(seen.size()) == a.steps);
  CHECK(seen.back().frames == static_cast<std::int64_t>(a.frames.size()));
  CHECK(seen.back().seconds == Approx(a.frames.size() / 25.0));
  for (const auto& frame : a.frames) {
    REQUIRE(frame.size() == 4);
    for (auto code : frame) CHECK((code >= 0 && code < 64));
  }
  // Same seed, same codes; another seed, other codes.
  CHECK(model.synthesize(request).frames == a.frames);
  request.seed = 99;
  CHECK(model.synthesize(request).frames != a.frames);

  // Voice clone: reference codes go into the slots; the transcript needs them.
  request.reference_codes = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  request.reference_text = "hi";
  const SpeechResult cloned = model.synthesize(request);
  CHECK(cloned.prompt_tokens == 3 + 11 + 2 + 2 + (2 + 3));

  request.reference_codes = {{1, 2, 3, 64}};
  request.reference_label = "voice.json";
  CHECK_THAT(input_error_of([&] { model.synthesize(request); }), Catch::Matchers::StartsWith("voice.json: codes[0][3]"));
  request.reference_codes.clear();
  request.max_steps = 5000;  // the fixture's context is 4096 positions
  CHECK_THAT(input_error_of([&] { model.synthesize(request); }), Catch::Matchers::Contains("exceed the context"));
  request.max_steps = 10;
  request.temperature = -1;
  CHECK_THAT(input_error_of([&] { model.synthesize(request); }), Catch::Matchers::Contains("temperature"));
}

TEST_CASE("higgs tts: a CPU session's rows are picked on the host, as before", "[higgs][tts]") {
  const fs::path dir = fixture_dir("higgs-tiny");
  OpenedModel opened = open_fixture(dir);
  const Prompt probe = opened.model->prepare(load_request(dir / "request.json"));
  auto session = opened.model->new_session();
  check_device_picks_equal_host(*session, {4, 66, opened.model->info().hidden_size, 4096, probe.table}, 320, false);
}

// The CUDA decoder picks the codes (kernels sample_segments, in the decode graphs) and only the K
// ids come back per row: the same rows as the host sampler on the downloaded logits.
TEST_CASE("higgs tts: the CUDA loop picks on the device the rows the host path picks",
          "[higgs][tts][cuda][tts_sampling]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const fs::path dir = fixture_dir("higgs-tiny-hd128");
  const ModelArgs args = cuda_test::cuda_bf16_args(dir);
  auto model = registry().create_model(registry().resolve_config(args.config, (dir / "config.json").string()).name, args);
  model->load();
  const Prompt probe = model->prepare(load_request(dir / "request.json"));
  const higgs::TtsShape shape{5, 40, model->info().hidden_size, args.max_context, probe.table};
  auto session = model->new_session();
  check_device_picks_equal_host(*session, shape, 256, true);
  // Model::synthesize takes the device path too.
  SpeechRequest request = tiny_speech("hello there", 256);
  request.max_steps = 40;
  CHECK(model->need_extension<Speech>().synthesize(request).frames == higgs::synthesize_speech(*session, shape, request, {}, false).frames);
#endif
}

TEST_CASE("synthesize: a text model says it does not synthesize speech", "[higgs][tts]") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  CHECK_THAT(input_error_of([&] { opened.model->need_extension<Speech>().synthesize(tiny_speech("a")); }),
             Catch::Matchers::Contains("does not synthesize speech"));
}

}  // namespace zoo::ptest
