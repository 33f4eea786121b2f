// The Higgs codec encoder on CUDA (plugins/higgs_audio/src/cuda/codec_encoder_cuda.cpp) against
// transformers' HiggsAudioV2TokenizerModel.encode goldens (tools/fixtures/make_codec_encode_fixtures.py)
// and the CPU float32 path: every stage within float32 tolerance (TF32 off), the codes exactly.
// Skipped without a GPU; also the encode benchmark at the real shapes (hidden, needs a fixture).
#ifdef ZOO_WITH_CUDA
#include "qwen3/fixture_test_util.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "codec.hpp"
#include "higgs/codec_test_util.hpp"
#include "codec_encoder.hpp"
#include "cuda/cuda_test_util.hpp"
#include "higgs_config.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/trace.hpp"
#include "zoo/weight_source.hpp"

namespace zoo::ptest {
namespace {

TEST_CASE("codec encode on CUDA matches transformers, every stage, and the CPU codes", "[higgs][codec][codec_cuda][encode]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const fs::path dir = fixture_dir("higgs-tiny-codec-enc");
  auto cpu = loaded_encoder(dir);
  auto gpu = higgs::make_cuda_codec_encoder_runner(cpu->geometry(), cpu->weights(), 0);
  const TraceFile golden(dir / "golden-encode.safetensors");
  std::int64_t equal = 0, total = 0;
  // a, b, then a again: the buffers sized for the longer case serve the shorter one.
  for (const std::string c : {"a.", "b.", "a."}) {
    const std::vector<float> input = to_f32(golden.get(c + "input").view());
    TraceRecorder taps{PointSelection({"*"})};
    const higgs::EncodeResult r = gpu->encode(input.data(), static_cast<std::int64_t>(input.size()), &taps);
    for (const auto& name : golden.names()) {
      if (!name.starts_with(c) || name == c + "input" || name == c + "codes" || name == c + "gap") continue;
      const std::string tap = name.substr(c.size());
      INFO("stage " << name);
      const HostTensor* got = taps.find(tap);
      REQUIRE(got != nullptr);
      const double err = rel_l2(to_f32(golden.get(name).view()), to_f32(got->view()));
      std::printf("encode cuda %s%-22s rel L2 %.2e\n", c.c_str(), tap.c_str(), err);
      CHECK(err <= 1e-4);
    }
    const HostTensor want = golden.get(c + "codes");
    REQUIRE(want.shape() == Shape{r.frames, r.num_quantizers});
    const auto cpu_r = cpu->encode(input.data(), static_cast<std::int64_t>(input.size()));
    for (std::int64_t i = 0; i < r.frames * r.num_quantizers; ++i) {
      equal += want.view().as<std::int64_t>()[i] == r.codes[static_cast<std::size_t>(i)] ? 1 : 0;
      ++total;
      CHECK(cpu_r.codes[static_cast<std::size_t>(i)] == r.codes[static_cast<std::size_t>(i)]);
    }
    for (std::int64_t q = 0; q < r.num_quantizers; ++q)
      std::printf("encode cuda %squantizer %lld: min best-vs-second gap %.6f (CPU %.6f)\n", c.c_str(),
                  static_cast<long long>(q), r.min_gap(q), cpu_r.min_gap(q));
  }
  std::printf("encode cuda codes equal to transformers': %lld of %lld\n", static_cast<long long>(equal),
              static_cast<long long>(total));
  CHECK(equal == total);
}

// Speed at the real shapes: a 10 s reference (the fixture's case a), steady state after two
// warm-up encodes; CUDA and CPU, codes compared with transformers'. Prints numbers; asserts no time.
//   python3 tools/fixtures/make_codec_encode_fixtures.py --real --out DIR   (torchaudio needed)
//   ZOO_CODEC_ENC_REAL_FIXTURE=DIR/higgs-codec-enc-real build/bin/test_higgs "[codec_encode_bench]"
TEST_CASE("codec encode speed on CUDA and CPU at the real shapes (needs ZOO_CODEC_ENC_REAL_FIXTURE)",
          "[.][codec_encode_bench]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const char* dir = std::getenv("ZOO_CODEC_ENC_REAL_FIXTURE");
  if (!dir) ZOO_SKIP("ZOO_CODEC_ENC_REAL_FIXTURE is not set");
  auto cpu = loaded_encoder(dir);
  std::printf("%s\n", cpu->geometry().summary().c_str());
  auto gpu = higgs::make_cuda_codec_encoder_runner(cpu->geometry(), cpu->weights(), 0);
  const TraceFile golden(fs::path(dir) / "golden-encode.safetensors");
  const std::vector<float> input = to_f32(golden.get("a.input").view());
  const std::int64_t n = static_cast<std::int64_t>(input.size());
  const double audio_ms = 1000.0 * static_cast<double>(n) / static_cast<double>(cpu->geometry().sample_rate);
  higgs::EncodeResult r;
  for (int i = 0; i < 2; ++i) r = gpu->encode(input.data(), n, nullptr);
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    const auto start = std::chrono::steady_clock::now();
    r = gpu->encode(input.data(), n, nullptr);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("codec_encode_bench cuda: %lld samples (%.0f ms of audio) -> %lld frames: median %.3f ms, min %.3f ms, "
              "max %.3f ms over %zu encodes = %.0fx real time (median)\n",
              static_cast<long long>(n), audio_ms, static_cast<long long>(r.frames), ms[ms.size() / 2], ms.front(),
              ms.back(), ms.size(), audio_ms / ms[ms.size() / 2]);
  const auto start = std::chrono::steady_clock::now();
  const auto cpu_r = cpu->encode(input.data(), n);
  const double cpu_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("codec_encode_bench cpu: %.1f ms = %.1fx real time\n", cpu_ms, audio_ms / cpu_ms);
  const HostTensor want = golden.get("a.codes");
  // transformers' best-minus-second score per code: where it is 0 the golden's pick is an exact
  // float32 tie (its own pick flips with its thread count), so either code is the right answer.
  const std::vector<float> gap = to_f32(golden.get("a.gap").view());
  REQUIRE(gap.size() == static_cast<std::size_t>(want.numel()));
  std::int64_t gpu_equal = 0, cpu_equal = 0, gpu_wrong = 0, cpu_wrong = 0, ties = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const auto code = want.view().as<std::int64_t>()[i];
    const bool tie = gap[static_cast<std::size_t>(i)] == 0.0f;
    ties += tie ? 1 : 0;
    const bool gpu_same = code == r.codes[static_cast<std::size_t>(i)];
    const bool cpu_same = code == cpu_r.codes[static_cast<std::size_t>(i)];
    gpu_equal += gpu_same ? 1 : 0;
    cpu_equal += cpu_same ? 1 : 0;
    gpu_wrong += !gpu_same && !tie ? 1 : 0;
    cpu_wrong += !cpu_same && !tie ? 1 : 0;
  }
  float min_gap = INFINITY;
  for (std::int64_t q = 0; q < r.num_quantizers; ++q) min_gap = std::min(min_gap, cpu_r.min_gap(q));
  std::printf("codec_encode_bench codes equal to transformers': cuda %lld, cpu %lld of %lld; %lld exact ties in "
              "transformers (min Zoo gap %.5f)\n",
              static_cast<long long>(gpu_equal), static_cast<long long>(cpu_equal), static_cast<long long>(want.numel()),
              static_cast<long long>(ties), min_gap);
  CHECK(gpu_wrong == 0);
  CHECK(cpu_wrong == 0);
}

}  // namespace
}  // namespace zoo::ptest
#endif  // ZOO_WITH_CUDA
