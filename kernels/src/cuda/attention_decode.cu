// Decode attention (flash-decoding): grid (kv head, split of the sequence, group of 16 query
// rows). The query rows of a block are all (query token, query head) pairs that share the kv
// head, so the tensor cores process the whole GQA group against each K/V tile read once. Each
// warp streams its own key tiles through private shared memory with its own online softmax;
// the warps' states are merged in shared memory, and the splits by their log-sum-exp.
//
// Split policies (policy_from_env says which runs when). Short grids: the split length is
// derived on the device from the true length (a graph captured for a 1024-key bucket spreads 513
// keys over all the splits it has rather than over the first few), splits are as short as one tile
// per warp, and the splits of a (kv head, row group), at most 8, form a thread-block cluster that
// merges them through distributed shared memory: one launch, no global round trip (the previous
// form, the last block to finish merging through global memory after an atomic ticket, remains as
// ZOO_DECODE_ATTN=1). Long grids: splits of at least two tiles per warp sized on the host from the
// grid's length, merged by a second kernel.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "attention_common.cuh"
#include "launch.cuh"
#include "zoo/kernels/cuda/attention.hpp"

namespace zoo::kernels::cuda {
namespace {
using namespace detail;

constexpr int kDecodeWarps = 4;
constexpr int kMaxSplits = 128;
constexpr int kMaxClusterSplits = 8;  // the portable cluster size

struct DecodeParams {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  bf16* out;
  float* part_o;    // [splits, q_tokens * q_heads, D]
  float* part_lse;  // [splits, q_tokens * q_heads], log2 units
  int* tickets;      // [kv_heads * row_groups], zero between calls
  const std::int32_t* kv_len_device;
  std::int64_t kv_len;
  std::int64_t chunk;  // keys per split (legacy policy only)
  int splits;          // grid.y
  int step;            // keys of one pass of all warps (kDecodeWarps * KT)
  bool legacy;         // ZOO_DECODE_ATTN=0: host-side chunks, a second kernel merges the splits
  int min_tiles;       // tiles per warp in the shortest split
  int q_tokens, q_heads, kv_heads, group;
  float scale_log2;
  float scale, softcap;
  std::int64_t window;
  // A batch of sequences (grid.z = batch * row_groups): sequence b's queries and outputs follow
  // sequence b - 1's, its length is kv_len_device[b], its keys sit in the pages of row b of
  // page_table (null: one contiguous cache).
  const std::int32_t* page_table;
  std::int64_t page_stride;
  int batch, row_groups;
};

template <int D, int KT>
struct DecodeConfig {
  static constexpr int kThreads = 32 * kDecodeWarps;
  static constexpr int kQBytes = 16 * tile_row_bytes<D>();
  static constexpr int kTileBytes = KT * tile_row_bytes<D>();
  static constexpr int kWarpBytes = 2 * kTileBytes;  // K and V tiles of one warp
  static constexpr int kLoopSmem = kQBytes + kDecodeWarps * kWarpBytes;
  // Merge: each warp's O (16 x D float32), row max and row sum.
  static constexpr int kMergeSmem = kDecodeWarps * 16 * (D + 2) * 4;
  static constexpr int kBaseSmem = kLoopSmem > kMergeSmem ? kLoopSmem : kMergeSmem;
  // Cluster merge: the block's normalized O (16 x D float32) and log-sum-exps, read by its peers.
  static constexpr int kClusterSmem = 16 * (D + 1) * 4;
  // Only the cluster kernel carries the cluster's slice: without it a block of head_dim 128 takes
  // 68 KB, so three blocks (twelve warps) fit an SM instead of two.
  template <bool CLUSTER>
  static constexpr int smem() {
    return kBaseSmem + (CLUSTER ? kClusterSmem : 0);
  }
};

// The splits of one (kv head, row group) form a thread-block cluster (the short-grid policy): each
// block leaves its normalized O and log-sum-exp per row in its own shared memory, and after a
// cluster barrier every block merges a 1/cluster slice of the head dimension from its peers'
// shared memory (a cluster of 2..8 blocks, e.g. 6 for 700 keys). No global round trip, fence or
// ticket; the second barrier keeps every block's shared memory alive until its peers are done
// reading it.
template <int D>
__device__ __forceinline__ void cluster_merge(const float* s_out, const float* s_lse, int rows_here, int row_group,
                                              int kv_head, const DecodeParams& p, int threads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Clusters need sm_90. The host launches the cluster kernels only where hopper_paths() holds, so
  // the images for Ampere and Ada never reach this; a launch that did would stop here, loudly.
  __trap();
#else
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  // The peers' log-sum-exps, gathered once per row into local shared memory: remote reads are
  // ~200 cycles each, so every one that can be in flight at the same time is.
  __shared__ float s_peer_lse[16][kMaxClusterSplits];
  cluster.sync();
  const int size = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  for (int i = threadIdx.x; i < rows_here * size; i += threads)
    s_peer_lse[i / size][i % size] = cluster.map_shared_rank(s_lse, i % size)[i / size];
  __syncthreads();
  const int dims = (D + size - 1) / size;  // the last slice is short when size does not divide D
  for (int idx = threadIdx.x; idx < rows_here * dims; idx += threads) {
    const int r = idx / dims, d = rank * dims + idx % dims;
    if (d >= D) continue;
    float mx = -INFINITY;
    for (int b = 0; b < size; ++b) mx = fmaxf(mx, s_peer_lse[r][b]);
    const float base = mx == -INFINITY ? 0.0f : mx;
    // All remote values first (independent loads), then the sum in peer order. A peer with no
    // mass (an idle split) is skipped: its output was never written.
    float f[kMaxClusterSplits], x[kMaxClusterSplits];
#pragma unroll
    for (int b = 0; b < kMaxClusterSplits; ++b) {
      f[b] = b < size ? exp2f(s_peer_lse[r][b] - base) : 0.0f;
      x[b] = f[b] > 0.0f ? cluster.map_shared_rank(s_out, b)[r * D + d] : 0.0f;
    }
    float acc = 0.0f, sum = 0.0f;
#pragma unroll
    for (int b = 0; b < kMaxClusterSplits; ++b) {
      if (f[b] > 0.0f) {
        acc += f[b] * x[b];
        sum += f[b];
      }
    }
    const int row = row_group * 16 + r;
    const std::int64_t qrow =
        static_cast<std::int64_t>(row % p.q_tokens) * p.q_heads + kv_head * p.group + row / p.q_tokens;
    p.out[qrow * D + d] = to_bf16(sum > 0.0f ? acc / sum : 0.0f);
  }
  cluster.sync();
#endif
}

// Rows row0 .. row0 + ROWS of a K or V tile: rows in [lo, hi) are copied; rows at or past `limit`
// are zero-filled when `zero_fill` (a masked key's V row must not be garbage: 0 * NaN is NaN);
// other rows are left alone (another call fills them, so no address gets two copies in flight).
template <int ROWS, int D, int NT>
__device__ __forceinline__ void load_tile_rows(std::uint32_t tile, const bf16* g, std::int64_t stride,
                                               std::int64_t row0, std::int64_t lo, std::int64_t hi,
                                               std::int64_t limit, bool zero_fill, int tid, const std::int32_t* pages) {
  constexpr int CH = D / 8;
  constexpr int TOTAL = ROWS * CH;
#pragma unroll
  for (int i = 0; i < (TOTAL + NT - 1) / NT; ++i) {
    const int idx = tid + i * NT;
    if (TOTAL % NT == 0 || idx < TOTAL) {
      const int r = idx / CH, c = idx % CH;
      const std::int64_t row = row0 + r;
      if (row >= limit) {
        if (zero_fill) cp_async_16(tile + swz<D>(r, c), g, false);
      } else if (row >= lo && row < hi) {
        cp_async_16(tile + swz<D>(r, c), g + cache_row(row, pages) * stride + c * 8, true);
      }
    }
  }
}

// MASKED: a window or soft-cap (masked_score); off, the plain causal path compiles as it did
// before they existed.
template <int D, int KT, bool Q_REGS, bool CLUSTER, bool MASKED, bool PIPE>
__global__ void __launch_bounds__(32 * kDecodeWarps) attention_decode_kernel(DecodeParams p) {
  using Cfg = DecodeConfig<D, KT>;
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t sQ = smem_addr(smem);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const std::uint32_t sK = sQ + Cfg::kQBytes + warp * Cfg::kWarpBytes;
  const std::uint32_t sV = sK + Cfg::kTileBytes;

  const int kv_head = blockIdx.x, split = blockIdx.y, row_group = blockIdx.z % p.row_groups;
  // This block's sequence of the batch: its rows, partial results, length and pages.
  const int b = blockIdx.z / p.row_groups;
  const std::int64_t seq_rows = static_cast<std::int64_t>(p.q_tokens) * p.q_heads;
  p.q += b * seq_rows * D;
  p.out += b * seq_rows * D;
  p.part_o += b * seq_rows * D;
  p.part_lse += b * seq_rows;
  if (p.kv_len_device) p.kv_len_device += b;
  const std::int32_t* pages = p.page_table ? p.page_table + b * p.page_stride : nullptr;
  const int rows = p.group * p.q_tokens;  // row r: head kv_head * group + r / q_tokens, token r % q_tokens
  const int rows_here = min(16, rows - row_group * 16);
  float* s_cluster_out = reinterpret_cast<float*>(smem + Cfg::kBaseSmem);  // [16][D]
  float* s_cluster_lse = s_cluster_out + 16 * D;                           // [16]

  // A PDL link of the decode chain (launch.cuh). Before the wait: the length (written before the
  // step's first kernel) and this warp's first K/V tile up to the keys of earlier steps, which no
  // kernel of this step writes; the step's own keys and Q come from the previous kernel.
  allow_dependent_launch();
  const std::int64_t L = p.kv_len_device ? static_cast<std::int64_t>(*p.kv_len_device) : p.kv_len;
  // The first key any query of the step sees: 0, or with a window the oldest key of the first
  // query's window (down to a page boundary); keys before it are never read.
  std::int64_t k_lo = 0;
  if constexpr (MASKED) {
    if (p.window > 0) k_lo = max(std::int64_t{0}, L - p.q_tokens - p.window + 1) & ~std::int64_t{15};
  }
  std::int64_t chunk = p.chunk;
  int active = p.splits;
  if (!p.legacy) {
    // Split length from the true length: whole passes of all warps, as few splits as cover L.
    const std::int64_t per = (L - k_lo + p.splits - 1) / p.splits;
    chunk = (per + p.step - 1) / p.step * p.step;
    active = static_cast<int>((L - k_lo + chunk - 1) / chunk);
    if (split >= active) {  // past the end: the whole block idles (uniform, before any barrier)
      grid_dependency_wait();
      if constexpr (CLUSTER) {
        if (active > 1) {  // still a member of the cluster's merge, with nothing to add
          if (threadIdx.x < 16) s_cluster_lse[threadIdx.x] = -INFINITY;
          cluster_merge<D>(s_cluster_out, s_cluster_lse, rows_here, row_group, kv_head, p, Cfg::kThreads);
        }
      }
      return;
    }
  }
  const std::int64_t k_begin = k_lo + static_cast<std::int64_t>(split) * chunk;
  const std::int64_t k_end = k_begin + chunk < L ? k_begin + chunk : L;
  const bf16* kg = p.k + static_cast<std::int64_t>(kv_head) * D;
  const bf16* vg = p.v + static_cast<std::int64_t>(kv_head) * D;
  const std::int64_t stride = static_cast<std::int64_t>(p.kv_heads) * D;
  const std::int64_t k_first = k_begin + warp * KT;
  const std::int64_t settled = L - p.q_tokens;  // keys [0, settled) were written by earlier steps
  if (k_first < k_end) {
    load_tile_rows<KT, D, 32>(sK, kg, stride, k_first, k_first, settled, k_end, true, lane, pages);
    load_tile_rows<KT, D, 32>(sV, vg, stride, k_first, k_first, settled, k_end, true, lane, pages);
  }
  cp_async_commit();
  grid_dependency_wait();

  // Query rows -> Q tile (rows past `rows` are zero), and the rest of the first K/V tile.
  for (int idx = tid; idx < 16 * (D / 8); idx += Cfg::kThreads) {
    const int r = idx / (D / 8), c = idx % (D / 8);
    const int row = row_group * 16 + r;
    const bool ok = row < rows;
    const int head = kv_head * p.group + (ok ? row / p.q_tokens : 0);
    const int token = ok ? row % p.q_tokens : 0;
    const bf16* src = p.q + (static_cast<std::int64_t>(token) * p.q_heads + head) * D + c * 8;
    cp_async_16(sQ + swz<D>(r, c), src, ok);
  }
  if (k_first < k_end && k_first + KT > settled) {
    load_tile_rows<KT, D, 32>(sK, kg, stride, k_first, settled, k_end, k_end, false, lane, pages);
    load_tile_rows<KT, D, 32>(sV, vg, stride, k_first, settled, k_end, k_end, false, lane, pages);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  std::uint32_t qf[Q_REGS ? D / 16 : 1][4];
  if constexpr (Q_REGS) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) load_a_frag<D>(qf[ks], sQ, 0, ks, lane);
  }
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  std::int64_t qpos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_group * 16 + (lane >> 2) + 8 * h;
    qpos[h] = row < rows ? L - p.q_tokens + row % p.q_tokens : L - 1;
  }

  // Each warp streams its tiles: K(i) and V(i) are requested together, the scores wait for K(i),
  // the products for V(i). PIPE: the next K tile is requested as soon as this one's scores are
  // taken and the next V tile as soon as this one's products are, so each tile's memory round trip
  // overlaps the other's math; the copy groups then go K(i), V(i), K(i+1), V(i+1), ... (empty
  // past the end), and waiting for all but the newest group gives the tile needed next. It also
  // compiles to fewer registers (ptxas, sm_90a, head_dim 128: 168 against 225), so that three
  // blocks fit an SM instead of two.
  const std::int64_t warp_step = kDecodeWarps * KT;
  for (std::int64_t k0 = k_first; k0 < k_end; k0 += warp_step) {
    const std::int64_t k_next = k0 + warp_step;
    if constexpr (!PIPE) {
      if (k0 != k_first) {
        load_tile_async<KT, D, 32>(sK, kg, stride, k0, k_end, lane, pages);
        cp_async_commit();
        load_tile_async<KT, D, 32>(sV, vg, stride, k0, k_end, lane, pages);
        cp_async_commit();
      }
    }
    cp_async_wait<1>();  // K(k0) (the first tile: already waited for above)
    __syncwarp();
    float s[KT / 8][4];
    compute_scores<D, KT, Q_REGS>(s, qf, sQ, 0, sK, lane);
    if constexpr (PIPE) {
      __syncwarp();  // every lane has read sK
      if (k_next < k_end) load_tile_async<KT, D, 32>(sK, kg, stride, k_next, k_end, lane, pages);
      cp_async_commit();
    }
#pragma unroll
    for (int n = 0; n < KT / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t kpos = k0 + n * 8 + 2 * (lane & 3) + (e & 1);
        if constexpr (MASKED)
          s[n][e] = masked_score(s[n][e], kpos, qpos[e >> 1], k_end, p.scale, p.softcap, p.window);
        else
          s[n][e] = (kpos >= k_end || kpos > qpos[e >> 1]) ? -INFINITY : s[n][e] * p.scale_log2;
      }
    }
    online_softmax<KT / 8, D / 8>(s, o, m, l);
    if constexpr (PIPE)
      cp_async_wait<1>();  // V(k0); K(k_next) may still be on its way
    else
      cp_async_wait<0>();
    __syncwarp();
    accumulate_pv<D, KT>(o, s, sV, lane);
    __syncwarp();  // every lane has read sV (the next copies overwrite this warp's tiles)
    if constexpr (PIPE) {
      if (k_next < k_end) load_tile_async<KT, D, 32>(sV, vg, stride, k_next, k_end, lane, pages);
      cp_async_commit();
    }
  }

  // Merge the warps: stage each warp's state in shared memory (reusing the tiles).
  __syncthreads();
  float* sO = reinterpret_cast<float*>(smem);                    // [warps][16][D]
  float* sM = sO + kDecodeWarps * 16 * D;                         // [warps][16]
  float* sL = sM + kDecodeWarps * 16;                             // [warps][16]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = (lane >> 2) + 8 * h;
    const float total = quad_sum(l[h]);
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const int c = n * 8 + 2 * (lane & 3);
      sO[(warp * 16 + r) * D + c] = o[n][2 * h];
      sO[(warp * 16 + r) * D + c + 1] = o[n][2 * h + 1];
    }
    if ((lane & 3) == 0) {
      sM[warp * 16 + r] = m[h];
      sL[warp * 16 + r] = total;
    }
  }
  __syncthreads();
  for (int idx = tid; idx < rows_here * D; idx += Cfg::kThreads) {
    const int r = idx / D, d = idx % D;
    const int row = row_group * 16 + r;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, sM[w * 16 + r]);
    const float base = mx == -INFINITY ? 0.0f : mx;
    float acc = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float f = exp2f(sM[w * 16 + r] - base);
      acc += f * sO[(w * 16 + r) * D + d];
      sum += f * sL[w * 16 + r];
    }
    const int head = kv_head * p.group + row / p.q_tokens;
    const int token = row % p.q_tokens;
    const std::int64_t qrow = static_cast<std::int64_t>(token) * p.q_heads + head;
    const float value = sum > 0.0f ? acc / sum : 0.0f;
    if (active == 1) {
      p.out[qrow * D + d] = to_bf16(value);
    } else if constexpr (CLUSTER) {
      s_cluster_out[r * D + d] = value;
      if (d == 0) s_cluster_lse[r] = sum > 0.0f ? base + log2f(sum) : -INFINITY;
    } else {
      const std::int64_t prow = static_cast<std::int64_t>(split) * p.batch * seq_rows + qrow;
      p.part_o[prow * D + d] = value;
      if (d == 0) p.part_lse[prow] = sum > 0.0f ? base + log2f(sum) : -INFINITY;
    }
  }
  if (p.legacy || active == 1) return;
  if constexpr (CLUSTER) {
    cluster_merge<D>(s_cluster_out, s_cluster_lse, rows_here, row_group, kv_head, p, Cfg::kThreads);
    return;
  }

  // The last block of this (kv head, row group) merges the splits. Its partials were written by
  // other SMs: the fence before the ticket publishes ours, and the merge reads through L2 (ldcg).
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    int* ticket = p.tickets + kv_head * gridDim.z + blockIdx.z;
    last = atomicAdd(ticket, 1) == active - 1;
    if (last) *ticket = 0;  // ready for the next call (graph replays included)
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Each row's split weights exp2(lse_s - max) / sum first (in the freed shared memory), then every
  // output element sums its splits with independent loads.
  // Partials are [split][batch][rows of a sequence]; p.part_* already point at this sequence's.
  const std::int64_t rows_per_split = static_cast<std::int64_t>(p.batch) * seq_rows;
  float* sW = reinterpret_cast<float*>(smem);  // [rows_here][active] <= 16 x kMaxSplits floats
  auto qrow_of = [&](int r) {
    const int row = row_group * 16 + r;
    return static_cast<std::int64_t>(row % p.q_tokens) * p.q_heads + kv_head * p.group + row / p.q_tokens;
  };
  for (int i = tid; i < rows_here * active; i += Cfg::kThreads) {
    const int r = i / active, sp = i % active;
    sW[i] = __ldcg(p.part_lse + sp * rows_per_split + qrow_of(r));
  }
  __syncthreads();
  if (tid < rows_here) {
    float* w = sW + tid * active;
    float mx = -INFINITY;
    for (int sp = 0; sp < active; ++sp) mx = fmaxf(mx, w[sp]);
    const float base = mx == -INFINITY ? 0.0f : mx;
    float sum = 0.0f;
    for (int sp = 0; sp < active; ++sp) {
      w[sp] = exp2f(w[sp] - base);
      sum += w[sp];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int sp = 0; sp < active; ++sp) w[sp] *= inv;
  }
  __syncthreads();
  for (int idx = tid; idx < rows_here * D; idx += Cfg::kThreads) {
    const int r = idx / D, d = idx % D;
    const std::int64_t qrow = qrow_of(r);
    const float* w = sW + r * active;
    const float* src = p.part_o + qrow * D + d;
    float acc = 0.0f;
#pragma unroll 4
    for (int sp = 0; sp < active; ++sp) acc += w[sp] * __ldcg(src + sp * rows_per_split * D);
    p.out[qrow * D + d] = to_bf16(acc);
  }
}

// One block per (token, query head): weights each split's normalized output by its share of
// the total softmax mass.
template <int D>
__global__ void __launch_bounds__(D) attention_decode_combine_kernel(DecodeParams p) {
  const std::int64_t seq_rows = static_cast<std::int64_t>(p.q_tokens) * p.q_heads;
  const std::int64_t rows_per_split = static_cast<std::int64_t>(p.batch) * seq_rows;  // [split][batch][rows]
  // Sequence b's partials and outputs follow sequence b - 1's (as in the main kernel).
  const std::int64_t b = blockIdx.x / seq_rows, qrow = blockIdx.x % seq_rows;
  p.out += b * seq_rows * D;
  p.part_o += b * seq_rows * D;
  p.part_lse += b * seq_rows;
  float mx = -INFINITY;
  for (int s = 0; s < p.splits; ++s) mx = fmaxf(mx, p.part_lse[s * rows_per_split + qrow]);
  const float base = mx == -INFINITY ? 0.0f : mx;
  float acc = 0.0f, sum = 0.0f;
  for (int s = 0; s < p.splits; ++s) {
    const float f = exp2f(p.part_lse[s * rows_per_split + qrow] - base);
    if (f > 0.0f) {
      acc += f * p.part_o[(s * rows_per_split + qrow) * D + threadIdx.x];
      sum += f;
    }
  }
  p.out[qrow * D + threadIdx.x] = to_bf16(sum > 0.0f ? acc / sum : 0.0f);
}

// The most keys one call reads per sequence: the bound on the lengths, or with a window what the
// step's queries see of it (the kernel starts at the first query's window, down to a page).
std::int64_t key_span(const DecodeParams& p) {
  if (p.window <= 0) return p.kv_len;
  return std::min(p.kv_len, p.window + p.q_tokens - 1 + 15);
}

// How many of `kernel` the device runs at once at `smem` bytes of dynamic shared memory (registers
// and shared memory both count): blocks per SM (cluster 0, at least 1), or clusters of `cluster`
// blocks on the whole device. Asked once per kernel, cluster size and device.
int occupancy(void (*kernel)(DecodeParams), int smem, int cluster = 0) {
  static std::mutex mutex;
  static std::map<std::tuple<int, const void*, int>, int> known;
  const std::tuple<int, const void*, int> key{current_device(), reinterpret_cast<const void*>(kernel),
                                              cluster};
  std::lock_guard lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int n = 0;
  if (cluster == 0) {
    ZOO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, 32 * kDecodeWarps, smem));
    n = std::max(n, 1);
  } else {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim = {1, static_cast<unsigned>(cluster), 1};
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(1, static_cast<unsigned>(cluster), 1);
    config.blockDim = dim3(32 * kDecodeWarps);
    config.dynamicSmemBytes = static_cast<std::size_t>(smem);
    config.attrs = &attribute;
    config.numAttrs = 1;
    ZOO_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, kernel, &config));
  }
  return known[key] = n;
}

// ZOO_DECODE_PIPE (read per call): unset, the pipelined loop runs where the rule below picks it;
// 0 never; 1 in every launch without a cluster (for tests and A/B runs).
int pipe_from_env() {
  return static_cast<int>(env_int("ZOO_DECODE_PIPE", 0, 1).value_or(-1));
}

template <int D, int KT, bool Q_REGS, bool MASKED>
void launch_decode_variant(DecodeParams p, bool cluster, int row_groups, cudaStream_t stream) {
  using Cfg = DecodeConfig<D, KT>;
  // Splits: enough blocks for about two waves, but no split shorter than one tile per warp (the
  // legacy policy: two), so that short contexts still spread over many SMs.
  const int sms = device_properties().multiprocessors;
  const std::int64_t base_blocks = static_cast<std::int64_t>(p.kv_heads) * row_groups * p.batch;
  const std::int64_t target = std::max<std::int64_t>(1, (2 * sms + base_blocks - 1) / base_blocks);
  const std::int64_t step = kDecodeWarps * KT;
  const std::int64_t min_chunk = std::max(1, p.min_tiles) * step;
  const std::int64_t span = key_span(p);
  std::int64_t splits = std::min<std::int64_t>(target, (span + min_chunk - 1) / min_chunk);
  splits = std::clamp<std::int64_t>(splits, 1, cluster ? kMaxClusterSplits : kMaxSplits);
  p.step = static_cast<int>(step);
  p.chunk = ((span + splits - 1) / splits + step - 1) / step * step;
  p.splits = p.legacy ? static_cast<int>((span + p.chunk - 1) / p.chunk) : static_cast<int>(splits);

  const dim3 grid(static_cast<unsigned>(p.kv_heads), static_cast<unsigned>(p.splits),
                  static_cast<unsigned>(row_groups * p.batch));
  // One split needs no merge: the plain kernel, with less shared memory (more blocks per SM). Many
  // clusters (MHA's 32 kv heads, batches) merge by ticket instead: a cluster starts only once
  // `splits` SMs of one GPC have room at the same time, and with more clusters than half of what
  // the device holds at once that wait cost more than the merge saves (H200, one sequence at 512
  // keys: 32 clusters of 8 took 18.1 us against 10.0 by ticket; 8 clusters 8.2 against 10.2).
  auto cluster_kernel = attention_decode_kernel<D, KT, Q_REGS, true, MASKED, false>;
  constexpr int cluster_smem = Cfg::template smem<true>();
  if (cluster && p.splits > 1) allow_dynamic_smem(cluster_kernel, cluster_smem);
  // base_blocks: one cluster per (kv head, row group, sequence).
  if (cluster && p.splits > 1 && 2 * base_blocks <= occupancy(cluster_kernel, cluster_smem, p.splits)) {
    launch_pdl_cluster(cluster_kernel, grid, Cfg::kThreads, cluster_smem, stream,
                       dim3(1, static_cast<unsigned>(p.splits), 1), p);
  } else {
    constexpr int smem = Cfg::template smem<false>();
    auto plain = attention_decode_kernel<D, KT, Q_REGS, false, MASKED, false>;
    auto piped = attention_decode_kernel<D, KT, Q_REGS, false, MASKED, true>;
    allow_dynamic_smem(plain, smem);
    allow_dynamic_smem(piped, smem);
    // The pipelined loop fits more blocks on an SM (head_dim 128: 3 instead of 2, by registers),
    // but each wave of blocks runs ~9% longer (H200, batch 64 and 256 at 512 keys: 30 against
    // 27.5 us). It pays where it saves whole waves: batch 256 (8 waves -> 6: 217 -> 184 us per
    // call), and the ticket-merged split grids of batches of 8 and 16 (2 waves -> 1: 23.0 -> 15.1
    // and 31.5 -> 21.9 us), not batch 64 (2 waves either way).
    const std::int64_t blocks = static_cast<std::int64_t>(grid.x) * grid.y * grid.z;
    const auto waves = [&](auto kernel) {
      const std::int64_t slots = static_cast<std::int64_t>(sms) * occupancy(kernel, smem);
      return (blocks + slots - 1) / slots;
    };
    const int forced = pipe_from_env();
    const bool pipe = forced >= 0 ? forced == 1 : waves(piped) * 109 < waves(plain) * 100;
    launch_pdl(pipe ? piped : plain, grid, Cfg::kThreads, smem, stream, p);
  }
  if (p.legacy && p.splits > 1) {
    attention_decode_combine_kernel<D>
        <<<static_cast<unsigned>(p.batch * p.q_tokens * p.q_heads), D, 0, stream>>>(p);
    ZOO_CUDA_CHECK_LAUNCH();
  }
}

template <int D, int KT, bool Q_REGS>
void launch_decode(DecodeParams p, bool cluster, int row_groups, cudaStream_t stream) {
  if (p.softcap > 0.0f || p.window > 0) return launch_decode_variant<D, KT, Q_REGS, true>(p, cluster, row_groups, stream);
  launch_decode_variant<D, KT, Q_REGS, false>(p, cluster, row_groups, stream);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<std::uintptr_t>(ptr) & 15u) == 0; }

// ZOO_DECODE_ATTN (read per call; graphs keep what they captured) overrides the policy for the
// benchmarks: 0 is the previous one everywhere (splits sized on the host from the grid's length, at
// least two tiles per warp, a second kernel merging them); N >= 1 is the device-sized splits of at
// least N tiles per warp, merged in the same launch by the last block (ticket), everywhere. Unset
// (-1): the device-sized splits with one tile per warp merged in a cluster up to kShortGrid keys,
// the previous policy beyond. Measured on the
// H200 (docs/performance.md): the kernel is latency-bound, and the device-sized splits gain ~0.5 us
// per call at 540-1000 keys but lose 2-7 us at 4000-16000 keys, where the merge in the last block
// costs more than the second kernel.
constexpr std::int64_t kShortGrid = 1024;
int policy_from_env() {
  return static_cast<int>(env_int("ZOO_DECODE_ATTN", 0, 64).value_or(-1));
}

std::size_t partial_floats(int q_tokens, int q_heads, int head_dim) {
  return static_cast<std::size_t>(kMaxSplits) * q_tokens * q_heads * (head_dim + 1);
}

}  // namespace

std::size_t decode_attention_workspace_bytes(int q_tokens, int q_heads, int head_dim) {
  if (q_tokens <= 0 || q_heads <= 0 || head_dim <= 0) return 0;
  // Partial outputs and log-sum-exps, then (at the end) one ticket per (kv head, row group), at
  // most q_tokens * q_heads of them.
  return partial_floats(q_tokens, q_heads, head_dim) * sizeof(float) +
         static_cast<std::size_t>(q_tokens) * q_heads * sizeof(int);
}

void attention_decode(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (a.q_tokens <= 0 || a.kv_len < a.q_tokens || a.q_heads <= 0 || a.kv_heads <= 0 || a.q_heads % a.kv_heads != 0)
    throw std::invalid_argument(
        "attention_decode: bad shape (need q_tokens >= 1, kv_len >= q_tokens, q_heads a multiple of kv_heads)");
  if (a.head_dim != 64 && a.head_dim != 96 && a.head_dim != 128 && a.head_dim != 256)
    throw std::invalid_argument("attention_decode: head_dim " + std::to_string(a.head_dim) +
                                " not supported (64, 96, 128, 256)");
  if (!a.q || !a.k_cache || !a.v_cache || !a.out) throw std::invalid_argument("attention_decode: missing pointer");
  if (!aligned16(a.q) || !aligned16(a.k_cache) || !aligned16(a.v_cache) || !aligned16(a.out))
    throw std::invalid_argument("attention_decode: pointers must be 16-byte aligned");
  if (a.batch < 1 || (a.batch > 1 && !a.kv_len_device) || (a.page_table && a.page_stride <= 0))
    throw std::invalid_argument("attention_decode: a batch needs its lengths on the device, pages a positive stride");
  const std::size_t need = decode_attention_workspace_bytes(a.batch * a.q_tokens, a.q_heads, a.head_dim);
  if (!a.workspace || a.workspace_bytes < need)
    throw std::invalid_argument("attention_decode: workspace of " + std::to_string(need) + " bytes required");
  DecodeParams p{};
  p.q = dev(a.q);
  p.k = dev(a.k_cache);
  p.v = dev(a.v_cache);
  p.out = dev(a.out);
  p.part_o = static_cast<float*>(a.workspace);
  p.part_lse = p.part_o + static_cast<std::size_t>(kMaxSplits) * a.batch * a.q_tokens * a.q_heads * a.head_dim;
  // The tickets sit at the workspace's end, where no call sharing the workspace (each sized at most
  // as large as the workspace allows) puts partial results: they stay zero between calls.
  p.tickets = reinterpret_cast<int*>(static_cast<char*>(a.workspace) + (a.workspace_bytes & ~std::size_t{3})) -
              static_cast<std::ptrdiff_t>(a.batch) * a.q_tokens * a.q_heads;
  const int policy = policy_from_env();
  p.window = a.window;
  p.q_tokens = a.q_tokens;
  p.kv_len = a.kv_len;
  p.legacy = policy == 0 || (policy < 0 && key_span(p) > kShortGrid);
  p.min_tiles = p.legacy ? 2 : std::max(policy, 1);
  // Unset: the short grids merge their splits inside a thread-block cluster where the device has
  // them (sm_90+), else by the last block's ticket (the policy of ZOO_DECODE_ATTN=1).
  const bool cluster = policy < 0 && !p.legacy && hopper_paths();
  p.kv_len_device = a.kv_len_device;
  p.q_heads = a.q_heads;
  p.kv_heads = a.kv_heads;
  p.group = a.q_heads / a.kv_heads;
  p.scale_log2 = attention_scale(a.scale, a.head_dim) * 1.4426950408889634f;
  p.scale = attention_scale(a.scale, a.head_dim);
  p.softcap = a.softcap;
  const int row_groups = (p.group * a.q_tokens + 15) / 16;
  p.batch = a.batch;
  p.row_groups = row_groups;
  p.page_table = a.page_table;
  p.page_stride = a.page_stride;
  switch (a.head_dim) {
    case 64: launch_decode<64, 32, true>(p, cluster, row_groups, stream); break;
    case 96: launch_decode<96, 32, true>(p, cluster, row_groups, stream); break;
    case 128: launch_decode<128, 32, true>(p, cluster, row_groups, stream); break;
    default: launch_decode<256, 16, false>(p, cluster, row_groups, stream); break;
  }
}

}  // namespace zoo::kernels::cuda
