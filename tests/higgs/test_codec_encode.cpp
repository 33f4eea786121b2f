// The Higgs codec encoder (plugins/higgs_audio/src/codec_encoder.cpp) on the CPU in float32 against
// transformers' HiggsAudioV2TokenizerModel.encode on the higgs-tiny-codec-enc fixture
// (tools/fixtures/make_codec_encode_fixtures.py): every stage within float32 tolerance and the
// codes exactly; the smallest best-vs-second score gap per quantizer is printed (a near tie would
// show there before it flips a code). Also the torchaudio-compatible resampler on its own.
#include "qwen3/fixture_test_util.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "codec.hpp"
#include "higgs/codec_test_util.hpp"
#include "codec_encoder.hpp"
#include "test_skip.hpp"
#include "higgs_config.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/kernels/encoder_cpu.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/trace.hpp"
#include "zoo/weight_source.hpp"

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;

double max_abs(const std::vector<float>& want, const std::vector<float>& got) {
  double m = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) m = std::max(m, std::abs(static_cast<double>(got[i]) - want[i]));
  return m;
}

fs::path encode_fixture() { return fixture_dir("higgs-tiny-codec-enc"); }

TEST_CASE("codec encoder geometry is derived from the stored shapes", "[higgs][codec][encode]") {
  auto encoder = loaded_encoder(encode_fixture());
  const auto& g = encoder->geometry();
  INFO(g.summary());
  CHECK(g.hop() == 960);
  CHECK(g.semantic_stride() == 320);
  CHECK(g.downsample() == 2);
  CHECK(g.acoustic == 8);
  CHECK(g.semantic == 16);
  CHECK(g.heads == 2);
  CHECK(g.layers == 2);
  CHECK(g.num_quantizers == 4);
  CHECK(g.codebook_size == 32);
  CHECK(g.codebook_dim == 4);
  CHECK(g.pos_kernel == 16);
  CHECK(g.pos_groups == 2);
  CHECK(g.semantic_blocks.size() == 2);
}

TEST_CASE("codec encode matches transformers' HiggsAudioV2TokenizerModel.encode, every stage", "[higgs][codec][encode]") {
  auto encoder = loaded_encoder(encode_fixture());
  const TraceFile golden(encode_fixture() / "golden-encode.safetensors");
  std::int64_t codes_equal = 0, codes_total = 0;
  for (const std::string c : {"a.", "b."}) {
    const std::vector<float> input = to_f32(golden.get(c + "input").view());
    TraceRecorder taps{PointSelection({"*"})};
    const higgs::EncodeResult r = encoder->encode(input.data(), static_cast<std::int64_t>(input.size()), &taps);
    for (const auto& name : golden.names()) {
      if (!name.starts_with(c) || name == c + "input" || name == c + "codes" || name == c + "gap") continue;
      const std::string tap = name.substr(c.size());
      INFO("stage " << name);
      const HostTensor* got = taps.find(tap);
      REQUIRE(got != nullptr);
      const std::vector<float> want = to_f32(golden.get(name).view()), have = to_f32(got->view());
      REQUIRE(want.size() == have.size());
      const double err = rel_l2(want, have);
      std::printf("encode %s%-22s rel L2 %.2e  max |diff| %.2e\n", c.c_str(), tap.c_str(), err, max_abs(want, have));
      // The semantic branch stays within 1e-6; the DAC encoder's 15 Snake residual units in
      // float32 (different summation orders than torch's convolutions) reach ~2e-5.
      const bool acoustic = !tap.starts_with("resampled") && !tap.starts_with("hubert") &&
                            !tap.starts_with("semantic") && !tap.starts_with("e_semantic");
      CHECK(err <= (acoustic ? 5e-5 : 5e-6));
    }
    const HostTensor want_codes = golden.get(c + "codes");
    REQUIRE(want_codes.shape() == Shape{r.frames, r.num_quantizers});
    const auto* want = want_codes.view().as<std::int64_t>();
    for (std::int64_t i = 0; i < r.frames * r.num_quantizers; ++i) {
      codes_equal += want[i] == r.codes[static_cast<std::size_t>(i)] ? 1 : 0;
      ++codes_total;
    }
    const std::vector<float> want_gap = to_f32(golden.get(c + "gap").view());
    for (std::int64_t q = 0; q < r.num_quantizers; ++q) {
      float golden_min = INFINITY;
      for (std::int64_t t = 0; t < r.frames; ++t) golden_min = std::min(golden_min, want_gap[static_cast<std::size_t>(t * r.num_quantizers + q)]);
      std::printf("encode %squantizer %lld: min best-vs-second gap %.6f (transformers %.6f)\n", c.c_str(),
                  static_cast<long long>(q), r.min_gap(q), golden_min);
    }
  }
  std::printf("encode codes equal to transformers': %lld of %lld\n", static_cast<long long>(codes_equal),
              static_cast<long long>(codes_total));
  CHECK(codes_equal == codes_total);
}

TEST_CASE("codec encode refuses empty, non-finite, too long and too short input", "[higgs][codec][encode]") {
  auto encoder = loaded_encoder(encode_fixture());
  const auto& g = encoder->geometry();
  std::vector<float> x(4800, 0.1f);
  CHECK_THROWS_WITH(higgs::check_encode_input(g, x.data(), 0, "voice.wav"), Contains("voice.wav") && Contains("no audio"));
  x[17] = NAN;
  CHECK_THROWS_WITH(higgs::check_encode_input(g, x.data(), 4800, "voice.wav"), Contains("sample 17"));
  x[17] = INFINITY;
  CHECK_THROWS_WITH(higgs::check_encode_input(g, x.data(), 4800, "voice.wav"), Contains("finite"));
  const std::int64_t too_long = higgs::max_encode_samples(g) + 1;
  std::vector<float> long_input(static_cast<std::size_t>(too_long), 0.0f);
  CHECK_THROWS_WITH(higgs::check_encode_input(g, long_input.data(), too_long, "voice.wav"),
                    Contains("at most 100 s"));
  std::vector<float> tiny(10, 0.1f);
  CHECK_THROWS_WITH(encoder->encode(tiny.data(), 10), Contains("too short"));
}

TEST_CASE("sinc resampler follows torchaudio's resample lengths and filters", "[higgs][codec][encode]") {
  // 24 kHz -> 16 kHz: rates 3 -> 2, width ceil(6 * 3 / 1.98) = 10, 23 taps per phase.
  const kernels::cpu::SincResampler r(24000, 16000);
  CHECK(r.width() == 10);
  CHECK(r.filters().size() == 2 * 23);
  CHECK(r.output_length(7200) == 4800);
  CHECK(r.output_length(7201) == 4801);
  CHECK(r.output_length(1) == 1);
  // Phase 0's centre tap is scale = 1.98 / 3 (sinc(0) = 1, window 1).
  CHECK(r.filters()[10] == Approx(0.66f).epsilon(1e-6));
  // The same rate returns the input.
  const kernels::cpu::SincResampler same(24000, 24000);
  const std::vector<float> x{1.0f, 2.0f, 3.0f};
  CHECK(same.run(x.data(), 3) == x);
}

}  // namespace
}  // namespace zoo::ptest

namespace zoo::ptest {
namespace {

// Where an encode's time goes on the CPU, stage by stage: a hook that takes nothing and notes the
// time at every tap point. Prints numbers; asserts nothing about time.
//   ZOO_CODEC_ENC_REAL_FIXTURE=DIR/higgs-codec-enc-real build/bin/test_higgs "[codec_encode_profile]"
class StageClock : public DiagnosticHook {
 public:
  bool wants(std::string_view name) const override {
    marks_.emplace_back(std::string(name), std::chrono::steady_clock::now());
    return false;
  }
  void record(std::string_view, const TensorView&) override {}
  std::string report(std::chrono::steady_clock::time_point start) const {
    std::string line;
    auto last = start;
    for (const auto& [name, at] : marks_) {
      const double ms = std::chrono::duration<double, std::milli>(at - last).count();
      if (ms >= 0.5) line += fmt::format(" {} {:.0f}", name, ms);
      last = at;
    }
    return line;
  }

 private:
  mutable std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> marks_;
};

TEST_CASE("codec encode CPU time per stage (needs ZOO_CODEC_ENC_REAL_FIXTURE)", "[.][codec_encode_profile]") {
  const char* dir = std::getenv("ZOO_CODEC_ENC_REAL_FIXTURE");
  if (!dir) ZOO_SKIP("ZOO_CODEC_ENC_REAL_FIXTURE is not set");
  auto encoder = loaded_encoder(dir);
  const TraceFile golden(fs::path(dir) / "golden-encode.safetensors");
  const std::vector<float> input = to_f32(golden.get("a.input").view());
  StageClock clock;
  const auto start = std::chrono::steady_clock::now();
  const auto r = encoder->encode(input.data(), static_cast<std::int64_t>(input.size()), &clock);
  const double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("codec_encode_profile cpu (ms, time up to each tap):%s | total %.0f ms for %.1f s of input\n",
              clock.report(start).c_str(), total,
              static_cast<double>(input.size()) / static_cast<double>(encoder->geometry().sample_rate));
  CHECK(r.frames > 0);
}

}  // namespace
}  // namespace zoo::ptest
