// y[m, n] = x[m, k] @ w[n, k]^T in float32.
//
// Three paths:
//  - m <= 4 (decode): a GEMV that streams each row of w exactly once and dots it with every row
//    of x; it is bound by memory bandwidth, so packing w would only cost an extra pass.
//  - 4 < m <= 12: the same dot-product kernel over groups of 4 x rows, reusing each small block
//    of w from L1 for all groups.
//  - m > 12: a BLIS-style GEMM. Panels of w (kKC x kNR, n contiguous) and x (kKC x kMR, m
//    contiguous) are packed into aligned thread-local buffers and a 6x16 register-blocked FMA
//    micro-kernel runs over them: per k step it loads 2 vectors of w, broadcasts 6 values of x
//    and issues 12 FMAs into 12 accumulators that stay in registers for the whole panel.
// All paths split n (and the GEMM also m) over ThreadPool::global().
// That is the avx2 build of this file; the generic build (no AVX2) has one simpler path, below.
#include <algorithm>
#include <cstdint>

#include "simd_cpu.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS {
#ifdef ZOO_CPU_SIMD_AVX2
namespace {
using detail::AlignedBuffer;

constexpr std::int64_t kMR = 6;   // micro-tile rows (x rows)
constexpr std::int64_t kNR = 16;  // micro-tile columns (w rows): two 8-float vectors
// A kKC x kNR panel of w (16 KiB) stays in L1 while the packed x block streams from L2.
constexpr std::int64_t kKC = 256;
constexpr std::int64_t kMC = 120;  // rows of x packed at once: 120 x 256 floats = 120 KiB (L2)
constexpr std::int64_t kMTask = 4 * kMC;  // rows of y per task when m is large
constexpr std::int64_t kNCMax = 512;      // columns of y per task at most (packed w block: 512 KiB)
constexpr std::int64_t kGemvMaxRows = 4;
// Up to here the small-batch GEMV beats the packed GEMM (measured: 2x at m = 8, 10% behind at 16).
constexpr std::int64_t kSmallBatchMaxRows = 12;

// ---------------------------------------------------------------------------------------------
// GEMM path

// In-register transpose of 8 rows of 8 floats.
inline void transpose8(__m256& r0, __m256& r1, __m256& r2, __m256& r3, __m256& r4, __m256& r5, __m256& r6,
                       __m256& r7) {
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r0 = _mm256_permute2f128_ps(s0, s4, 0x20);
  r1 = _mm256_permute2f128_ps(s1, s5, 0x20);
  r2 = _mm256_permute2f128_ps(s2, s6, 0x20);
  r3 = _mm256_permute2f128_ps(s3, s7, 0x20);
  r4 = _mm256_permute2f128_ps(s0, s4, 0x31);
  r5 = _mm256_permute2f128_ps(s1, s5, 0x31);
  r6 = _mm256_permute2f128_ps(s2, s6, 0x31);
  r7 = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Packs w[n0 + j, pc + p] for j < nc, p < kc into panels of kNR columns: panel q holds
// dst[q * kc * kNR + p * kNR + jj] = w[n0 + q * kNR + jj, pc + p], zero past nc.
void pack_w(const float* w, std::int64_t k, std::int64_t n0, std::int64_t nc, std::int64_t pc, std::int64_t kc,
            float* dst) {
  for (std::int64_t jp = 0; jp < nc; jp += kNR) {
    float* panel = dst + jp * kc;
    for (std::int64_t j0 = 0; j0 < kNR; j0 += 8) {
      const std::int64_t cols = std::clamp<std::int64_t>(nc - jp - j0, 0, 8);
      const float* src = w + (n0 + jp + j0) * k + pc;
      std::int64_t p = 0;
      if (cols == 8) {
        for (; p + 8 <= kc; p += 8) {
          __m256 r0 = _mm256_loadu_ps(src + 0 * k + p), r1 = _mm256_loadu_ps(src + 1 * k + p);
          __m256 r2 = _mm256_loadu_ps(src + 2 * k + p), r3 = _mm256_loadu_ps(src + 3 * k + p);
          __m256 r4 = _mm256_loadu_ps(src + 4 * k + p), r5 = _mm256_loadu_ps(src + 5 * k + p);
          __m256 r6 = _mm256_loadu_ps(src + 6 * k + p), r7 = _mm256_loadu_ps(src + 7 * k + p);
          transpose8(r0, r1, r2, r3, r4, r5, r6, r7);
          float* d = panel + p * kNR + j0;
          _mm256_store_ps(d + 0 * kNR, r0);
          _mm256_store_ps(d + 1 * kNR, r1);
          _mm256_store_ps(d + 2 * kNR, r2);
          _mm256_store_ps(d + 3 * kNR, r3);
          _mm256_store_ps(d + 4 * kNR, r4);
          _mm256_store_ps(d + 5 * kNR, r5);
          _mm256_store_ps(d + 6 * kNR, r6);
          _mm256_store_ps(d + 7 * kNR, r7);
        }
      }
      for (; p < kc; ++p) {
        float* d = panel + p * kNR + j0;
        for (std::int64_t j = 0; j < cols; ++j) d[j] = src[j * k + p];
        for (std::int64_t j = cols; j < 8; ++j) d[j] = 0.0f;
      }
    }
  }
}

// Packs x[m0 + i, pc + p] for i < mc into panels of kMR rows: dst[q * kc * kMR + p * kMR + ii],
// zero past mc.
void pack_x(const float* x, std::int64_t k, std::int64_t m0, std::int64_t mc, std::int64_t pc, std::int64_t kc,
            float* dst) {
  for (std::int64_t ip = 0; ip < mc; ip += kMR) {
    float* panel = dst + ip * kc;
    const std::int64_t rows = std::min(kMR, mc - ip);
    for (std::int64_t i = 0; i < kMR; ++i) {
      if (i < rows) {
        const float* src = x + (m0 + ip + i) * k + pc;
        for (std::int64_t p = 0; p < kc; ++p) panel[p * kMR + i] = src[p];
      } else {
        for (std::int64_t p = 0; p < kc; ++p) panel[p * kMR + i] = 0.0f;
      }
    }
  }
}

// c[6 x 16] (+)= a_panel^T @ b_panel over kc steps.
template <bool kAdd>
inline void micro_kernel(std::int64_t kc, const float* __restrict a, const float* __restrict b, float* c,
                         std::int64_t ldc) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (std::int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += kMR;
    b += kNR;
  }
  auto store = [&](float* row, __m256 lo, __m256 hi) {
    if constexpr (kAdd) {
      lo = _mm256_add_ps(_mm256_loadu_ps(row), lo);
      hi = _mm256_add_ps(_mm256_loadu_ps(row + 8), hi);
    }
    _mm256_storeu_ps(row, lo);
    _mm256_storeu_ps(row + 8, hi);
  };
  store(c + 0 * ldc, c00, c01);
  store(c + 1 * ldc, c10, c11);
  store(c + 2 * ldc, c20, c21);
  store(c + 3 * ldc, c30, c31);
  store(c + 4 * ldc, c40, c41);
  store(c + 5 * ldc, c50, c51);
}

// One task: y[m0:m1, n0:n1]. Loops from outside in: k blocks (pack w block once per k block),
// m blocks (pack x), w micro-panels, x micro-panels.
void gemm_task(const float* x, const float* w, float* y, std::int64_t m0, std::int64_t m1, std::int64_t n0,
               std::int64_t n1, std::int64_t n, std::int64_t k, bool accumulate) {
  thread_local AlignedBuffer x_buffer, w_buffer;
  const std::int64_t nc = n1 - n0;
  const std::int64_t nc_padded = (nc + kNR - 1) / kNR * kNR;
  float* packed_w = w_buffer.get(static_cast<std::size_t>(nc_padded * kKC));
  float* packed_x = x_buffer.get(static_cast<std::size_t>((kMC + kMR) * kKC));
  alignas(32) float edge[kMR * kNR];

  for (std::int64_t pc = 0; pc < k; pc += kKC) {
    const std::int64_t kc = std::min(kKC, k - pc);
    const bool add = accumulate || pc > 0;
    pack_w(w, k, n0, nc, pc, kc, packed_w);
    for (std::int64_t ic = m0; ic < m1; ic += kMC) {
      const std::int64_t mc = std::min(kMC, m1 - ic);
      pack_x(x, k, ic, mc, pc, kc, packed_x);
      for (std::int64_t jr = 0; jr < nc; jr += kNR) {
        const std::int64_t nr = std::min(kNR, nc - jr);
        const float* b = packed_w + jr * kc;
        for (std::int64_t ir = 0; ir < mc; ir += kMR) {
          const std::int64_t mr = std::min(kMR, mc - ir);
          const float* a = packed_x + ir * kc;
          float* c = y + (ic + ir) * n + n0 + jr;
          if (mr == kMR && nr == kNR) {
            if (add) {
              micro_kernel<true>(kc, a, b, c, n);
            } else {
              micro_kernel<false>(kc, a, b, c, n);
            }
          } else {
            micro_kernel<false>(kc, a, b, edge, kNR);
            for (std::int64_t i = 0; i < mr; ++i) {
              for (std::int64_t j = 0; j < nr; ++j) {
                c[i * n + j] = add ? c[i * n + j] + edge[i * kNR + j] : edge[i * kNR + j];
              }
            }
          }
        }
      }
    }
  }
}

void gemm(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n, std::int64_t k,
          bool accumulate) {
  ThreadPool& pool = ThreadPool::global();
  const std::int64_t threads = pool.size();
  std::int64_t m_blocks = (m + kMTask - 1) / kMTask;
  // Aim for about three tasks per thread so the dynamic scheduling can even out the tail, but keep
  // n blocks wide enough that the packed w block is reused over many micro-tiles.
  const std::int64_t n_blocks_wanted = std::max<std::int64_t>(1, (3 * threads + m_blocks - 1) / m_blocks);
  std::int64_t nc = (n + n_blocks_wanted - 1) / n_blocks_wanted;
  nc = std::clamp<std::int64_t>((nc + kNR - 1) / kNR * kNR, 4 * kNR, kNCMax);
  const std::int64_t n_blocks = (n + nc - 1) / nc;
  // A narrow y (n of one or two blocks: a 64-channel convolution, attention's P V) over a few
  // hundred rows would be two or three tasks: split m finer, down to 4 micro-tiles of rows a task
  // (the packed w block, n x 256 floats, is then re-packed per task: a few percent more work).
  if (m_blocks * n_blocks < 3 * threads) {
    const std::int64_t min_rows = 4 * kMR;
    const std::int64_t wanted = (3 * threads + n_blocks - 1) / n_blocks;
    m_blocks = std::max<std::int64_t>(m_blocks, std::min(wanted, (m + min_rows - 1) / min_rows));
  }
  const std::int64_t m_step = ((m + m_blocks - 1) / m_blocks + kMR - 1) / kMR * kMR;
  m_blocks = (m + m_step - 1) / m_step;
  const std::int64_t tasks = m_blocks * n_blocks;
  // Small problems are not worth waking the workers for.
  const std::int64_t grain = m * n * k < (std::int64_t{1} << 18) ? tasks : 1;
  pool.parallel_for(tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      const std::int64_t mb = t / n_blocks, nb = t % n_blocks;
      const std::int64_t m0 = mb * m_step, m1 = std::min(m, m0 + m_step);
      const std::int64_t n0 = nb * nc, n1 = std::min(n, n0 + nc);
      gemm_task(x, w, y, m0, m1, n0, n1, n, k, accumulate);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// GEMV path (m <= 4)

// y[i, j..j+NB) for all M rows of x: each w row is loaded once and used for all M rows.
template <int M, int NB>
inline void gemv_block(const float* x, const float* w, float* y, std::int64_t j, std::int64_t n, std::int64_t k,
                       bool accumulate) {
  __m256 acc[M][NB];
  for (int i = 0; i < M; ++i) {
    for (int b = 0; b < NB; ++b) acc[i][b] = _mm256_setzero_ps();
  }
  const float* wr = w + j * k;
  std::int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 wv[NB];
    for (int b = 0; b < NB; ++b) wv[b] = _mm256_loadu_ps(wr + b * k + p);
    for (int i = 0; i < M; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * k + p);
      for (int b = 0; b < NB; ++b) acc[i][b] = _mm256_fmadd_ps(xv, wv[b], acc[i][b]);
    }
  }
  if (p < k) {
    const __m256i mask = detail::tail_mask(k - p);
    __m256 wv[NB];
    for (int b = 0; b < NB; ++b) wv[b] = _mm256_maskload_ps(wr + b * k + p, mask);
    for (int i = 0; i < M; ++i) {
      const __m256 xv = _mm256_maskload_ps(x + i * k + p, mask);
      for (int b = 0; b < NB; ++b) acc[i][b] = _mm256_fmadd_ps(xv, wv[b], acc[i][b]);
    }
  }
  for (int i = 0; i < M; ++i) {
    for (int b = 0; b < NB; ++b) {
      const float s = detail::hsum(acc[i][b]);
      float& out = y[i * n + j + b];
      out = accumulate ? out + s : s;
    }
  }
}

template <int M>
void gemv(const float* x, const float* w, float* y, std::int64_t n, std::int64_t k, bool accumulate) {
  // Enough independent accumulators to hide FMA latency without spilling the 16 ymm registers.
  constexpr int kNB = M == 1 ? 8 : M == 2 ? 4 : M == 3 ? 4 : 3;
  // Each chunk streams at least ~128 KiB of w: less is not worth a thread hand-off.
  const std::int64_t grain = std::max<std::int64_t>(kNB, (std::int64_t{1} << 15) / std::max<std::int64_t>(1, k));
  ThreadPool::global().parallel_for(n, grain, [&](std::int64_t begin, std::int64_t end) {
    std::int64_t j = begin;
    for (; j + kNB <= end; j += kNB) gemv_block<M, kNB>(x, w, y, j, n, k, accumulate);
    for (; j < end; ++j) gemv_block<M, 1>(x, w, y, j, n, k, accumulate);
  });
}

template <int NB>
inline void gemv_rows_dispatch(std::int64_t rows, const float* x, const float* w, float* y, std::int64_t j,
                               std::int64_t n, std::int64_t k, bool accumulate) {
  switch (rows) {
    case 1: return gemv_block<1, NB>(x, w, y, j, n, k, accumulate);
    case 2: return gemv_block<2, NB>(x, w, y, j, n, k, accumulate);
    case 3: return gemv_block<3, NB>(x, w, y, j, n, k, accumulate);
    default: return gemv_block<4, NB>(x, w, y, j, n, k, accumulate);
  }
}

// A few rows more than the GEMV handles at once (short prompts): each block of 3 w rows (12 KiB
// at k = 1024) is read from memory once and reused from L1 for every group of 4 x rows, which
// beats packing w for the GEMM when there is too little m to amortize the packing.
void gemv_small_batch(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n, std::int64_t k,
                      bool accumulate) {
  constexpr std::int64_t kNB = 3;
  const std::int64_t grain = std::max<std::int64_t>(kNB, (std::int64_t{1} << 15) / std::max<std::int64_t>(1, k));
  ThreadPool::global().parallel_for(n, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; j += kNB) {
      const std::int64_t nb = std::min(kNB, end - j);
      for (std::int64_t i = 0; i < m; i += kGemvMaxRows) {
        const std::int64_t rows = std::min(kGemvMaxRows, m - i);
        if (nb == kNB) {
          gemv_rows_dispatch<kNB>(rows, x + i * k, w, y + i * n, j, n, k, accumulate);
        } else {
          for (std::int64_t jj = j; jj < j + nb; ++jj) {
            gemv_rows_dispatch<1>(rows, x + i * k, w, y + i * n, jj, n, k, accumulate);
          }
        }
      }
    }
  });
}

}  // namespace

void linear(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n, std::int64_t k,
            bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) std::fill(y, y + m * n, 0.0f);
    return;
  }
  if (m <= kGemvMaxRows) {
    switch (m) {
      case 1: return gemv<1>(x, w, y, n, k, accumulate);
      case 2: return gemv<2>(x, w, y, n, k, accumulate);
      case 3: return gemv<3>(x, w, y, n, k, accumulate);
      default: return gemv<4>(x, w, y, n, k, accumulate);
    }
  }
  if (m <= kSmallBatchMaxRows) return gemv_small_batch(x, w, y, m, n, k, accumulate);
  gemm(x, w, y, m, n, k, accumulate);
}

void linear_rows_invariant(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n,
                           std::int64_t k) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return std::fill(y, y + m * n, 0.0f);
  gemm(x, w, y, m, n, k, false);
}

#else  // portable

namespace {
// Rows of w per block: a block (kBlock * k floats, 16 KiB at k = 1024) stays in L1 while every row
// of x is dotted with it, so w streams from memory once whatever m is.
constexpr std::int64_t kBlock = 4;
}  // namespace

// Every element is one dot product whatever m is: already row-invariant.
void linear_rows_invariant(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n,
                           std::int64_t k) {
  linear(x, w, y, m, n, k, false);
}

void linear(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n, std::int64_t k,
            bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) std::fill(y, y + m * n, 0.0f);
    return;
  }
  const std::int64_t grain = std::max<std::int64_t>(kBlock, (std::int64_t{1} << 15) / k);
  ThreadPool::global().parallel_for(n, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j0 = begin; j0 < end; j0 += kBlock) {
      const std::int64_t j1 = std::min(end, j0 + kBlock);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = j0; j < j1; ++j) {
          const float s = detail::dot(x + i * k, w + j * k, k);
          float& out = y[i * n + j];
          out = accumulate ? out + s : s;
        }
      }
    }
  });
}

#endif
}  // namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS
