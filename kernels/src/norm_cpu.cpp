// RMSNorm as transformers' RMSNorm modules compute it in float32:
//   variance = mean(x^2);  h = x * rsqrt(variance + eps);  y = weight * h
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "simd_cpu.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS {

void rms_norm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t dim, float eps) {
  if (rows <= 0 || dim <= 0) return;
  // About 64K values per chunk: below that a thread hand-off costs more than it saves.
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / dim);
  ThreadPool::global().parallel_for(rows, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      const float variance = detail::sum_squares(xr, dim) / static_cast<float>(dim);
      const float inv_rms = 1.0f / std::sqrt(variance + eps);
      // Two separate roundings, in transformers' order (x * rsqrt first, then the weight); y may
      // alias x because each value is read before it is written.
      for (std::int64_t i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * inv_rms);
    }
  });
}

}  // namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS
