#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernel_test_util.hpp"
#include "zoo/kernels/cpu_ops.hpp"

namespace {
using zoo::kernels::test::Mismatches;
using zoo::kernels::test::random_vector;

// Runs linear() on random inputs and compares with a double-precision loop. Tolerance: a float32
// dot product over k terms is off by at most about k * 2^-24 * sum_k |x w| in the worst case
// (blocking makes the chains much shorter), so we allow 1e-5 * sum_k |x w| + 1e-30 per entry:
// loose enough for any summation order up to k ~ 160 worst case and far beyond that in practice,
// tight enough that a wrong index, a missed tail or a dropped k block (errors of order
// |x w|) fails.
void check_linear(std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto x = random_vector(rng, m * k);
  const auto w = random_vector(rng, n * k);
  const auto y0 = random_vector(rng, m * n, -4.0f, 4.0f);
  // Guard cells after y catch writes past the end.
  constexpr float kGuard = 12345.0f;
  std::vector<float> y(static_cast<std::size_t>(m * n + 16), kGuard);
  if (accumulate) std::copy(y0.begin(), y0.end(), y.begin());

  zoo::kernels::cpu::linear(x.data(), w.data(), y.data(), m, n, k, accumulate);

  Mismatches bad;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double want = accumulate ? y0[i * n + j] : 0.0, magnitude = accumulate ? std::abs(y0[i * n + j]) : 0.0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double prod = static_cast<double>(x[i * k + p]) * w[j * k + p];
        want += prod;
        magnitude += std::abs(prod);
      }
      bad.check(i * n + j, y[i * n + j], want, 1e-5 * magnitude + 1e-30);
    }
  }
  std::ostringstream what;
  what << "m=" << m << " n=" << n << " k=" << k << " accumulate=" << accumulate << ": " << bad;
  INFO(what.str());
  CHECK(bad.count == 0);
  for (std::size_t i = m * n; i < y.size(); ++i) CHECK(y[i] == kGuard);
}
}  // namespace

TEST_CASE("linear matches a double loop on awkward sizes", "[kernels][linear]") {
  std::uint32_t seed = 1000;
  for (std::int64_t m : {1, 2, 3, 4, 5, 6, 7, 12, 13}) {
    for (std::int64_t n : {1, 3, 17, 33, 127}) {
      for (std::int64_t k : {1, 3, 8, 17, 33, 127, 300}) {
        check_linear(m, n, k, false, ++seed);
      }
    }
  }
}

TEST_CASE("linear hits the blocked and threaded paths", "[kernels][linear]") {
  struct Shape {
    std::int64_t m, n, k;
  };
  // k beyond one k block (256) and not a multiple of it; n beyond one task's columns (512); m
  // beyond one task's rows (480) and one packed block (120); GEMV rows spread over threads.
  const Shape shapes[] = {{67, 259, 301}, {130, 1100, 513}, {500, 40, 20}, {7, 600, 1030},
                          {1, 3000, 1030}, {2, 2049, 700},  {3, 1037, 257}, {4, 1500, 1001}};
  std::uint32_t seed = 2000;
  for (const auto& s : shapes) check_linear(s.m, s.n, s.k, false, ++seed);
}

TEST_CASE("linear accumulates into y when asked", "[kernels][linear]") {
  std::uint32_t seed = 3000;
  for (std::int64_t m : {1, 2, 4, 5, 67}) {
    for (std::int64_t k : {5, 301, 600}) check_linear(m, 259, k, true, ++seed);
  }
}

TEST_CASE("linear with k = 0 writes zeros or leaves y alone", "[kernels][linear]") {
  std::vector<float> y(6, 3.0f);
  const float dummy = 0.0f;
  zoo::kernels::cpu::linear(&dummy, &dummy, y.data(), 2, 3, 0, true);
  for (float v : y) CHECK(v == 3.0f);
  zoo::kernels::cpu::linear(&dummy, &dummy, y.data(), 2, 3, 0, false);
  for (float v : y) CHECK(v == 0.0f);
}

TEST_CASE("linear_rows_invariant gives every row bitwise the same at any m and offset, on every ISA",
          "[kernels][linear]") {
  namespace cpu = zoo::kernels::cpu;
  using zoo::kernels::cpu::CpuIsa;
  const CpuIsa before = cpu::cpu_isa();
  std::mt19937 rng(4242);
  const std::int64_t total = 200, n = 72, k = 600;  // k over two 256-wide blocks and a remainder
  const auto x = random_vector(rng, total * k), w = random_vector(rng, n * k);
  for (const CpuIsa isa : {CpuIsa::generic, CpuIsa::avx2}) {
    if (!cpu::cpu_isa_supported(isa)) continue;
    INFO("isa " << cpu::cpu_isa_name(isa));
    cpu::set_cpu_isa(isa);
    std::vector<float> all(total * n);
    cpu::linear_rows_invariant(x.data(), w.data(), all.data(), total, n, k);
    for (const std::int64_t m : {1, 2, 3, 4, 5, 7, 12, 13, 64, 130}) {
      for (const std::int64_t offset : {std::int64_t{0}, std::int64_t{41}}) {
        INFO("m=" << m << " rows from " << offset);
        std::vector<float> some(m * n);
        cpu::linear_rows_invariant(x.data() + offset * k, w.data(), some.data(), m, n, k);
        CHECK(std::memcmp(some.data(), all.data() + offset * n, some.size() * sizeof(float)) == 0);
      }
    }
  }
  cpu::set_cpu_isa(before);
}
