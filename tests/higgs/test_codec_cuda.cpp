// The Higgs codec decoder on CUDA (plugins/higgs_audio/src/cuda/codec_cuda.cpp) against
// transformers' HiggsAudioV2TokenizerModel.decode goldens (tools/fixtures/make_codec_fixtures.py):
// every tap and the waveform within relative L2 1e-4 (float32 activations, TF32 off), and against
// the CPU float32 path. The tiny fixture's LM body is CPU-only (head_dim 16), so the decoder is made
// directly, as HiggsModel::code_decoder makes it for a CUDA model; the real-shape case goes through
// a CUDA model. Skipped without a GPU; a build without CUDA only checks that it says so.
#ifdef ZOO_WITH_CUDA
#include "qwen3/fixture_test_util.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "codec.hpp"
#include "higgs/codec_test_util.hpp"
#include "cuda/cuda_test_util.hpp"
#include "higgs_config.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/codec.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/trace.hpp"
#include "zoo/weight_source.hpp"

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;

std::unique_ptr<CodeDecoder> loaded(const fs::path& dir, const Device& device) {
  auto weights = open_checkpoint(dir);
  const auto config = load_json_object(dir / "config.json");
  const auto& audio = config.at("audio_encoder_config");
  auto decoder = higgs::make_code_decoder(weights, higgs::kCodecPrefix, audio.at("num_codebooks").get<std::int64_t>(),
                                          audio.at("vocab_size").get<std::int64_t>(), device);
  const LoadPlan plan = make_load_plan(decoder->requirements(), *weights);
  INFO(plan.table());
  REQUIRE(plan.ok());
  decoder->load();
  return decoder;
}

// Every golden tap of case `c` within `tol`; returns the waveform's relative L2.
double check_cuda_case(CodeDecoder& decoder, const TraceFile& golden, const std::string& c, double tol) {
  const HostTensor codes = golden.get(c + "codes");
  TraceRecorder taps{PointSelection({"*"})};
  const Waveform wave = decoder.decode(codes.view(), &taps);
  REQUIRE(static_cast<std::int64_t>(wave.samples.size()) == decoder.samples_per_frame() * codes.shape()[0]);
  double wave_error = -1.0;
  std::size_t compared = 0;
  for (const auto& name : golden.names()) {
    if (!name.starts_with(c) || name == c + "codes") continue;
    const std::string tap = name.substr(c.size());
    INFO("tap " << name);
    const HostTensor* got = taps.find(tap);
    REQUIRE(got != nullptr);
    const double err = rel_l2(to_f32(golden.get(name).view()), to_f32(got->view()));
    CHECK(err <= tol);
    ++compared;
    if (tap == "waveform") {
      wave_error = err;
      CHECK(rel_l2(to_f32(golden.get(name).view()), wave.samples) == err);  // the tap is the returned waveform
    }
  }
  CHECK(compared >= 6);
  REQUIRE(wave_error >= 0.0);
  return wave_error;
}

TEST_CASE("codec decode on CUDA matches transformers, every tap, and the CPU path", "[higgs][codec][codec_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const fs::path dir = fixture_dir("higgs-tiny-codec");
  auto gpu = loaded(dir, Device::parse("cuda"));
  auto cpu = loaded(dir, Device{});
  CHECK_THAT(gpu->summary(), Contains("strides 5x2x3") && Contains("float32 on cuda"));
  const TraceFile golden(dir / "golden.safetensors");
  // t7 then t1 then t7 again: the buffers sized for 7 frames serve the shorter decode.
  for (const std::string c : {"t7.", "t1.", "t7."}) {
    INFO("case " << c);
    const double err = check_cuda_case(*gpu, golden, c, 1e-4);
    WARN(c << "waveform relative L2 on CUDA " << err);
    const HostTensor codes = golden.get(c + "codes");
    const double vs_cpu = rel_l2(cpu->decode(codes.view()).samples, gpu->decode(codes.view()).samples);
    WARN(c << "CUDA vs CPU relative L2 " << vs_cpu);
    CHECK(vs_cpu <= 3e-5);  // measured 5.9e-6 (T=7) on an H200
  }
}

TEST_CASE("codec on CUDA maps BOC and EOC to 0, rejects negative codes, grows its buffers",
          "[higgs][codec][codec_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const fs::path dir = fixture_dir("higgs-tiny-codec");
  auto gpu = loaded(dir, Device::parse("cuda"));
  std::vector<std::int64_t> zeros(3 * 4, 0), specials = zeros;
  specials[1] = 16;  // BOC
  specials[6] = 17;  // EOC
  const auto a = gpu->decode(HostTensor::from_i64({3, 4}, zeros).view()).samples;
  CHECK(a == gpu->decode(HostTensor::from_i64({3, 4}, specials).view()).samples);
  specials[4] = -1;
  CHECK_THAT(input_error_of([&] { gpu->decode(HostTensor::from_i64({3, 4}, specials).view()); }),
             Contains("codes[1][0] = -1 is negative"));
  // Past EOC is no code at all: an error, never silently code 0.
  specials[4] = 0;
  specials[11] = 18;
  CHECK(input_error_of([&] { gpu->decode(HostTensor::from_i64({3, 4}, specials).view()); }) ==
        "codes[2][3] = 18 is outside [0, 16) and not BOC (16) or EOC (17)");
  // A longer decode after a short one (buffers re-sized), then the short one again: same samples.
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::int64_t> pick(0, 15);
  std::vector<std::int64_t> many(40 * 4);
  for (auto& v : many) v = pick(rng);
  auto fresh = loaded(dir, Device::parse("cuda"));
  const auto want = fresh->decode(HostTensor::from_i64({40, 4}, many).view()).samples;
  CHECK(gpu->decode(HostTensor::from_i64({40, 4}, many).view()).samples == want);
  CHECK(gpu->decode(HostTensor::from_i64({3, 4}, zeros).view()).samples == a);
}

// Sequences longer than kDecodePieceFrames decode in pieces with context (codec.hpp); on CUDA the
// pieces must equal the whole decode (a hook forces it) up to the GEMM algorithms cuBLASLt picks
// per length, and the CPU path.
TEST_CASE("codec on CUDA: a decode longer than a piece equals the whole decode and the CPU path",
          "[higgs][codec][codec_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const fs::path dir = fixture_dir("higgs-tiny-codec");
  auto gpu = loaded(dir, Device::parse("cuda"));
  auto cpu = loaded(dir, Device{});
  const std::int64_t K = gpu->num_codebooks(), frames = higgs::kDecodePieceFrames * 2 + 37;
  std::mt19937 rng(9);
  std::uniform_int_distribution<std::int64_t> pick(0, 17);
  std::vector<std::int64_t> values(static_cast<std::size_t>(frames * K));
  for (auto& v : values) v = pick(rng);
  const HostTensor codes = HostTensor::from_i64({frames, K}, values);
  const auto pieces = gpu->decode(codes.view()).samples;
  TraceRecorder taps{PointSelection({"waveform"})};
  const auto whole = gpu->decode(codes.view(), &taps).samples;
  REQUIRE(pieces.size() == static_cast<std::size_t>(frames * gpu->samples_per_frame()));
  CHECK(rel_l2(whole, pieces) <= 1e-5);  // a misplaced piece would be O(1)
  CHECK(rel_l2(cpu->decode(codes.view()).samples, pieces) <= 3e-5);
}

// A server decodes its streams' chunks from several threads at once (each call takes a lane of its
// own): every concurrent decode gives the samples the same decode gives alone, bit for bit (the
// same kernels on the same lengths), so lanes share no buffer.
TEST_CASE("codec on CUDA: decodes from several threads at once equal each decode alone",
          "[higgs][codec][codec_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const fs::path dir = fixture_dir("higgs-tiny-codec");
  auto gpu = loaded(dir, Device::parse("cuda"));
  const std::int64_t K = gpu->num_codebooks();
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int64_t> pick(0, 17);
  constexpr int kThreads = 6;  // more than the lanes: some wait for one
  std::vector<HostTensor> inputs;
  std::vector<std::vector<float>> alone;
  for (int t = 0; t < kThreads; ++t) {
    std::vector<std::int64_t> values(static_cast<std::size_t>((9 + 7 * t) * K));
    for (auto& v : values) v = pick(rng);
    inputs.push_back(HostTensor::from_i64({9 + 7 * t, K}, values));
    alone.push_back(gpu->decode(inputs.back().view()).samples);
  }
  std::vector<std::vector<std::vector<float>>> together(kThreads);
  std::vector<std::string> errors(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        try {
          for (int r = 0; r < 5; ++r) together[t].push_back(gpu->decode(inputs[t].view()).samples);
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
  }
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    CHECK(errors[t].empty());
    REQUIRE(together[t].size() == 5);
    for (const auto& samples : together[t]) CHECK(samples == alone[t]);
  }
}

// The real codec shapes, from `python3 tools/fixtures/make_codec_fixtures.py --real --out DIR` (run on
// the GPU host; ~0.5 GB, not committed). Opened as a model on CUDA (the fixture's body has head_dim
// 64), so this is the decoder `zoo tts --device cuda` gets.
//   ZOO_CODEC_REAL_FIXTURE=DIR/higgs-codec-real build/bin/test_higgs "[real][codec_cuda]"
TEST_CASE("codec on CUDA at the real shapes matches transformers (needs ZOO_CODEC_REAL_FIXTURE)",
          "[.][real][codec_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const char* dir = std::getenv("ZOO_CODEC_REAL_FIXTURE");
  if (!dir) ZOO_SKIP("ZOO_CODEC_REAL_FIXTURE is not set");
  ModelArgs args;
  args.config = load_json_object(fs::path(dir) / "config.json");
  args.weights = open_checkpoint(dir);
  args.device = Device::parse("cuda");
  args.dtype = DType::BF16;
  auto model = registry().create_model("higgs_audio", args);
  CodeDecoder* decoder = model->need_extension<Codec>().code_decoder();
  REQUIRE(decoder != nullptr);
  CHECK_THAT(decoder->summary(), Contains("float32 on cuda"));
  const LoadPlan plan = make_load_plan(decoder->requirements(), model->weight_source());
  REQUIRE(plan.ok());
  decoder->load();
  REQUIRE(decoder->samples_per_frame() == 960);
  const TraceFile golden(fs::path(dir) / "golden.safetensors");
  // The CPU path measured 5.9e-5 (T=1) and 1.3e-4 (T=50) here: float32 noise that this random
  // network amplifies (transformers' own float32 vs float64 decode differ by 5.3e-5 / 1.1e-4).
  for (const std::string c : {"t1.", "t2.", "t3.", "t17.", "t50."}) {
    INFO("case " << c);
    WARN(c << "waveform relative L2 on CUDA " << check_cuda_case(*decoder, golden, c, 3e-4));
  }
}

// Speed at the real shapes: 250 frames (10 s at 24 kHz), steady state after two warm-up decodes.
// Prints numbers; asserts nothing about time.
//   ZOO_CODEC_REAL_FIXTURE=DIR/higgs-codec-real build/bin/test_higgs "[codec_bench]"
TEST_CASE("codec decode speed on CUDA at the real shapes (needs ZOO_CODEC_REAL_FIXTURE)", "[.][codec_bench]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const char* dir = std::getenv("ZOO_CODEC_REAL_FIXTURE");
  if (!dir) ZOO_SKIP("ZOO_CODEC_REAL_FIXTURE is not set");
  auto gpu = loaded(dir, Device::parse("cuda"));
  const std::int64_t frames = 250, K = gpu->num_codebooks();
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int64_t> pick(0, gpu->codebook_size() - 1);
  std::vector<std::int64_t> values(frames * K);
  for (auto& v : values) v = pick(rng);
  const HostTensor codes = HostTensor::from_i64({frames, K}, values);
  std::vector<float> wave;
  for (int i = 0; i < 2; ++i) wave = gpu->decode(codes.view()).samples;
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    const auto start = std::chrono::steady_clock::now();
    wave = gpu->decode(codes.view()).samples;
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const double audio_ms = 1000.0 * static_cast<double>(wave.size()) / gpu->sample_rate();
  std::printf("codec_bench cuda: %lld frames -> %zu samples (%.1f ms of audio): median %.3f ms, min %.3f ms, "
              "max %.3f ms over %zu decodes = %.0fx real time (median)\n",
              static_cast<long long>(frames), wave.size(), audio_ms, ms[ms.size() / 2], ms.front(), ms.back(),
              ms.size(), audio_ms / ms[ms.size() / 2]);
  auto cpu = loaded(dir, Device{});
  const auto start = std::chrono::steady_clock::now();
  const auto cpu_wave = cpu->decode(codes.view()).samples;
  const double cpu_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("codec_bench cpu: %.1f ms = %.1fx real time; CUDA vs CPU waveform relative L2 %.3g\n", cpu_ms,
              audio_ms / cpu_ms, rel_l2(cpu_wave, wave));
  CHECK(wave.size() == static_cast<std::size_t>(frames * 960));
}

// The first decodes after load in a fresh process, at growing and repeated lengths: what a user's
// first `zoo tts` decode pays (one-time setup is paid at load, codec_cuda.cpp). Prints numbers;
// asserts nothing about time.
//   ZOO_CODEC_REAL_FIXTURE=DIR build/bin/test_higgs "[codec_cold]"
TEST_CASE("codec first-decode cost on CUDA (needs ZOO_CODEC_REAL_FIXTURE)", "[.][codec_cold]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const char* dir = std::getenv("ZOO_CODEC_REAL_FIXTURE");
  if (!dir) ZOO_SKIP("ZOO_CODEC_REAL_FIXTURE is not set");
  auto gpu = loaded(dir, Device::parse("cuda"));
  const std::int64_t K = gpu->num_codebooks();
  std::string line = "codec_cold cuda, frames: ms";
  for (const std::int64_t frames : {8, 250, 250, 50, 1000, 1000}) {
    const HostTensor codes = HostTensor::from_i64({frames, K}, std::vector<std::int64_t>(frames * K, 1));
    const auto start = std::chrono::steady_clock::now();
    const auto wave = gpu->decode(codes.view()).samples;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    line += fmt::format(" | {}: {:.2f}", frames, ms);
    CHECK(wave.size() == static_cast<std::size_t>(frames * 960));
  }
  std::printf("%s\n", line.c_str());
}

}  // namespace
}  // namespace zoo::ptest
#else  // a build without CUDA says so when a CUDA decoder is asked for
#include "qwen3/fixture_test_util.hpp"

#include "codec.hpp"
#include "higgs_config.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/weight_source.hpp"

namespace zoo::ptest {
namespace {

TEST_CASE("a CPU-only build refuses a CUDA codec decoder with a clear message", "[higgs][codec]") {
  auto weights = open_checkpoint(fixture_dir("higgs-tiny-codec"));
  const std::string error =
      input_error_of([&] { higgs::make_code_decoder(weights, higgs::kCodecPrefix, 4, 18, Device::parse("cuda")); });
  CHECK_THAT(error, Catch::Matchers::Contains("device cuda:0 requested, but this build has no CUDA backend"));
}

}  // namespace
}  // namespace zoo::ptest
#endif  // ZOO_WITH_CUDA
