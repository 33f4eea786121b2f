// Picking one code per codebook on the device (kernels sample_segments, the rule
// SegmentSampleRule::threshold_top_k_index_cdf) against the host sampler of the TTS loop it serves
// (plugins/higgs_audio/src/tts_sampler.cpp, compiled into this binary): the same logits and the
// same stream give the same codes and leave the stream in the same state.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_skip.hpp"
#include "tts_sampler.hpp"
#include "zoo/kernels/cuda/common.hpp"
#include "zoo/kernels/cuda/ops.hpp"

using namespace zoo::kernels::cuda;
using zoo::higgs::TtsSampler;
using zoo::higgs::TtsSampling;

namespace {

constexpr std::int64_t kCodebooks = 8, kCodes = 1026;  // the audio head's shape
constexpr float kInf = std::numeric_limits<float>::infinity();

// The device side of one row: the request goes up as the CUDA decoder stages it, picks come back.
struct DeviceRows {
  std::int64_t K, V;
  Stream stream;
  DeviceBuffer logits, params, u, out;
  DeviceRows(std::int64_t k, std::int64_t v)
      : K(k), V(v), logits(k * v * 4), params(sizeof(SegmentSampleParams)), u(k * 8), out(k * sizeof(SampleOutput)) {}
  std::vector<zoo::SampledToken> run(const std::vector<float>& row, const zoo::HeadSampleRequest& r) {
    REQUIRE(static_cast<std::int64_t>(row.size()) == K * V);
    REQUIRE(r.segments == K);
    logits.upload(row.data(), row.size() * 4);
    const SegmentSampleParams p{r.temperature, r.top_k, r.top_p, 0};
    params.upload(&p, sizeof p);
    if (!r.u.empty()) u.upload(r.u.data(), r.u.size_bytes());
    sample_segments(logits.as<float>(), K, V, params.as<SegmentSampleParams>(), u.as<double>(),
                    out.as<SampleOutput>(), stream);
    stream.synchronize();
    std::vector<SampleOutput> o(static_cast<std::size_t>(K));
    out.download(o.data(), o.size() * sizeof(SampleOutput));
    std::vector<zoo::SampledToken> picks;
    for (const auto& x : o)
      picks.push_back({.id = x.id, .logit = x.logit, .bad_index = x.bad_index, .bad_value = x.bad_value,
                       .all_masked = x.unmasked == 0});
    return picks;
  }
};

// The host's codes, or its error message.
struct Outcome {
  std::vector<std::int64_t> codes;
  std::string error;
};
template <class F>
Outcome outcome(F&& f) {
  try {
    return {f(), {}};
  } catch (const std::invalid_argument& e) {
    return {{}, e.what()};
  }
}

// Logits of one row of K codebooks. ties: values on a coarse grid (many equal to the k-th);
// masked: that fraction of entries -inf.
std::vector<float> make_row(std::mt19937& rng, std::int64_t K, std::int64_t V, bool ties, double masked) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<float> row(static_cast<std::size_t>(K * V));
  for (auto& x : row) {
    x = normal(rng);
    if (ties) x = std::round(x * 2.0f) / 2.0f;
    if (unit(rng) < masked) x = -kInf;
  }
  return row;
}

// Runs `frames` rows through the host sampler and the device (its uniforms drawn from a second
// sampler of the same seed) and checks codes, errors and stream states agree.
void check_agree(const TtsSampling& s, int frames, bool ties, double masked, std::int64_t K = kCodebooks,
                 std::int64_t V = kCodes) {
  INFO(fmt::format("temperature {} top_k {} top_p {} seed {} ties {} masked {} K {} V {}", s.temperature, s.top_k,
                   s.top_p, s.seed, ties, masked, K, V));
  std::mt19937 rng(static_cast<std::uint32_t>(s.seed * 7919 + 13));
  TtsSampler host(s), device(s);
  DeviceRows rows(K, V);
  for (int f = 0; f < frames; ++f) {
    INFO("frame " << f);
    const std::vector<float> row = make_row(rng, K, V, ties, masked);
    const Outcome want = outcome([&] { return host.sample_rows(row, K); });
    REQUIRE(want.error.empty());
    const std::vector<double> u = device.uniforms(K);
    const Outcome got = outcome([&] { return device.accept(rows.run(row, device.head_request(K, u))); });
    CHECK(got.error == want.error);
    CHECK(got.codes == want.codes);
    CHECK(device.state() == host.state());
  }
}

}  // namespace

TEST_CASE("device codebook picks equal the TTS host sampler", "[cuda][tts_sampling]") {
  if (!cuda_available()) ZOO_SKIP("no CUDA device");
  for (std::uint64_t seed : {0ull, 1ull, 7ull, 42ull, 1234567ull}) {
    check_agree({0.0f, 50, 1.0f, seed}, 4, false, 0.0);   // greedy
    check_agree({1e-6f, 50, 1.0f, seed}, 4, true, 0.0);   // greedy by the sampler's threshold, ties
    check_agree({0.8f, 50, 1.0f, seed}, 24, false, 0.0);  // the first-party defaults
    check_agree({0.8f, 1, 1.0f, seed}, 8, false, 0.0);
    check_agree({0.8f, 5000, 1.0f, seed}, 8, false, 0.0);  // top_k > V: off
    check_agree({1.0f, 0, 1.0f, seed}, 8, false, 0.0);     // no top-k at all
    check_agree({0.8f, 0, 0.9f, seed}, 16, false, 0.0);
    check_agree({1.3f, 50, 0.9f, seed}, 16, false, 0.0);
    check_agree({0.7f, 20, 0.5f, seed}, 8, false, 0.0);
    check_agree({0.8f, 0, 0.0f, seed}, 4, false, 0.0);  // top_p 0: the top token only
    check_agree({0.8f, 50, 1.0f, seed}, 16, true, 0.0);  // ties at the k-th value
    check_agree({0.8f, 7, 0.9f, seed}, 16, true, 0.0);
    check_agree({0.8f, 50, 1.0f, seed}, 16, false, 0.3);  // -inf entries
    check_agree({0.9f, 50, 0.8f, seed}, 16, true, 0.95);  // few finite entries, fewer than top_k
    check_agree({0.0f, 50, 1.0f, seed}, 4, false, 0.5);
    check_agree({0.8f, 50, 0.95f, seed}, 8, false, 0.0, 3, 40);  // the tiny fixtures' shape
    check_agree({0.8f, 100, 1.0f, seed}, 4, true, 0.1, 2, 2048);  // the widest segment
  }
}

TEST_CASE("device codebook picks refuse broken rows as the TTS host sampler does", "[cuda][tts_sampling]") {
  if (!cuda_available()) ZOO_SKIP("no CUDA device");
  const std::int64_t K = 3, V = 64;
  DeviceRows rows(K, V);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* what;
    std::int64_t index;
    float value;
    bool all_masked;
  };
  for (const Case& c : {Case{"NaN", 17, nan, false}, Case{"+inf", 5, kInf, false}, Case{"only -inf", -1, 0, true},
                        Case{"+inf then NaN", 3, kInf, false}}) {
    for (const float temperature : {0.0f, 0.8f}) {
      INFO(c.what << ", temperature " << temperature);
      std::vector<float> row(static_cast<std::size_t>(K * V));
      for (std::size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>((i * 37) % 11) * 0.25f;
      float* seg = row.data() + V;  // codebook 1
      if (c.all_masked) std::fill(seg, seg + V, -kInf);
      else seg[c.index] = c.value;
      if (std::string(c.what) == "+inf then NaN") seg[40] = nan;  // the host names the NaN
      const TtsSampling s{temperature, 50, 1.0f, 3};
      TtsSampler host(s), device(s);
      const Outcome want = outcome([&] { return host.sample_rows(row, K); });
      const std::vector<double> u = device.uniforms(K);
      const Outcome got = outcome([&] { return device.accept(rows.run(row, device.head_request(K, u))); });
      CHECK(got.error == want.error);
      CHECK(got.codes == want.codes);  // a greedy pick takes +inf and all -inf rows, as argmax does
      if (temperature > 0) CHECK_FALSE(want.error.empty());
    }
  }
}
