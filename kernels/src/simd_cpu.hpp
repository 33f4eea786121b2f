#pragma once
// Small AVX2/FMA helpers shared by the CPU ops. The kernels library is built with
// -march=x86-64-v3, so AVX2 and FMA are always available here.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace zoo::kernels::cpu::detail {

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

}  // namespace zoo::kernels::cpu::detail
