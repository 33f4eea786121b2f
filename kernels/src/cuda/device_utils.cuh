#pragma once
// Device-side helpers shared by the CUDA kernels (private to kernels/src/cuda).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "zoo/kernels/cuda/common.hpp"

namespace zoo::kernels::cuda::detail {

using bf16 = __nv_bfloat16;

inline const bf16* dev(const Bf16* p) { return reinterpret_cast<const bf16*>(p); }
inline bf16* dev(Bf16* p) { return reinterpret_cast<bf16*>(p); }

__device__ __forceinline__ float to_f32(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ bf16 to_bf16(float v) { return __float2bfloat16_rn(v); }
// Rounds a float32 to bf16 precision and back: one bf16 op result in torch's bf16 arithmetic.
__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// torch's act_fn(gate) * up in bf16: silu = x / (1 + exp(-x)) in float32 rounded to bf16, times
// the bf16 up value (the caller rounds the product). One definition for every kernel that forms it.
__device__ __forceinline__ float silu_times(float gate, float up) {
  return round_bf16(gate / (1.0f + expf(-gate))) * up;
}

// The same for the GELUs: torch's tanh form (gelu_pytorch_tanh) and the exact erf form, in float32
// rounded to bf16, times up.
__device__ __forceinline__ float gelu_tanh_times(float x, float up) {
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2) * (2 / sqrt(pi)) * 0.5
  constexpr float kKappa = 0.044715f;
  const float inner = kBeta * (x + kKappa * x * x * x);
  return round_bf16(0.5f * x * (1.0f + tanhf(inner))) * up;
}
__device__ __forceinline__ float gelu_erf_times(float x, float up) {
  return round_bf16(x * 0.5f * (1.0f + erff(x * 0.7071067811865476f))) * up;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reductions; every thread gets the result. `scratch` holds >= 32 values and may be
// reused right after the call returns (the trailing barrier protects it).
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T* scratch, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = scratch[0];
  for (int i = 1; i < warps; ++i) r = op(r, scratch[i]);
  __syncthreads();
  return r;
}
struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// ---- Ampere+ primitives: async copies, ldmatrix, bf16 tensor-core MMA --------------------------
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy; when !valid the destination is zero-filled and nothing is read.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a (16x16, row) * b (16x8, col), bf16 inputs, float32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                               std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats -> packed bf16x2 (lo in the low half: the lower column index).
__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<std::uint32_t*>(&v);
}

}  // namespace zoo::kernels::cuda::detail
