#pragma once
// Shared-memory tile layout and fragment loaders for the attention kernels.
//
// A tile row holds head_dim bf16 values = D/8 chunks of 16 bytes. Chunk c of row r is stored at
// chunk position c ^ (r & 7): the 8 rows an ldmatrix phase reads then hit 8 different 16-byte
// bank groups (no bank conflicts), and cp.async still writes whole 16-byte chunks. A row takes
// head_dim rounded up to 64 values in shared memory, so that the swizzle stays inside it: head_dim
// 96 has 12 chunks, and chunks 8..11 land on positions 8..15 of a 16-chunk row.
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

#include "device_utils.cuh"

namespace zoo::kernels::cuda::detail {

// Raises a kernel's dynamic shared-memory limit once per device, so that later launches (and
// graph captures) make no attribute calls.
template <class Kernel>
void allow_dynamic_smem(Kernel kernel, int bytes) {
  static std::mutex mutex;
  static std::set<std::pair<int, const void*>> done;
  const std::pair<int, const void*> key{current_device(), reinterpret_cast<const void*>(kernel)};
  std::lock_guard lock(mutex);
  if (done.count(key)) return;
  ZOO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.insert(key);
}

// Bytes of one tile row in shared memory (the swizzle above needs whole groups of 8 chunks).
template <int D>
constexpr int tile_row_bytes() {
  return (D + 63) / 64 * 64 * 2;
}

template <int D>
__device__ __forceinline__ std::uint32_t swz(int row, int chunk) {
  static_assert(D % 16 == 0, "the mma k-steps and the fragments need head_dim in multiples of 16");
  return static_cast<std::uint32_t>(row * tile_row_bytes<D>() + ((chunk ^ (row & 7)) << 4));
}

// Copies rows [row0, row0 + ROWS) of a strided global matrix (row r at g + r * stride) into a
// swizzled tile; rows at or past `limit` are zero-filled. Issued by NT threads, thread `tid`.
// Where position `row` of a sequence lives in the cache: the row itself (a contiguous cache), or
// through its page table (pages of kKvPageRows rows: vLLM-style paged KV).
constexpr std::int64_t kKvPageRows = 16;
__device__ __forceinline__ std::int64_t cache_row(std::int64_t row, const std::int32_t* pages) {
  return pages ? static_cast<std::int64_t>(pages[row / kKvPageRows]) * kKvPageRows + row % kKvPageRows : row;
}

template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_async(std::uint32_t tile, const bf16* g, std::int64_t stride,
                                                std::int64_t row0, std::int64_t limit, int tid,
                                                const std::int32_t* pages = nullptr) {
  constexpr int CH = D / 8;
  constexpr int TOTAL = ROWS * CH;
#pragma unroll
  for (int i = 0; i < (TOTAL + NT - 1) / NT; ++i) {
    const int idx = tid + i * NT;
    if (TOTAL % NT == 0 || idx < TOTAL) {
      const int r = idx / CH, c = idx % CH;
      const std::int64_t row = row0 + r;
      const bool ok = row < limit;
      const bf16* src = ok ? g + cache_row(row, pages) * stride + c * 8 : g;
      cp_async_16(tile + swz<D>(r, c), src, ok);
    }
  }
}

// A fragment (16 rows x 16 k) of a row-major tile: rows row0.., k chunk pair (2*ks, 2*ks+1).
template <int D>
__device__ __forceinline__ void load_a_frag(std::uint32_t (&a)[4], std::uint32_t tile, int row0, int ks, int lane) {
  ldmatrix_x4(a, tile + swz<D>(row0 + (lane & 15), 2 * ks + (lane >> 4)));
}

// B fragments for S = Q K^T from a K tile [keys][D]: keys key0..key0+15 (two n8 tiles), k-step
// ks. b[0], b[1] feed n-tile key0..+7; b[2], b[3] feed key0+8..+15.
template <int D>
__device__ __forceinline__ void load_k_frag(std::uint32_t (&b)[4], std::uint32_t tile, int key0, int ks, int lane) {
  const int m = lane >> 3;
  ldmatrix_x4(b, tile + swz<D>(key0 + ((m >> 1) << 3) + (lane & 7), 2 * ks + (m & 1)));
}

// B fragments for O = P V from a V tile [keys][D] (transposed load): keys key0..key0+15 (the k
// dimension), d chunks 2*dn and 2*dn+1 (two n8 tiles). b[0], b[1] feed d tile 2*dn; b[2], b[3]
// feed 2*dn+1.
template <int D>
__device__ __forceinline__ void load_v_frag(std::uint32_t (&b)[4], std::uint32_t tile, int key0, int dn, int lane) {
  const int m = lane >> 3;
  ldmatrix_x4_trans(b, tile + swz<D>(key0 + ((m & 1) << 3) + (lane & 7), 2 * dn + (m >> 1)));
}

// A raw score (q . k) in log2 units for the online softmax: scaled, soft-capped when softcap > 0
// (softcap * tanh(score * scale / softcap), as transformers' eager attention), or -inf when the
// key at kpos is masked for the query at qpos: past it (causal), at or past k_end, or before its
// window (window > 0).
__device__ __forceinline__ float masked_score(float s, std::int64_t kpos, std::int64_t qpos, std::int64_t k_end,
                                              float scale, float softcap, std::int64_t window) {
  if (kpos >= k_end || kpos > qpos || (window > 0 && kpos <= qpos - window)) return -INFINITY;
  constexpr float kLog2e = 1.4426950408889634f;
  if (softcap > 0.0f) return softcap * tanhf(s * scale / softcap) * kLog2e;
  return s * (scale * kLog2e);
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// One step of the online softmax for a warp's 16 x (NT8 * 8) score tile `s` (already scaled to
// log2 units, masked entries -inf): updates the running max m, the per-thread partial row sums
// l, rescales the output accumulators o, and leaves exp2(s - m) in s.
template <int NT8, int OT8>
__device__ __forceinline__ void online_softmax(float (&s)[NT8][4], float (&o)[OT8][4], float (&m)[2], float (&l)[2]) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < NT8; ++n) {
    mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mnew = fmaxf(m[h], quad_max(mx[h]));
    // While a row has seen only masked keys its max is -inf; shift by 0 then so that no
    // (-inf) - (-inf) appears. exp2(-inf) = 0 zeroes the old (empty) state.
    const float base = mnew == -INFINITY ? 0.0f : mnew;
    const float corr = exp2f(m[h] - base);
    m[h] = mnew;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < NT8; ++n) {
      s[n][2 * h] = exp2f(s[n][2 * h] - base);
      s[n][2 * h + 1] = exp2f(s[n][2 * h + 1] - base);
      sum += s[n][2 * h] + s[n][2 * h + 1];
    }
    l[h] = l[h] * corr + sum;
#pragma unroll
    for (int n = 0; n < OT8; ++n) {
      o[n][2 * h] *= corr;
      o[n][2 * h + 1] *= corr;
    }
  }
}

// O (16 x D) += P (16 x BC, from the score registers, rounded to bf16) @ V tile.
template <int D, int BC>
__device__ __forceinline__ void accumulate_pv(float (&o)[D / 8][4], const float (&s)[BC / 8][4], std::uint32_t v_tile,
                                              int lane) {
#pragma unroll
  for (int kk = 0; kk < BC / 16; ++kk) {
    std::uint32_t a[4];
    a[0] = pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
    a[1] = pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
    a[2] = pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[3] = pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
    for (int dn = 0; dn < D / 16; ++dn) {
      std::uint32_t b[4];
      load_v_frag<D>(b, v_tile, kk * 16, dn, lane);
      mma_bf16_16816(o[2 * dn], a, b[0], b[1]);
      mma_bf16_16816(o[2 * dn + 1], a, b[2], b[3]);
    }
  }
}

// S (16 x BC) = Q (16 x D; fragments in registers or loaded from the Q tile) @ K tile^T.
template <int D, int BC, bool Q_REGS>
__device__ __forceinline__ void compute_scores(float (&s)[BC / 8][4], const std::uint32_t (&qf)[Q_REGS ? D / 16 : 1][4],
                                               std::uint32_t q_tile, int q_row0, std::uint32_t k_tile, int lane) {
#pragma unroll
  for (int n = 0; n < BC / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    std::uint32_t a[4];
    if constexpr (Q_REGS) {
      a[0] = qf[ks][0];
      a[1] = qf[ks][1];
      a[2] = qf[ks][2];
      a[3] = qf[ks][3];
    } else {
      load_a_frag<D>(a, q_tile, q_row0, ks, lane);
    }
#pragma unroll
    for (int nb = 0; nb < BC / 16; ++nb) {
      std::uint32_t b[4];
      load_k_frag<D>(b, k_tile, nb * 16, ks, lane);
      mma_bf16_16816(s[2 * nb], a, b[0], b[1]);
      mma_bf16_16816(s[2 * nb + 1], a, b[2], b[3]);
    }
  }
}

}  // namespace zoo::kernels::cuda::detail
