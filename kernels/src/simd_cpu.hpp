#pragma once
// Small helpers shared by the per-ISA CPU ops (see cpu_isa_ops.hpp): AVX2/FMA intrinsics in the
// avx2 build of a source, portable loops in the generic one. Everything here lives in the ISA's
// own namespace, so the two builds never share an inline function (the linker would keep one copy,
// possibly the AVX2 one, for both).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "cpu_isa_ops.hpp"

#ifndef ZOO_CPU_ISA_NS
#error "per-ISA source: kernels/CMakeLists.txt compiles it with ZOO_CPU_ISA_NS set"
#endif
#if defined(ZOO_CPU_ISA_AVX2) && !(defined(__AVX2__) && defined(__FMA__))
#error "the avx2 build of the CPU ops needs -mavx2 -mfma"
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define ZOO_CPU_SIMD_AVX2 1
#include <immintrin.h>
#endif

namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS::detail {

#ifdef ZOO_CPU_SIMD_AVX2
inline float hsum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 shuf = _mm_movehdup_ps(lo);
  lo = _mm_add_ps(lo, shuf);
  shuf = _mm_movehl_ps(shuf, lo);
  return _mm_cvtss_f32(_mm_add_ss(lo, shuf));
}

// Lane mask selecting the first `rem` (0..8) lanes, for masked loads of a row tail: a masked
// load never touches memory past the end of the row.
inline __m256i tail_mask(std::int64_t rem) {
  alignas(64) static constexpr std::int32_t kTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTable + 8 - rem));
}

// Float32 dot product over n values with four independent vector accumulators (the lanes make
// it a blocked sum, which is also closer to what torch's vectorized reductions do).
inline float dot(const float* a, const float* b, std::int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    acc1 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, mask), _mm256_maskload_ps(b + i, mask), acc1);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

#else
// Eight independent partial sums: the compiler vectorizes them with SSE2 without reassociating, and
// the blocked order stays close to the AVX2 path's.
inline float dot(const float* a, const float* b, std::int64_t n) {
  float acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}
#endif

// Float32 sum of squares, blocked like dot().
inline float sum_squares(const float* a, std::int64_t n) { return dot(a, a, n); }

// 64-byte aligned scratch buffer that only grows; one per thread is reused across calls so the
// hot paths never allocate (large mallocs are fresh mmaps that page-fault on every call).
class AlignedBuffer {
 public:
  float* get(std::size_t count) {
    if (count > capacity_) {
      const std::size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
      void* p = std::aligned_alloc(64, bytes);
      if (p == nullptr) throw std::bad_alloc();
      data_.reset(static_cast<float*>(p));
      capacity_ = bytes / sizeof(float);
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  std::size_t capacity_ = 0;
};

}  // namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS::detail
