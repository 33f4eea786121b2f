// conv1d, conv_transpose1d and snake against direct double-precision loops written from torch's
// definitions (channels-last layout, torch weight layouts), including shapes large enough to span
// several im2col / column tiles.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_util.hpp"
#include "zoo/kernels/conv_cpu.hpp"

namespace zoo::kernels {
namespace {
using test::Mismatches;
using test::normal_vector;

// torch Conv1d: y[t, o] = b[o] + sum_{i,k} w[o, i, k] x[t*s - p + k*d, i] (zero outside).
std::vector<double> conv1d_reference(const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>& b, const cpu::Conv1dShape& s) {
  const auto n = s.out_length();
  std::vector<double> y(static_cast<std::size_t>(n * s.out_channels));
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t o = 0; o < s.out_channels; ++o) {
      double acc = b.empty() ? 0.0 : b[o];
      for (std::int64_t i = 0; i < s.in_channels; ++i)
        for (std::int64_t k = 0; k < s.kernel; ++k) {
          const std::int64_t src = t * s.stride - s.padding + k * s.dilation;
          if (src < 0 || src >= s.length) continue;
          acc += static_cast<double>(w[(o * s.in_channels + i) * s.kernel + k]) * x[src * s.in_channels + i];
        }
      y[t * s.out_channels + o] = acc;
    }
  return y;
}

// torch ConvTranspose1d: y[j*s - p + k, o] += w[i, o, k] x[j, i], plus b[o].
std::vector<double> conv_transpose1d_reference(const std::vector<float>& x, const std::vector<float>& w,
                                               const std::vector<float>& b, const cpu::ConvTranspose1dShape& s) {
  const auto n = s.out_length();
  std::vector<double> y(static_cast<std::size_t>(n * s.out_channels));
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t o = 0; o < s.out_channels; ++o) y[t * s.out_channels + o] = b.empty() ? 0.0 : b[o];
  for (std::int64_t j = 0; j < s.length; ++j)
    for (std::int64_t k = 0; k < s.kernel; ++k) {
      const std::int64_t t = j * s.stride - s.padding + k;
      if (t < 0 || t >= n) continue;
      for (std::int64_t o = 0; o < s.out_channels; ++o) {
        double acc = 0.0;
        for (std::int64_t i = 0; i < s.in_channels; ++i)
          acc += static_cast<double>(w[(i * s.out_channels + o) * s.kernel + k]) * x[j * s.in_channels + i];
        y[t * s.out_channels + o] += acc;
      }
    }
  return y;
}

template <class Y>
void check_close(const std::vector<float>& got, const std::vector<double>& want, double fan_in) {
  REQUIRE(got.size() == want.size());
  Mismatches m;
  // float32 dot products of fan_in unit-variance terms: error grows like sqrt(fan_in) * eps.
  const double tol = 1e-5 * std::sqrt(fan_in) + 1e-6;
  for (std::size_t i = 0; i < got.size(); ++i) m.check(static_cast<std::int64_t>(i), got[i], want[i], tol * (1 + std::abs(want[i])));
  INFO(m);
  CHECK(m.count == 0);
}

void run_conv1d(const cpu::Conv1dShape& s, bool with_bias, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto x = normal_vector(rng, s.length * s.in_channels);
  const auto w = normal_vector(rng, s.out_channels * s.in_channels * s.kernel,
                               1.0f / std::sqrt(static_cast<float>(s.in_channels * s.kernel)));
  const auto b = with_bias ? normal_vector(rng, s.out_channels) : std::vector<float>{};
  std::vector<float> packed(w.size()), y(static_cast<std::size_t>(s.out_length() * s.out_channels), NAN);
  cpu::pack_conv1d_weight(w.data(), packed.data(), s);
  cpu::conv1d(x.data(), packed.data(), with_bias ? b.data() : nullptr, y.data(), s);
  check_close<float>(y, conv1d_reference(x, w, b, s), static_cast<double>(s.in_channels * s.kernel));
}

void run_conv_transpose1d(const cpu::ConvTranspose1dShape& s, bool with_bias, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto x = normal_vector(rng, s.length * s.in_channels);
  const auto w = normal_vector(rng, s.in_channels * s.out_channels * s.kernel,
                               1.0f / std::sqrt(static_cast<float>(s.in_channels)));
  const auto b = with_bias ? normal_vector(rng, s.out_channels) : std::vector<float>{};
  std::vector<float> packed(w.size()), y(static_cast<std::size_t>(s.out_length() * s.out_channels), NAN);
  cpu::pack_conv_transpose1d_weight(w.data(), packed.data(), s);
  cpu::conv_transpose1d(x.data(), packed.data(), with_bias ? b.data() : nullptr, y.data(), s);
  check_close<float>(y, conv_transpose1d_reference(x, w, b, s), static_cast<double>(s.in_channels * s.kernel));
}

TEST_CASE("conv1d matches the direct sum: padding, dilation, stride, pointwise", "[kernels][conv]") {
  // {length, in, out, kernel, stride, padding, dilation}
  run_conv1d({9, 3, 5, 7, 1, 3, 1}, true, 1);     // same-length, k7
  run_conv1d({30, 8, 6, 7, 1, 9, 3}, true, 2);    // dilation 3
  run_conv1d({40, 4, 4, 7, 1, 27, 9}, false, 3);  // dilation 9: most taps fall in the padding
  run_conv1d({17, 5, 7, 1, 1, 0, 1}, true, 4);    // pointwise: the plain-linear path
  run_conv1d({23, 3, 4, 4, 2, 1, 1}, true, 5);    // stride 2
  run_conv1d({2, 2, 3, 7, 1, 3, 1}, true, 6);     // shorter than the kernel
  CHECK(cpu::Conv1dShape{9, 3, 5, 7, 1, 3, 1}.out_length() == 9);
  CHECK(cpu::Conv1dShape{23, 3, 4, 4, 2, 1, 1}.out_length() == 11);
}

TEST_CASE("conv1d over several im2col tiles", "[kernels][conv]") {
  run_conv1d({20000, 64, 8, 7, 1, 3, 1}, true, 7);  // 448 floats per row: 3 tiles
}

TEST_CASE("conv_transpose1d matches the scatter sum: odd and even strides, output_padding", "[kernels][conv]") {
  // {length, in, out, kernel, stride, padding, output_padding}: the codec's k = 2s, p = ceil(s/2), op = s%2
  for (std::int64_t stride : {2, 3, 4, 5, 8}) {
    const cpu::ConvTranspose1dShape s{7, 6, 5, 2 * stride, stride, (stride + 1) / 2, stride % 2};
    INFO("stride " << stride);
    run_conv_transpose1d(s, true, static_cast<std::uint32_t>(10 + stride));
    CHECK(s.out_length() == 7 * stride);  // exactly stride x length: what the codec relies on
  }
  run_conv_transpose1d({5, 3, 4, 3, 2, 0, 0}, false, 20);  // kernel not a multiple of the stride
  run_conv_transpose1d({6, 3, 4, 2, 1, 0, 0}, true, 22);   // stride 1
  run_conv_transpose1d({1, 4, 2, 6, 3, 2, 1}, true, 21);   // a single input step
  CHECK_THROWS_AS(cpu::conv_transpose1d(nullptr, nullptr, nullptr, nullptr, {5, 1, 1, 4, 2, 1, 2}),
                  std::invalid_argument);
}

TEST_CASE("conv_transpose1d over several column tiles", "[kernels][conv]") {
  run_conv_transpose1d({2500, 8, 256, 16, 8, 4, 0}, true, 30);  // 4096 floats per row: 3 tiles
}

TEST_CASE("snake: x + sin(alpha x)^2 / (alpha + 1e-9), per channel, in place", "[kernels][conv]") {
  std::mt19937 rng(40);
  const std::int64_t length = 37, channels = 5;
  auto x = normal_vector(rng, length * channels, 2.0f);
  const std::vector<float> alpha = {0.3f, 1.0f, 1.7f, 0.05f, 2.0f};
  std::vector<float> y(x.size());
  cpu::snake(x.data(), alpha.data(), y.data(), length, channels);
  Mismatches m;
  for (std::int64_t t = 0; t < length; ++t)
    for (std::int64_t c = 0; c < channels; ++c) {
      const double a = alpha[c], v = x[t * channels + c];
      const double want = v + std::pow(std::sin(a * v), 2) / (a + 1e-9);
      m.check(t * channels + c, y[t * channels + c], want, 2e-6 * (1 + std::abs(want)));
    }
  INFO(m);
  CHECK(m.count == 0);
  cpu::snake(x.data(), alpha.data(), x.data(), length, channels);  // aliasing allowed
  CHECK(x == y);
}

TEST_CASE("snake: the vector sine over wide channels, every quadrant, large and non-finite arguments",
          "[kernels][conv]") {
  // 67 channels: eight vectors of eight lanes and a scalar tail. alpha * x spans |.| up to ~1e3 (the
  // vector path, every quadrant), and some lanes reach 1e5, inf or NaN (libm's path in that vector).
  std::mt19937 rng(41);
  const std::int64_t length = 301, channels = 67;
  auto x = normal_vector(rng, length * channels, 1.0f);
  std::vector<float> alpha(static_cast<std::size_t>(channels));
  for (std::int64_t c = 0; c < channels; ++c) alpha[c] = c % 4 == 0 ? 0.05f : 0.1f + 0.7f * static_cast<float>(c % 23);
  for (std::int64_t t = 0; t < length; ++t) x[t * channels + (t % channels)] *= 200.0f;
  x[5 * channels + 9] = 1e5f;
  x[6 * channels + 17] = -3e6f;
  x[7 * channels + 1] = INFINITY;
  x[8 * channels + 2] = NAN;
  std::vector<float> y(x.size());
  cpu::snake(x.data(), alpha.data(), y.data(), length, channels);
  Mismatches m;
  std::int64_t non_finite = 0;
  for (std::int64_t t = 0; t < length; ++t)
    for (std::int64_t c = 0; c < channels; ++c) {
      const std::int64_t i = t * channels + c;
      const float a = alpha[c], v = x[i];
      if (!std::isfinite(v)) {
        non_finite += std::isnan(y[i]) ? 1 : 0;  // torch: inf + sin(inf)^2 = NaN, as is NaN in
        continue;
      }
      // The sine of the float product, as torch computes it, in double.
      const double sine = std::sin(static_cast<double>(a * v));
      const double want = v + sine * sine * static_cast<double>(1.0f / (a + 1e-9f));
      m.check(i, y[i], want, 2e-6 * (1 + std::abs(want)));
    }
  INFO(m);
  CHECK(m.count == 0);
  CHECK(non_finite == 2);
}

}  // namespace
}  // namespace zoo::kernels
