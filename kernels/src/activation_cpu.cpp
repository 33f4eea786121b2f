// The MLP activations besides SiLU and the elementwise scalings some families add, in float32 as
// torch computes them on the CPU. Portable code only: these are rarely the bottleneck of a CPU step
// (the matmuls are), so they are not compiled per instruction set.
#include <cmath>
#include <cstdint>

#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::kernels::cpu {
namespace {

constexpr std::int64_t kGrain = std::int64_t{1} << 16;

template <typename F>
void elementwise(std::int64_t n, F f) {
  ThreadPool::global().parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) f(i);
  });
}

}  // namespace

void gelu_tanh_mul(const float* gate, const float* up, float* out, std::int64_t n) {
  // torch's constants and order: beta = sqrt(2) * (2 / sqrt(pi)) * 0.5, inner = beta * (x + k x^3).
  constexpr float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
  constexpr float kKappa = 0.044715f;
  elementwise(n, [&](std::int64_t i) {
    const float x = gate[i];
    const float inner = kBeta * (x + kKappa * x * x * x);
    out[i] = 0.5f * x * (1.0f + std::tanh(inner)) * up[i];
  });
}

void gelu_mul(const float* gate, const float* up, float* out, std::int64_t n) {
  constexpr float kHalfSqrt2 = static_cast<float>(M_SQRT1_2);
  elementwise(n, [&](std::int64_t i) {
    const float x = gate[i];
    out[i] = x * 0.5f * (1.0f + std::erf(x * kHalfSqrt2)) * up[i];
  });
}

void softcap_inplace(float* x, std::int64_t n, float cap) {
  elementwise(n, [&](std::int64_t i) { x[i] = std::tanh(x[i] / cap) * cap; });
}

void scale_inplace(float* x, std::int64_t n, float s) {
  elementwise(n, [&](std::int64_t i) { x[i] *= s; });
}

}  // namespace zoo::kernels::cpu
