#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include "kernel_test_util.hpp"
#include "zoo/kernels/cpu_ops.hpp"

namespace {
using zoo::kernels::test::Mismatches;
using zoo::kernels::test::normal_vector;
using zoo::kernels::test::random_vector;
}  // namespace

TEST_CASE("rms_norm matches a double loop", "[kernels][rms_norm]") {
  std::uint32_t seed = 100;
  for (std::int64_t rows : {1, 5, 300}) {
    for (std::int64_t dim : {1, 3, 17, 128, 1024, 1027}) {
      for (float eps : {1e-6f, 1e-2f}) {
        std::mt19937 rng(++seed);
        // Offsets and scales per row so rows differ in magnitude.
        auto x = normal_vector(rng, rows * dim, 3.0f);
        const auto w = random_vector(rng, dim, -2.0f, 2.0f);
        std::vector<float> y(x.size());
        zoo::kernels::cpu::rms_norm(x.data(), w.data(), y.data(), rows, dim, eps);

        // Float32 result: the mean of squares carries a relative error of a few 1e-7 and then
        // two products round; 4e-6 relative to each output is ample for that and fails on any
        // wrong normalizer (eps ignored, sum instead of mean, wrong row).
        Mismatches bad;
        for (std::int64_t r = 0; r < rows; ++r) {
          double ss = 0.0;
          for (std::int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
          const double inv = 1.0 / std::sqrt(ss / dim + eps);
          for (std::int64_t i = 0; i < dim; ++i) {
            const double want = x[r * dim + i] * inv * w[i];
            bad.check(r * dim + i, y[r * dim + i], want, 4e-6 * std::abs(want) + 1e-30);
          }
        }
        std::ostringstream what;
        what << "rows=" << rows << " dim=" << dim << " eps=" << eps << ": " << bad;
        INFO(what.str());
        CHECK(bad.count == 0);

        // In place (y == x) gives the same values.
        zoo::kernels::cpu::rms_norm(x.data(), w.data(), x.data(), rows, dim, eps);
        CHECK(x == y);
      }
    }
  }
}

namespace {
struct RopeCase {
  std::int64_t tokens, heads, head_dim;
  float theta;
  std::vector<std::int64_t> positions;
};

void check_rope(const RopeCase& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto x0 = normal_vector(rng, c.tokens * c.heads * c.head_dim);
  auto x = x0;
  zoo::kernels::cpu::rope_half_split(x.data(), c.tokens, c.heads, c.head_dim, c.positions.data(), c.theta);

  const std::int64_t half = c.head_dim / 2;
  // Against the exact formula in double. The float32 angle pos * inv_freq (as transformers
  // computes it) is off from the exact one by up to ~2.5 ulp of the angle (pow, division and
  // product each round; the exponent 2i/D is exact for these power-of-two head_dims), so the
  // tolerance grows with the angle: (|x1| + |x2|) * (8 * angle + 8) * 2^-24.
  Mismatches exact_bad;
  // Against the same recipe with float32 inv_freq and angle and everything after in double: only
  // cos/sin/product rounding remains, 1e-6 * (|x1| + |x2|). At the large positions below, an
  // angle computed in double instead of float32 would be off by far more than this.
  Mismatches recipe_bad;
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    const auto pos = c.positions[t];
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::int64_t base = (t * c.heads + h) * c.head_dim;
      for (std::int64_t i = 0; i < half; ++i) {
        const double x1 = x0[base + i], x2 = x0[base + half + i];
        const double inv_freq = std::pow(static_cast<double>(c.theta), -2.0 * i / c.head_dim);
        const double angle = static_cast<double>(pos) * inv_freq;
        const double mag = std::abs(x1) + std::abs(x2);
        const double tol_exact = mag * (8.0 * angle + 8.0) * 0x1p-24;
        exact_bad.check(base + i, x[base + i], x1 * std::cos(angle) - x2 * std::sin(angle), tol_exact);
        exact_bad.check(base + half + i, x[base + half + i], x2 * std::cos(angle) + x1 * std::sin(angle), tol_exact);

        const float inv_freq_f =
            1.0f / std::pow(c.theta, static_cast<float>(2 * i) / static_cast<float>(c.head_dim));
        const double angle_f = static_cast<float>(pos) * inv_freq_f;  // float32 product
        const double tol_recipe = 1e-6 * mag + 1e-30;
        recipe_bad.check(base + i, x[base + i], x1 * std::cos(angle_f) - x2 * std::sin(angle_f), tol_recipe);
        recipe_bad.check(base + half + i, x[base + half + i], x2 * std::cos(angle_f) + x1 * std::sin(angle_f),
                         tol_recipe);
      }
    }
  }
  std::ostringstream what;
  what << "tokens=" << c.tokens << " heads=" << c.heads << " head_dim=" << c.head_dim << " theta=" << c.theta
       << ": exact: " << exact_bad << "; float32 recipe: " << recipe_bad;
  INFO(what.str());
  CHECK(exact_bad.count == 0);
  CHECK(recipe_bad.count == 0);
}
}  // namespace

TEST_CASE("rope_half_split matches the rotary formula", "[kernels][rope]") {
  std::uint32_t seed = 200;
  for (std::int64_t head_dim : {2, 16, 64, 128}) {
    for (std::int64_t heads : {1, 3, 8}) {
      for (float theta : {10000.0f, 1000000.0f}) {
        RopeCase c{17, heads, head_dim, theta, {}};
        for (std::int64_t t = 0; t < c.tokens; ++t) c.positions.push_back(t);  // prefill 0..16
        check_rope(c, ++seed);
        RopeCase decode{1, heads, head_dim, theta, {4097}};  // decode at start > 0
        check_rope(decode, ++seed);
        // Scattered and large positions, where float32 angles differ visibly from exact ones.
        RopeCase far{5, heads, head_dim, theta, {0, 31, 40000, 123457, 262143}};
        check_rope(far, ++seed);
      }
    }
  }
}

TEST_CASE("rope_half_split uses the float32 angle at large positions", "[kernels][rope]") {
  // Guards the test above: at position 123457 the float32 and the exact angles of the fastest
  // frequency differ enough that the two references disagree beyond the recipe tolerance, so the
  // float32-recipe check really pins down how the angle is computed.
  const float theta = 1000000.0f;
  const std::int64_t pos = 123457;
  const float inv_freq_f = 1.0f / std::pow(theta, 2.0f / 128.0f);
  const double angle_f = static_cast<float>(pos) * inv_freq_f;
  const double angle = pos * std::pow(1000000.0, -2.0 / 128.0);
  CHECK(std::abs(std::cos(angle_f) - std::cos(angle)) > 1e-5);
}

TEST_CASE("rope_half_split at position 0 is the identity and rejects odd head_dim", "[kernels][rope]") {
  std::mt19937 rng(300);
  const auto x0 = normal_vector(rng, 2 * 4 * 64);
  auto x = x0;
  const std::vector<std::int64_t> positions = {0, 0};
  zoo::kernels::cpu::rope_half_split(x.data(), 2, 4, 64, positions.data(), 10000.0f);
  CHECK(x == x0);
  CHECK_THROWS_AS(zoo::kernels::cpu::rope_half_split(x.data(), 1, 1, 7, positions.data(), 10000.0f),
                  std::invalid_argument);
}

TEST_CASE("rope_half_split: partial rotary turns the first rotary_dim values and passes the rest", "[kernels][rope]") {
  const std::int64_t tokens = 3, heads = 2, head_dim = 12, rotary = 8;
  std::mt19937 rng(31);
  const auto x0 = normal_vector(rng, tokens * heads * head_dim);
  const std::vector<std::int64_t> positions{0, 5, 17};
  const std::vector<float> inv_freq = zoo::kernels::cpu::rope_default_inv_freq(rotary, 10000.0);
  auto x = x0;
  zoo::kernels::cpu::rope_half_split(x.data(), tokens, heads, head_dim, rotary, positions.data(), inv_freq.data(), 1.0f);
  // The rotated part equals rope over a head of rotary_dim values.
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t base = (t * heads + h) * head_dim;
      std::vector<float> part(x0.begin() + base, x0.begin() + base + rotary);
      zoo::kernels::cpu::rope_half_split(part.data(), 1, 1, rotary, &positions[t], inv_freq.data(), 1.0f);
      for (std::int64_t i = 0; i < rotary; ++i) CHECK(x[base + i] == part[i]);
      for (std::int64_t i = rotary; i < head_dim; ++i) CHECK(x[base + i] == x0[base + i]);
    }
  CHECK_THROWS_AS(zoo::kernels::cpu::rope_half_split(x.data(), 1, 1, head_dim, 14, positions.data(), inv_freq.data(), 1.0f),
                  std::invalid_argument);
  CHECK_THROWS_AS(zoo::kernels::cpu::rope_half_split(x.data(), 1, 1, head_dim, 7, positions.data(), inv_freq.data(), 1.0f),
                  std::invalid_argument);
}
