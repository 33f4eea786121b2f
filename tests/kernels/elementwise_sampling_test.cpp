#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include "kernel_test_util.hpp"
#include "zoo/kernels/cpu_ops.hpp"

namespace {
using zoo::kernels::test::Mismatches;
using zoo::kernels::test::normal_vector;
using zoo::kernels::test::random_vector;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("silu_mul matches a double loop", "[kernels][elementwise]") {
  std::uint32_t seed = 10;
  for (std::int64_t n : {1, 3, 17, 33, 127, 3072, 200000}) {  // the last one is split over threads
    std::mt19937 rng(++seed);
    auto gate = normal_vector(rng, n, 4.0f);
    const auto up = normal_vector(rng, n);
    // Extremes: exp(-g) overflows for g << 0, silu(g) -> g for g >> 0.
    const float extremes[] = {-200.0f, -90.0f, -20.0f, 0.0f, 20.0f, 90.0f, 200.0f};
    for (std::size_t i = 0; i < std::size(extremes) && i < gate.size(); ++i) gate[i] = extremes[i];
    std::vector<float> out(static_cast<std::size_t>(n));
    zoo::kernels::cpu::silu_mul(gate.data(), up.data(), out.data(), n);
    // exp, add, divide and multiply each round once in float32: 1e-6 relative is ample. The
    // 1e-30 floor covers g < -88, where exp(-g) overflows float32 and silu gives 0 (torch too)
    // instead of a value below 1e-36.
    Mismatches bad;
    for (std::int64_t i = 0; i < n; ++i) {
      const double g = gate[i];
      const double want = g / (1.0 + std::exp(-g)) * up[i];
      bad.check(i, out[i], want, 1e-6 * std::abs(want) + 1e-30);
    }
    std::ostringstream what;
    what << "n=" << n << ": " << bad;
    INFO(what.str());
    CHECK(bad.count == 0);
  }
}

TEST_CASE("add_inplace adds elementwise", "[kernels][elementwise]") {
  std::uint32_t seed = 20;
  for (std::int64_t n : {1, 3, 17, 1024, 200000}) {
    std::mt19937 rng(++seed);
    const auto y0 = normal_vector(rng, n);
    const auto x = normal_vector(rng, n);
    auto y = y0;
    zoo::kernels::cpu::add_inplace(y.data(), x.data(), n);
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < n; ++i) bad += y[i] != y0[i] + x[i];  // one IEEE rounding: exact
    INFO("n=" << n);
    CHECK(bad == 0);
  }
}

TEST_CASE("argmax finds the first largest value", "[kernels][sampling]") {
  using zoo::kernels::cpu::argmax;
  std::uint32_t seed = 30;
  for (std::int64_t n : {1, 3, 17, 151936}) {
    std::mt19937 rng(++seed);
    const auto v = normal_vector(rng, n);
    const auto want = std::max_element(v.begin(), v.end()) - v.begin();  // first of the maxima
    CHECK(argmax(v) == want);
  }
  SECTION("ties go to the lower index") {
    std::mt19937 rng(40);
    std::uniform_int_distribution<int> small(0, 3);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> v(33);
      for (auto& x : v) x = static_cast<float>(small(rng));  // many equal maxima
      const auto want = std::find(v.begin(), v.end(), *std::max_element(v.begin(), v.end())) - v.begin();
      CHECK(argmax(v) == want);
    }
    CHECK(argmax(std::vector<float>(9, 2.5f)) == 0);
    CHECK(argmax(std::vector<float>{-kInf, -kInf, -kInf}) == 0);
    CHECK(argmax(std::vector<float>{1.0f, 5.0f, 2.0f, 5.0f}) == 1);
    CHECK(argmax(std::vector<float>{1.0f, 2.0f, 3.0f, 7.0f}) == 3);
    CHECK(argmax(std::vector<float>{-0.0f, 0.0f}) == 0);
  }
  SECTION("NaN counts as the largest, like torch.argmax") {
    CHECK(argmax(std::vector<float>{1.0f, kNaN, 9.0f, kNaN}) == 1);
    CHECK(argmax(std::vector<float>{kInf, 9.0f, kNaN}) == 2);
  }
  CHECK_THROWS_AS(argmax(std::vector<float>{}), std::invalid_argument);
}

TEST_CASE("log_softmax matches a double loop", "[kernels][sampling]") {
  std::uint32_t seed = 50;
  for (std::int64_t n : {1, 3, 17, 1000, 151936}) {
    for (float spread : {1.0f, 30.0f, 3000.0f}) {  // large logits need the max subtracted
      std::mt19937 rng(++seed);
      auto x = normal_vector(rng, n, spread);
      for (auto& v : x) v += 500.0f;  // an offset must not matter
      if (n > 3) x[2] = -kInf;         // a banned token
      std::vector<float> out(static_cast<std::size_t>(n));
      zoo::kernels::cpu::log_softmax(x.data(), out.data(), n);

      double max_value = -INFINITY;
      for (float v : x) max_value = std::max(max_value, double{v});
      double sum = 0.0;
      for (float v : x) sum += std::exp(v - max_value);
      const double lse = max_value + std::log(sum);
      // The float32 output rounds once (half an ulp, 2^-24 relative) and the normalizer carries
      // the float32 exp errors (2^-24 relative each, averaged by the double sum): 1e-6 * (|want|
      // + 1) covers both with room.
      Mismatches bad;
      double prob_sum = 0.0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double want = x[i] - lse;
        if (std::isinf(want)) {
          if (out[i] != -kInf) bad.check(i, out[i], want, 0.0);
          continue;
        }
        bad.check(i, out[i], want, 1e-6 * (std::abs(want) + 1.0));
        prob_sum += std::exp(double{out[i]});
      }
      std::ostringstream what;
      what << "n=" << n << " spread=" << spread << ": " << bad << ", sum of probabilities " << prob_sum;
      INFO(what.str());
      CHECK(bad.count == 0);
      CHECK(std::abs(prob_sum - 1.0) < 1e-4);
    }
  }
  SECTION("in place, and all -inf gives NaN") {
    std::vector<float> x = {0.5f, -1.0f, 2.0f}, out(3);
    zoo::kernels::cpu::log_softmax(x.data(), out.data(), 3);
    zoo::kernels::cpu::log_softmax(x.data(), x.data(), 3);
    CHECK(x == out);
    std::vector<float> dead(4, -kInf);
    zoo::kernels::cpu::log_softmax(dead.data(), dead.data(), 4);
    for (float v : dead) CHECK(std::isnan(v));
  }
}

namespace {
// Reference top-k: a stable sort by descending value keeps equal values in index order.
std::vector<std::int64_t> reference_top_k(const std::vector<float>& v, int k) {
  std::vector<std::int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return v[a] > v[b]; });
  order.resize(static_cast<std::size_t>(k));
  return order;
}
}  // namespace

TEST_CASE("top_k returns the k largest, descending, ties to the lower index", "[kernels][sampling]") {
  using zoo::kernels::cpu::top_k;
  std::uint32_t seed = 60;
  for (std::int64_t n : {1, 3, 17, 127, 151936}) {
    for (int k : {1, 2, 5, 50}) {
      if (k > n) continue;
      for (bool with_ties : {false, true}) {
        std::mt19937 rng(++seed);
        std::vector<float> v = normal_vector(rng, n);
        if (with_ties) {
          std::uniform_int_distribution<int> small(0, 4);
          for (auto& x : v) x = static_cast<float>(small(rng));
        }
        std::vector<std::int64_t> got(static_cast<std::size_t>(k), -1);
        top_k(v, k, got.data());
        INFO("n=" << n << " k=" << k << " ties=" << with_ties);
        CHECK(got == reference_top_k(v, k));
      }
    }
  }
  SECTION("k = n sorts everything; k = 0 writes nothing; k > n throws") {
    std::vector<float> v = {3.0f, 1.0f, 3.0f, -kInf, 2.0f, 1.0f};
    std::vector<std::int64_t> got(6);
    top_k(v, 6, got.data());
    CHECK(got == std::vector<std::int64_t>{0, 2, 4, 1, 5, 3});
    std::int64_t sentinel = -5;
    top_k(v, 0, &sentinel);
    CHECK(sentinel == -5);
    CHECK_THROWS_AS(top_k(v, 7, got.data()), std::invalid_argument);
  }
  SECTION("NaN ranks first, like torch.topk") {
    std::vector<float> v = {1.0f, kNaN, 4.0f, kNaN};
    std::vector<std::int64_t> got(3);
    top_k(v, 3, got.data());
    CHECK(got == std::vector<std::int64_t>{1, 3, 2});
  }
}

TEST_CASE("gelu_tanh_mul and gelu_mul match their formulas in double, and differ from each other",
          "[kernels][elementwise]") {
  std::mt19937 rng(55);
  const std::int64_t n = 70000;  // split over threads
  auto gate = normal_vector(rng, n, 3.0f);
  const auto up = normal_vector(rng, n);
  for (float e : {-30.0f, -8.0f, 0.0f, 8.0f, 30.0f}) gate.push_back(e);
  std::vector<float> up_all = up;
  up_all.resize(gate.size(), 1.0f);
  const auto m = static_cast<std::int64_t>(gate.size());
  std::vector<float> tanh_out(gate.size()), erf_out(gate.size());
  zoo::kernels::cpu::gelu_tanh_mul(gate.data(), up_all.data(), tanh_out.data(), m);
  zoo::kernels::cpu::gelu_mul(gate.data(), up_all.data(), erf_out.data(), m);
  Mismatches bad_tanh, bad_erf;
  double largest_gap = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    const double x = gate[i], u = up_all[i];
    const double t = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * u;
    const double e = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))) * u;
    bad_tanh.check(i, tanh_out[i], t, 2e-6 * std::abs(t) + 1e-6 * std::abs(x * u) + 1e-30);
    bad_erf.check(i, erf_out[i], e, 2e-6 * std::abs(e) + 1e-6 * std::abs(x * u) + 1e-30);
    largest_gap = std::max(largest_gap, std::abs(t - e));
  }
  INFO("tanh: " << bad_tanh << "; erf: " << bad_erf);
  CHECK(bad_tanh.count == 0);
  CHECK(bad_erf.count == 0);
  CHECK(largest_gap > 1e-4);  // the two forms are not interchangeable
}

TEST_CASE("softcap_inplace and scale_inplace", "[kernels][elementwise]") {
  std::vector<float> x{-1000.0f, -3.0f, 0.0f, 0.5f, 3.0f, 1000.0f};
  auto capped = x;
  zoo::kernels::cpu::softcap_inplace(capped.data(), static_cast<std::int64_t>(capped.size()), 2.0f);
  for (std::size_t i = 0; i < x.size(); ++i) {
    CHECK(capped[i] == Approx(std::tanh(x[i] / 2.0) * 2.0).epsilon(1e-6));
    CHECK(std::abs(capped[i]) <= 2.0f);
  }
  zoo::kernels::cpu::scale_inplace(x.data(), static_cast<std::int64_t>(x.size()), 0.5f);
  CHECK(x[4] == 1.5f);
}
