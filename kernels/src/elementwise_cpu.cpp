#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu_isa_ops.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS {
namespace {
// Elementwise loops are memory-bound; only very long ones (prefill) are worth splitting.
constexpr std::int64_t kElementwiseGrain = std::int64_t{1} << 16;
}  // namespace

void silu_mul(const float* gate, const float* up, float* out, std::int64_t n) {
  ThreadPool::global().parallel_for(n, kElementwiseGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      // torch's silu: x / (1 + exp(-x)); for x << 0, exp(-x) overflows to inf and this gives -0.
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  });
}

void add_inplace(float* y, const float* x, std::int64_t n) {
  ThreadPool::global().parallel_for(n, kElementwiseGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) y[i] += x[i];
  });
}

}  // namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS
