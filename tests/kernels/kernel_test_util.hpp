#pragma once
// Helpers shared by the kernel tests: random inputs and tolerance checks against double
// references.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace zoo::kernels::test {

inline std::vector<float> random_vector(std::mt19937& rng, std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> normal_vector(std::mt19937& rng, std::int64_t n, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Counts the entries where |got - want| > tol[i] and reports the worst one, so that a failing
// case prints one readable line instead of thousands.
struct Mismatches {
  std::int64_t count = 0;
  std::int64_t worst_index = -1;
  double worst_excess = 0.0, worst_got = 0.0, worst_want = 0.0, worst_tol = 0.0;

  void check(std::int64_t i, double got, double want, double tol) {
    const double err = std::abs(got - want);
    if (!(err <= tol)) {  // also catches NaN
      ++count;
      const double excess = std::isnan(err) ? INFINITY : err / tol;
      if (worst_index < 0 || excess > worst_excess) {
        worst_index = i;
        worst_excess = excess;
        worst_got = got;
        worst_want = want;
        worst_tol = tol;
      }
    }
  }
};

inline std::ostream& operator<<(std::ostream& os, const Mismatches& m) {
  os << m.count << " mismatches";
  if (m.count > 0) {
    os << "; worst at " << m.worst_index << ": got " << m.worst_got << ", want " << m.worst_want << ", tol "
       << m.worst_tol;
  }
  return os;
}

}  // namespace zoo::kernels::test
