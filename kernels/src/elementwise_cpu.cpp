#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu_isa_ops.hpp"
#include "simd_cpu.hpp"
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

namespace {

#ifdef ZOO_CPU_SIMD_AVX2
// Beyond this |x| the double-precision reduction below loses bits; such lanes take libm (Snake's
// arguments are alpha * activation, far smaller in practice).
constexpr float kSinVectorLimit = 65536.0f;

// sin of 8 floats. x = j pi/2 + r with j = round(x 2/pi) and r computed in double (x and j are
// exact there; pi/2 in two doubles), so r is correctly rounded to float; then Cephes' minimax
// polynomials for sin and cos on |r| <= pi/4, chosen and signed by j's quadrant. Lanes with
// |x| >= kSinVectorLimit or not finite are wrong here: the caller checks `needs_libm`.
inline __m256 sin8(__m256 x) {
  const __m256 j = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.636619772367581343f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256d pio2_hi = _mm256_set1_pd(1.5707963267948966), pio2_lo = _mm256_set1_pd(6.123233995736766e-17);
  auto reduce = [&](__m128 xs, __m128 js) {
    const __m256d xd = _mm256_cvtps_pd(xs), jd = _mm256_cvtps_pd(js);
    return _mm256_cvtpd_ps(_mm256_fnmadd_pd(jd, pio2_lo, _mm256_fnmadd_pd(jd, pio2_hi, xd)));
  };
  const __m256 r = _mm256_set_m128(reduce(_mm256_extractf128_ps(x, 1), _mm256_extractf128_ps(j, 1)),
                                   reduce(_mm256_castps256_ps128(x), _mm256_castps256_ps128(j)));
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 s = _mm256_fmadd_ps(_mm256_set1_ps(-1.9515295891e-4f), z, _mm256_set1_ps(8.3321608736e-3f));
  s = _mm256_fmadd_ps(s, z, _mm256_set1_ps(-1.6666654611e-1f));
  s = _mm256_fmadd_ps(_mm256_mul_ps(s, z), r, r);
  __m256 c = _mm256_fmadd_ps(_mm256_set1_ps(2.443315711809948e-5f), z, _mm256_set1_ps(-1.388731625493765e-3f));
  c = _mm256_fmadd_ps(c, z, _mm256_set1_ps(4.166664568298827e-2f));
  c = _mm256_fmadd_ps(_mm256_mul_ps(c, z), z, _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), z, _mm256_set1_ps(1.0f)));
  const __m256i q = _mm256_cvtps_epi32(j);
  const __m256 odd = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(q, _mm256_set1_epi32(1)), _mm256_set1_epi32(1)));
  const __m256 sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(q, _mm256_set1_epi32(2)), 30));
  return _mm256_xor_ps(_mm256_blendv_ps(s, c, odd), sign);
}

inline bool needs_libm(__m256 v) {
  const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
  // NaN compares false with _CMP_LT_OQ, so it lands here too.
  return _mm256_movemask_ps(_mm256_cmp_ps(abs, _mm256_set1_ps(kSinVectorLimit), _CMP_LT_OQ)) != 0xFF;
}
#endif

void snake_row(const float* in, const float* alpha, const float* inv, float* out, std::int64_t channels) {
  std::int64_t c = 0;
#ifdef ZOO_CPU_SIMD_AVX2
  for (; c + 8 <= channels; c += 8) {
    const __m256 x = _mm256_loadu_ps(in + c);
    const __m256 ax = _mm256_mul_ps(_mm256_loadu_ps(alpha + c), x);
    __m256 s;
    if (needs_libm(ax)) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, ax);
      for (float& v : lanes) v = std::sin(v);
      s = _mm256_load_ps(lanes);
    } else {
      s = sin8(ax);
    }
    // x + inv * (s * s), rounded as the scalar loop below (no fused multiply-add).
    _mm256_storeu_ps(out + c, _mm256_add_ps(x, _mm256_mul_ps(_mm256_loadu_ps(inv + c), _mm256_mul_ps(s, s))));
  }
#endif
  for (; c < channels; ++c) {
    const float s = std::sin(alpha[c] * in[c]);
    out[c] = in[c] + inv[c] * (s * s);
  }
}

}  // namespace

void snake(const float* x, const float* alpha, const float* inv_alpha, float* y, std::int64_t length,
           std::int64_t channels) {
  // A Snake layer runs over whole waveforms (240k steps x 64 channels for 10 s): split by steps.
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 14) / std::max<std::int64_t>(channels, 1));
  ThreadPool::global().parallel_for(length, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) snake_row(x + t * channels, alpha, inv_alpha, y + t * channels, channels);
  });
}

}  // namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS
