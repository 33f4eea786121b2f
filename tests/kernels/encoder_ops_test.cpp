// The encoder-stack ops (kernels/encoder_cpu.hpp) against direct double-precision loops written
// from torch's definitions: LayerNorm, GroupNorm with one group per channel, exact GELU, ELU,
// full multi-head attention, grouped Conv1d, and the windowed-sinc resampler against its formula
// (PyTorch's sound library's functional.resample: hann window, width 6, rolloff 0.99).
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernel_test_util.hpp"
#include "zoo/kernels/encoder_cpu.hpp"

namespace zoo::kernels {
namespace {
using test::Mismatches;
using test::normal_vector;

void check_all(const std::vector<float>& got, const std::vector<double>& want, double atol, double rtol) {
  REQUIRE(got.size() == want.size());
  Mismatches m;
  for (std::size_t i = 0; i < got.size(); ++i)
    m.check(static_cast<std::int64_t>(i), got[i], want[i], atol + rtol * std::abs(want[i]));
  INFO(m);
  CHECK(m.count == 0);
}

TEST_CASE("layer_norm and per_channel_norm match torch's LayerNorm and GroupNorm(C, C)", "[kernels][encoder_ops]") {
  std::mt19937 rng(5);
  const std::int64_t rows = 37, dim = 96;
  auto x = normal_vector(rng, rows * dim, 3.0f);
  for (auto& v : x) v += 2.0f;  // a mean to remove
  const auto w = normal_vector(rng, dim), b = normal_vector(rng, dim);
  std::vector<double> want(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t i = 0; i < dim; ++i) mean += x[r * dim + i];
    mean /= dim;
    for (std::int64_t i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
    var /= dim;
    for (std::int64_t i = 0; i < dim; ++i) want[r * dim + i] = (x[r * dim + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
  }
  std::vector<float> y(x.size());
  cpu::layer_norm(x.data(), w.data(), b.data(), y.data(), rows, dim, 1e-5f);
  check_all(y, want, 1e-5, 1e-5);
  cpu::layer_norm(x.data(), w.data(), b.data(), x.data(), rows, dim, 1e-5f);  // in place
  CHECK(x == y);

  // Per channel over the steps: x [length, channels].
  const std::int64_t length = 1001, channels = 7;
  auto z = normal_vector(rng, length * channels, 2.0f);
  const auto wc = normal_vector(rng, channels), bc = normal_vector(rng, channels);
  std::vector<double> want_c(z.size());
  for (std::int64_t c = 0; c < channels; ++c) {
    double mean = 0, var = 0;
    for (std::int64_t t = 0; t < length; ++t) mean += z[t * channels + c];
    mean /= length;
    for (std::int64_t t = 0; t < length; ++t) var += (z[t * channels + c] - mean) * (z[t * channels + c] - mean);
    var /= length;
    for (std::int64_t t = 0; t < length; ++t)
      want_c[t * channels + c] = (z[t * channels + c] - mean) / std::sqrt(var + 1e-5) * wc[c] + bc[c];
  }
  std::vector<float> yc(z.size());
  cpu::per_channel_norm(z.data(), wc.data(), bc.data(), yc.data(), length, channels, 1e-5f);
  check_all(yc, want_c, 1e-5, 1e-5);
}

TEST_CASE("gelu_erf and elu match torch's definitions", "[kernels][encoder_ops]") {
  std::vector<float> x;
  for (int i = -800; i <= 800; ++i) x.push_back(static_cast<float>(i) / 100.0f);
  std::vector<double> gelu(x.size()), elu(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    gelu[i] = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    elu[i] = x[i] > 0 ? x[i] : std::expm1(static_cast<double>(x[i]));
  }
  std::vector<float> y(x.size());
  cpu::gelu_erf(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  check_all(y, gelu, 1e-7, 1e-6);
  cpu::elu(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  check_all(y, elu, 1e-7, 1e-6);
}

TEST_CASE("attention_bidirectional: every query over every key, per head", "[kernels][encoder_ops]") {
  std::mt19937 rng(9);
  for (const auto& [T, heads, D] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 1, 8}, {13, 2, 8}, {70, 3, 64}}) {
    const auto q = normal_vector(rng, T * heads * D), k = normal_vector(rng, T * heads * D), v = normal_vector(rng, T * heads * D);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    std::vector<double> want(q.size());
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<std::size_t>(T));
        double mx = -INFINITY, sum = 0;
        for (std::int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[(t * heads + h) * D + d]) * k[(j * heads + h) * D + d];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (std::int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (std::int64_t j = 0; j < T; ++j) acc += s[j] / sum * v[(j * heads + h) * D + d];
          want[(t * heads + h) * D + d] = acc;
        }
      }
    std::vector<float> out(q.size());
    cpu::attention_bidirectional(q.data(), k.data(), v.data(), out.data(), T, heads, D, scale);
    INFO("T " << T << " heads " << heads << " D " << D);
    check_all(out, want, 1e-5, 1e-5);
  }
}

TEST_CASE("GroupedConv1d matches torch's Conv1d with groups", "[kernels][encoder_ops]") {
  std::mt19937 rng(3);
  const std::int64_t in = 12, out = 8, groups = 4, kernel = 6, pad = 3, length = 29;
  const auto w = normal_vector(rng, out * (in / groups) * kernel), x = normal_vector(rng, length * in);
  const auto b = normal_vector(rng, out);
  const cpu::GroupedConv1d conv(w.data(), in, out, kernel, groups, pad, b);
  const std::int64_t n = conv.out_length(length);
  CHECK(n == length + 2 * pad - kernel + 1);
  std::vector<double> want(static_cast<std::size_t>(n * out));
  const std::int64_t gi = in / groups, go = out / groups;
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t o = 0; o < out; ++o) {
      const std::int64_t g = o / go;
      double acc = b[o];
      for (std::int64_t i = 0; i < gi; ++i)
        for (std::int64_t k = 0; k < kernel; ++k) {
          const std::int64_t src = t - pad + k;
          if (src >= 0 && src < length) acc += static_cast<double>(w[(o * gi + i) * kernel + k]) * x[src * in + g * gi + i];
        }
      want[t * out + o] = acc;
    }
  std::vector<float> y(want.size());
  conv.run(x.data(), y.data(), length);
  check_all(y, want, 1e-5, 1e-5);
  CHECK_THROWS_AS(cpu::GroupedConv1d(w.data(), 10, 8, kernel, 4, pad, b), std::invalid_argument);
}

TEST_CASE("SincResampler follows the windowed-sinc formula at 24 -> 16 kHz and 16 -> 24 kHz", "[kernels][encoder_ops]") {
  std::mt19937 rng(1);
  for (const auto& [from, to] : {std::pair<std::int64_t, std::int64_t>{24000, 16000}, {16000, 24000}, {44100, 16000}}) {
    const cpu::SincResampler r(from, to);
    const std::int64_t g = std::gcd(from, to), orig = from / g, nw = to / g;
    const double base = std::min(orig, nw) * 0.99;
    const std::int64_t width = static_cast<std::int64_t>(std::ceil(6.0 * orig / base));
    CHECK(r.width() == width);
    const std::int64_t n = 3 * orig * 7 + 1;
    const auto x = normal_vector(rng, n);
    std::vector<double> want(static_cast<std::size_t>(r.output_length(n)));
    CHECK(static_cast<std::int64_t>(want.size()) == (nw * n + orig - 1) / orig);
    for (std::size_t j = 0; j < want.size(); ++j) {
      const std::int64_t frame = static_cast<std::int64_t>(j) / nw, phase = static_cast<std::int64_t>(j) % nw;
      double acc = 0;
      for (std::int64_t i = 0; i < 2 * width + orig; ++i) {
        const std::int64_t src = frame * orig - width + i;
        if (src < 0 || src >= n) continue;
        double t = (-static_cast<double>(phase) / nw + static_cast<double>(i - width) / orig) * base;
        t = std::clamp(t, -6.0, 6.0);
        const double window = std::pow(std::cos(t * M_PI / 6.0 / 2.0), 2);
        const double sinc = t == 0 ? 1.0 : std::sin(t * M_PI) / (t * M_PI);
        acc += x[src] * sinc * window * base / orig;
      }
      want[j] = acc;
    }
    INFO(from << " -> " << to);
    // The filters are built in float32 as the reference library builds them: with 441 -> 160 the
    // tap positions (-p / new + i / orig, times 158.4) carry ~1e-5 of float32 error, which the
    // double formula here does not; with 3 -> 2 they are nearly exact.
    check_all(r.run(x.data(), n), want, orig > 10 ? 5e-5 : 2e-6, 1e-5);
  }
}

}  // namespace
}  // namespace zoo::kernels
