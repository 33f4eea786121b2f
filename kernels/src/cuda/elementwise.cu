// SiLU-and-multiply, adds, and dtype conversions: grid-stride loops, 16-byte accesses when the
// sizes and pointers allow it.
#include <stdexcept>
#include <string>

#include "device_utils.cuh"
#include "vec.cuh"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {
namespace {
using namespace detail;

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t work) {
  // Enough blocks to fill the GPU several times over; the loops stride over the rest.
  const std::int64_t blocks = (work + kThreads - 1) / kThreads;
  const std::int64_t cap = std::int64_t{device_properties().multiprocessors} * 16;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

template <int VEC, GatedActivation ACT = GatedActivation::silu>
__global__ void silu_mul_kernel(const bf16* __restrict__ gate, std::int64_t gate_stride, const bf16* __restrict__ up,
                                std::int64_t up_stride, bf16* __restrict__ out, std::int64_t tokens,
                                std::int64_t inter) {
  const std::int64_t per_row = inter / VEC;
  const std::int64_t total = tokens * per_row;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = idx / per_row, i = (idx % per_row) * VEC;
    float g[VEC], u[VEC], o[VEC];
    load_f32<VEC>(gate + t * gate_stride + i, g);
    load_f32<VEC>(up + t * up_stride + i, u);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if constexpr (ACT == GatedActivation::silu) o[j] = silu_times(g[j], u[j]);
      else if constexpr (ACT == GatedActivation::gelu_tanh) o[j] = gelu_tanh_times(g[j], u[j]);
      else o[j] = gelu_erf_times(g[j], u[j]);
    }
    store_bf16<VEC>(out + t * inter + i, o);
  }
}

template <int VEC>
__global__ void add_bf16_kernel(const bf16* a, const bf16* b, bf16* out, std::int64_t n) {
  for (std::int64_t idx = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) * VEC; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x * VEC) {
    float x[VEC], y[VEC];
    load_f32<VEC>(a + idx, x);
    load_f32<VEC>(b + idx, y);
#pragma unroll
    for (int j = 0; j < VEC; ++j) x[j] += y[j];
    store_bf16<VEC>(out + idx, x);
  }
}

template <int VEC>
__global__ void scale_bf16_kernel(bf16* x, std::int64_t n, float s) {
  for (std::int64_t idx = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) * VEC; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x * VEC) {
    float v[VEC];
    load_f32<VEC>(x + idx, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] *= s;
    store_bf16<VEC>(x + idx, v);
  }
}

__global__ void softcap_f32_kernel(float* x, std::int64_t n, float cap) {
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[idx] = tanhf(x[idx] / cap) * cap;
}

__global__ void add_f32_kernel(const float* a, const float* b, float* out, std::int64_t n) {
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[idx] = a[idx] + b[idx];
}

template <int VEC>
__global__ void bf16_to_f32_kernel(const bf16* __restrict__ in, float* __restrict__ out, std::int64_t n) {
  for (std::int64_t idx = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) * VEC; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x * VEC) {
    float v[VEC];
    load_f32<VEC>(in + idx, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[idx + j] = v[j];
  }
}

template <int VEC>
__global__ void f32_to_bf16_kernel(const float* __restrict__ in, bf16* __restrict__ out, std::int64_t n) {
  for (std::int64_t idx = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) * VEC; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x * VEC) {
    float v[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = in[idx + j];
    store_bf16<VEC>(out + idx, v);
  }
}

void check_n(std::int64_t n, const char* what) {
  if (n < 0) throw std::invalid_argument(std::string(what) + ": negative size");
}

}  // namespace

void silu_and_mul(const Bf16* gate, std::int64_t gate_stride, const Bf16* up, std::int64_t up_stride, Bf16* out,
                  std::int64_t tokens, std::int64_t inter, cudaStream_t stream) {
  if (tokens < 0 || inter < 0) throw std::invalid_argument("silu_and_mul: negative size");
  if (tokens == 0 || inter == 0) return;
  const bool vec = inter % 8 == 0 && gate_stride % 8 == 0 && up_stride % 8 == 0 && aligned16(gate) &&
                   aligned16(up) && aligned16(out);
  if (vec) {
    silu_mul_kernel<8><<<grid_for(tokens * inter / 8), kThreads, 0, stream>>>(dev(gate), gate_stride, dev(up),
                                                                            up_stride, dev(out), tokens, inter);
  } else {
    silu_mul_kernel<1><<<grid_for(tokens * inter), kThreads, 0, stream>>>(dev(gate), gate_stride, dev(up), up_stride,
                                                                        dev(out), tokens, inter);
  }
  ZOO_CUDA_CHECK_LAUNCH();
}

void silu_and_mul(const Bf16* gate_up, Bf16* out, std::int64_t tokens, std::int64_t inter, cudaStream_t stream) {
  silu_and_mul(gate_up, 2 * inter, gate_up + inter, 2 * inter, out, tokens, inter, stream);
}

void act_and_mul(GatedActivation act, const Bf16* gate_up, Bf16* out, std::int64_t tokens, std::int64_t inter,
                 cudaStream_t stream) {
  if (act == GatedActivation::silu) return silu_and_mul(gate_up, out, tokens, inter, stream);
  if (tokens < 0 || inter < 0) throw std::invalid_argument("act_and_mul: negative size");
  if (tokens == 0 || inter == 0) return;
  const std::int64_t stride = 2 * inter;
  const bool vec = inter % 8 == 0 && aligned16(gate_up) && aligned16(out);
  const auto* g = dev(gate_up);
  const auto* u = g + inter;
  if (act == GatedActivation::gelu_tanh) {
    if (vec)
      silu_mul_kernel<8, GatedActivation::gelu_tanh>
          <<<grid_for(tokens * inter / 8), kThreads, 0, stream>>>(g, stride, u, stride, dev(out), tokens, inter);
    else
      silu_mul_kernel<1, GatedActivation::gelu_tanh>
          <<<grid_for(tokens * inter), kThreads, 0, stream>>>(g, stride, u, stride, dev(out), tokens, inter);
  } else {
    if (vec)
      silu_mul_kernel<8, GatedActivation::gelu>
          <<<grid_for(tokens * inter / 8), kThreads, 0, stream>>>(g, stride, u, stride, dev(out), tokens, inter);
    else
      silu_mul_kernel<1, GatedActivation::gelu>
          <<<grid_for(tokens * inter), kThreads, 0, stream>>>(g, stride, u, stride, dev(out), tokens, inter);
  }
  ZOO_CUDA_CHECK_LAUNCH();
}

void scale(Bf16* x, std::int64_t n, float s, cudaStream_t stream) {
  check_n(n, "scale");
  if (n == 0) return;
  if (n % 8 == 0 && aligned16(x))
    scale_bf16_kernel<8><<<grid_for(n / 8), kThreads, 0, stream>>>(dev(x), n, s);
  else
    scale_bf16_kernel<1><<<grid_for(n), kThreads, 0, stream>>>(dev(x), n, s);
  ZOO_CUDA_CHECK_LAUNCH();
}

void softcap(float* x, std::int64_t n, float cap, cudaStream_t stream) {
  check_n(n, "softcap");
  if (n == 0) return;
  if (!(cap > 0.0f)) throw std::invalid_argument("softcap: the cap must be positive");
  softcap_f32_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, cap);
  ZOO_CUDA_CHECK_LAUNCH();
}

void add(const Bf16* a, const Bf16* b, Bf16* out, std::int64_t n, cudaStream_t stream) {
  check_n(n, "add");
  if (n == 0) return;
  if (n % 8 == 0 && aligned16(a) && aligned16(b) && aligned16(out))
    add_bf16_kernel<8><<<grid_for(n / 8), kThreads, 0, stream>>>(dev(a), dev(b), dev(out), n);
  else
    add_bf16_kernel<1><<<grid_for(n), kThreads, 0, stream>>>(dev(a), dev(b), dev(out), n);
  ZOO_CUDA_CHECK_LAUNCH();
}

void add(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream) {
  check_n(n, "add");
  if (n == 0) return;
  add_f32_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, out, n);
  ZOO_CUDA_CHECK_LAUNCH();
}

void bf16_to_f32(const Bf16* in, float* out, std::int64_t n, cudaStream_t stream) {
  check_n(n, "bf16_to_f32");
  if (n == 0) return;
  if (n % 8 == 0 && aligned16(in) && aligned16(out))
    bf16_to_f32_kernel<8><<<grid_for(n / 8), kThreads, 0, stream>>>(dev(in), out, n);
  else
    bf16_to_f32_kernel<1><<<grid_for(n), kThreads, 0, stream>>>(dev(in), out, n);
  ZOO_CUDA_CHECK_LAUNCH();
}

void f32_to_bf16(const float* in, Bf16* out, std::int64_t n, cudaStream_t stream) {
  check_n(n, "f32_to_bf16");
  if (n == 0) return;
  if (n % 8 == 0 && aligned16(in) && aligned16(out))
    f32_to_bf16_kernel<8><<<grid_for(n / 8), kThreads, 0, stream>>>(in, dev(out), n);
  else
    f32_to_bf16_kernel<1><<<grid_for(n), kThreads, 0, stream>>>(in, dev(out), n);
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
