#pragma once
// The inner loop of the weight-streaming kernels (gemv.cu, moe.cu): a 16-byte load that bypasses
// L1 (a weight is read once per call), and the float32 dot product of eight bf16 pairs.
#include <cstdint>

#include "device_utils.cuh"

namespace zoo::kernels::cuda::detail {

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 r;
  // volatile: issued where written, so the loads placed before a PDL wait stay before it.
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// bf16 -> float32 is a 16-bit shift: element 2i is the low half of word i, 2i + 1 the high half.
__device__ __forceinline__ float lo(std::uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float hi(std::uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

__device__ __forceinline__ float dot8(float acc, const uint4& w, const uint4& x) {
  acc = fmaf(lo(w.x), lo(x.x), acc);
  acc = fmaf(hi(w.x), hi(x.x), acc);
  acc = fmaf(lo(w.y), lo(x.y), acc);
  acc = fmaf(hi(w.y), hi(x.y), acc);
  acc = fmaf(lo(w.z), lo(x.z), acc);
  acc = fmaf(hi(w.z), hi(x.z), acc);
  acc = fmaf(lo(w.w), lo(x.w), acc);
  acc = fmaf(hi(w.w), hi(x.w), acc);
  return acc;
}

}  // namespace zoo::kernels::cuda::detail
