// Prefill attention, FlashAttention-2 style: one block per (query head, tile of BR queries); each
// warp owns 16 query rows; K and V tiles of BC keys stream through shared memory with cp.async
// (the next K tile loads during softmax and P@V, the V tile during Q@K^T); scores and the
// online softmax stay in registers.
//
// Tile shapes per head_dim come from a sweep on the H200 (docs/performance.md, "Prefill attention:
// the kernel alone against torch SDPA, and tile shapes"): two resident blocks per SM pay where one
// block's softmax overlaps the other's MMAs (head_dim 64; 128 on long prompts, with Q read from
// shared memory to fit the registers), and 64-query tiles where 128-query tiles would leave SMs
// idle.
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "attention_common.cuh"
#if ZOO_WITH_CUDNN
#include "cudnn_sdpa.hpp"
#endif
#include "zoo/kernels/cuda/attention.hpp"
#include "zoo/kernels/env.hpp"

namespace zoo::kernels::cuda {
namespace {
using namespace detail;

struct PrefillParams {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  bf16* out;
  std::int64_t q_stride, kv_stride, out_stride;
  std::int64_t tokens, start;
  int q_heads, group;  // group = q_heads / kv_heads
  float scale_log2;    // scale * log2(e)
  float scale, softcap;
  std::int64_t window;
  const std::int32_t* pages;  // null: a contiguous cache
  // Non-null: one block row per tile of several chunks (attention_prefill_tiles): tile y is
  // tiles[kPrefillTileInts * y ..] = {q_row, tokens, start, pages offset, q0, key_lo, key_hi, slot}.
  const std::int32_t* tiles;
  std::int64_t tile_count;
  // A tile with slot >= 0 covers keys [key_lo, key_hi) only and leaves its unnormalized output
  // and per-row (max, sum) here (log2 units), for attention_prefill_merge.
  float* part_o;   // [slot][head][BR][D]
  float* part_ml;  // [slot][head][BR][2]
};

template <int D, int WARPS, int BC, bool Q_REGS>
struct PrefillConfig {
  static constexpr int kBR = 16 * WARPS;
  static constexpr int kThreads = 32 * WARPS;
  static constexpr int kQBytes = kBR * tile_row_bytes<D>();
  static constexpr int kKVBytes = BC * tile_row_bytes<D>();
  static constexpr int kSmem = kQBytes + 2 * kKVBytes;
};

// MASKED: a window or soft-cap (masked_score); off, the plain causal path compiles as it did
// before they existed (a runtime branch cost plain attention registers and time).
template <int D, int WARPS, int BC, bool Q_REGS, int MIN_BLOCKS, bool MASKED>
__global__ void __launch_bounds__(32 * WARPS, MIN_BLOCKS) attention_prefill_kernel(PrefillParams p) {
  using Cfg = PrefillConfig<D, WARPS, BC, Q_REGS>;
  constexpr int BR = Cfg::kBR, NT = Cfg::kThreads;
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t sQ = smem_addr(smem);
  const std::uint32_t sK = sQ + Cfg::kQBytes;
  const std::uint32_t sV = sK + Cfg::kKVBytes;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int head = blockIdx.x, kv_head = head / p.group;
  // This block's chunk: the launch's one, or its tile's (the host orders tiles heaviest first).
  // Heaviest (last) query tiles first: causal work grows with the tile index.
  std::int64_t q0 = static_cast<std::int64_t>(gridDim.y - 1 - blockIdx.y) * BR;
  std::int64_t tokens = p.tokens, start = p.start;
  const bf16* q_base = p.q;
  bf16* out_base = p.out;
  const std::int32_t* pages = p.pages;
  std::int64_t key_lo = 0, key_hi = 0;
  int slot = -1;
  if (p.tiles) {
    const std::int32_t* t = p.tiles + static_cast<std::int64_t>(kPrefillTileInts) * blockIdx.y;
    q_base += static_cast<std::int64_t>(t[0]) * p.q_stride;
    out_base += static_cast<std::int64_t>(t[0]) * p.out_stride;
    tokens = t[1];
    start = t[2];
    pages += t[3];
    q0 = t[4];
    key_lo = t[5];
    key_hi = t[6];
    slot = t[7];
  }
  const bf16* qg = q_base + static_cast<std::int64_t>(head) * D;
  const bf16* kg = p.k + static_cast<std::int64_t>(kv_head) * D;
  const bf16* vg = p.v + static_cast<std::int64_t>(kv_head) * D;

  const std::int64_t q_rows = tokens - q0 < BR ? tokens - q0 : BR;
  const std::int64_t first_pos = start + q0;             // position of the tile's first query
  const std::int64_t kv_end = first_pos + q_rows;        // keys this tile can see: [0, kv_end)
  const int n_tiles = static_cast<int>((kv_end + BC - 1) / BC);
  // The key tiles this block walks: all, or its split's (key_lo, key_hi multiples of 64 >= BC).
  int j_begin = static_cast<int>(key_lo / BC);
  const int j_end = key_hi > 0 ? min(n_tiles, static_cast<int>((key_hi + BC - 1) / BC)) : n_tiles;
  if constexpr (MASKED) {
    // A window: tiles wholly before what the tile's first query sees hold nothing for any of its
    // queries (a long prompt's cost grows with the window, not the prompt).
    if (p.window > 0 && first_pos - p.window + 1 > 0)
      j_begin = min(j_end, max(j_begin, static_cast<int>((first_pos - p.window + 1) / BC)));
  }

  load_tile_async<BR, D, NT>(sQ, qg, p.q_stride, q0, tokens, tid);
  load_tile_async<BC, D, NT>(sK, kg, p.kv_stride, static_cast<std::int64_t>(j_begin) * BC, kv_end, tid, pages);
  cp_async_commit();

  std::uint32_t qf[Q_REGS ? D / 16 : 1][4];
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int row_in_tile = warp * 16 + (lane >> 2);
  const std::int64_t qpos[2] = {first_pos + row_in_tile, first_pos + row_in_tile + 8};
  const std::int64_t warp_last_pos = first_pos + warp * 16 + 15;

  for (int j = j_begin; j < j_end; ++j) {
    const std::int64_t k0 = static_cast<std::int64_t>(j) * BC;
    load_tile_async<BC, D, NT>(sV, vg, p.kv_stride, k0, kv_end, tid, pages);
    cp_async_commit();
    cp_async_wait<1>();  // Q (first time) and K_j have landed
    __syncthreads();
    if constexpr (Q_REGS) {
      if (j == j_begin) {
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) load_a_frag<D>(qf[ks], sQ, warp * 16, ks, lane);
      }
    }
    // A warp whose rows all precede the tile's first key has nothing to add from it.
    const bool active = warp_last_pos >= k0;
    float s[BC / 8][4];
    if (active) compute_scores<D, BC, Q_REGS>(s, qf, sQ, warp * 16, sK, lane);
    __syncthreads();  // every warp is done reading K_j
    if (j + 1 < j_end) load_tile_async<BC, D, NT>(sK, kg, p.kv_stride, k0 + BC, kv_end, tid, pages);
    cp_async_commit();
    if (active) {
      if constexpr (MASKED) {
#pragma unroll
        for (int n = 0; n < BC / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const std::int64_t kpos = k0 + n * 8 + 2 * (lane & 3) + (e & 1);
            s[n][e] = masked_score(s[n][e], kpos, qpos[e >> 1], kv_end, p.scale, p.softcap, p.window);
          }
        }
      } else {
        const bool need_mask = k0 + BC - 1 > first_pos;
#pragma unroll
        for (int n = 0; n < BC / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const std::int64_t kpos = k0 + n * 8 + 2 * (lane & 3) + (e & 1);
            s[n][e] = (need_mask && kpos > qpos[e >> 1]) ? -INFINITY : s[n][e] * p.scale_log2;
          }
        }
      }
      online_softmax<BC / 8, D / 8>(s, o, m, l);
    }
    cp_async_wait<1>();  // V_j has landed (K_{j+1} may still be in flight)
    __syncthreads();
    if (active) accumulate_pv<D, BC>(o, s, sV, lane);
    __syncthreads();  // every warp is done reading V_j before it is overwritten
  }

  // A split wholly before the window ran no tile: its first K tile may still be in flight.
  cp_async_wait<0>();
  if (slot >= 0) {  // a split's partial: unnormalized rows, their max and sum
    const std::int64_t base = (static_cast<std::int64_t>(slot) * p.q_heads + head) * BR;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 + (lane >> 2) + 8 * h;
      float* orow = p.part_o + (base + r) * D;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const int col = n * 8 + 2 * (lane & 3);
        orow[col] = o[n][2 * h];
        orow[col + 1] = o[n][2 * h + 1];
      }
      const float total = quad_sum(l[h]);
      if ((lane & 3) == 0) {
        p.part_ml[(base + r) * 2] = m[h];
        p.part_ml[(base + r) * 2 + 1] = total;
      }
    }
    return;
  }
  // Normalize and stage the warp's 16 rows in its own (no longer needed) rows of the Q tile, then
  // write them out with 16-byte stores.
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float total = quad_sum(l[h]);
    inv[h] = total > 0.0f ? 1.0f / total : 0.0f;
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 + (lane >> 2) + 8 * h;
      const std::uint32_t off = swz<D>(r, n) + (lane & 3) * 4;
      *reinterpret_cast<std::uint32_t*>(smem + off) = pack_bf16x2(o[n][2 * h] * inv[h], o[n][2 * h + 1] * inv[h]);
    }
  }
  __syncwarp();
  constexpr int CH = D / 8;
#pragma unroll
  for (int i = 0; i < 16 * CH / 32; ++i) {
    const int idx = lane + 32 * i;
    const int r = idx / CH, c = idx % CH;
    const std::int64_t token = q0 + warp * 16 + r;
    if (token < tokens) {
      const uint4 v = *reinterpret_cast<const uint4*>(smem + swz<D>(warp * 16 + r, c));
      *reinterpret_cast<uint4*>(out_base + token * p.out_stride + static_cast<std::int64_t>(head) * D + c * 8) = v;
    }
  }
}

template <int D, int WARPS, int BC, bool Q_REGS, int MIN_BLOCKS, bool MASKED>
void launch_prefill_variant(const PrefillParams& p, cudaStream_t stream) {
  using Cfg = PrefillConfig<D, WARPS, BC, Q_REGS>;
  auto kernel = attention_prefill_kernel<D, WARPS, BC, Q_REGS, MIN_BLOCKS, MASKED>;
  allow_dynamic_smem(kernel, Cfg::kSmem);
  const std::int64_t q_tiles = p.tiles ? p.tile_count : (p.tokens + Cfg::kBR - 1) / Cfg::kBR;
  if (q_tiles > 65535) throw std::invalid_argument("attention_prefill: too many tokens for one launch");
  const dim3 grid(static_cast<unsigned>(p.q_heads), static_cast<unsigned>(q_tiles));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmem, stream>>>(p);
  ZOO_CUDA_CHECK_LAUNCH();
}

template <int D, int WARPS, int BC, bool Q_REGS, int MIN_BLOCKS>
void launch_prefill(const PrefillParams& p, cudaStream_t stream) {
  if (p.softcap > 0.0f || p.window > 0) return launch_prefill_variant<D, WARPS, BC, Q_REGS, MIN_BLOCKS, true>(p, stream);
  launch_prefill_variant<D, WARPS, BC, Q_REGS, MIN_BLOCKS, false>(p, stream);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<std::uintptr_t>(ptr) & 15u) == 0; }

// head_dim 128: 128-query tiles (8 warps, two blocks per SM) when they give every SM at least four
// blocks, else 64-query tiles (4 warps) so that short prompts still spread over the GPU.
// ZOO_PREFILL_ROWS=64|128 forces one (tests, A/B runs); both give bitwise equal results (same key
// tiles, same order per row).
bool wide_tiles_128(const PrefillParams& p) {
  if (p.tiles) return false;  // a tiles launch's rows per tile: attention_prefill_tile_rows
  if (const auto rows = env_int("ZOO_PREFILL_ROWS", 64, 128)) {
    if (*rows != 64 && *rows != 128) throw std::invalid_argument("ZOO_PREFILL_ROWS must be 64 or 128");
    return *rows == 128;
  }
  const std::int64_t blocks = (p.tokens + 127) / 128 * p.q_heads;
  return blocks >= 4 * static_cast<std::int64_t>(device_properties().multiprocessors);
}

}  // namespace

namespace {
void check_args(const PrefillAttentionArgs& a) {
  if (a.tokens < 0 || a.start < 0 || a.q_heads <= 0 || a.kv_heads <= 0 || a.q_heads % a.kv_heads != 0)
    throw std::invalid_argument("attention_prefill: bad shape (q_heads must be a positive multiple of kv_heads)");
  if (a.head_dim != 64 && a.head_dim != 96 && a.head_dim != 128 && a.head_dim != 256)
    throw std::invalid_argument("attention_prefill: head_dim " + std::to_string(a.head_dim) +
                                " not supported (64, 96, 128, 256)");
  if (!a.q || !a.k_cache || !a.v_cache || !a.out) throw std::invalid_argument("attention_prefill: missing pointer");
  if (!aligned16(a.q) || !aligned16(a.k_cache) || !aligned16(a.v_cache) || !aligned16(a.out) ||
      a.q_row_stride() % 8 || a.out_row_stride() % 8)
    throw std::invalid_argument("attention_prefill: pointers and strides must be 16-byte aligned");
}
}  // namespace

namespace {
PrefillParams params_of(const PrefillAttentionArgs& a) {
  const std::int64_t D = a.head_dim;
  PrefillParams p{};
  p.q = dev(a.q);
  p.k = dev(a.k_cache);
  p.v = dev(a.v_cache);
  p.out = dev(a.out);
  p.q_stride = a.q_row_stride();
  p.kv_stride = a.kv_heads * D;
  p.out_stride = a.out_row_stride();
  p.tokens = a.tokens;
  p.start = a.start;
  p.q_heads = a.q_heads;
  p.group = a.q_heads / a.kv_heads;
  p.scale_log2 = attention_scale(a.scale, a.head_dim) * 1.4426950408889634f;
  p.scale = attention_scale(a.scale, a.head_dim);
  p.softcap = a.softcap;
  p.window = a.window;
  p.pages = a.pages;
  return p;
}

void dispatch(const PrefillParams& p, int head_dim, cudaStream_t stream) {
  switch (head_dim) {
    case 64: launch_prefill<64, 8, 64, true, 2>(p, stream); break;
    case 96: launch_prefill<96, 4, 64, true, 1>(p, stream); break;
    case 128:
      if (wide_tiles_128(p)) {
        launch_prefill<128, 8, 64, false, 2>(p, stream);
      } else {
        launch_prefill<128, 4, 64, true, 1>(p, stream);
      }
      break;
    default: launch_prefill<256, 4, 32, false, 1>(p, stream); break;
  }
}
}  // namespace

void attention_prefill(const PrefillAttentionArgs& a, cudaStream_t stream) {
  check_args(a);
  if (a.tokens == 0) return;
  dispatch(params_of(a), a.head_dim, stream);
}

std::int64_t attention_prefill_tile_rows(int head_dim) { return head_dim == 64 ? 128 : 64; }

std::size_t attention_prefill_partial_bytes(int head_dim, int q_heads, std::int64_t slots) {
  const auto rows = static_cast<std::size_t>(slots) * static_cast<std::size_t>(q_heads) *
                    static_cast<std::size_t>(attention_prefill_tile_rows(head_dim));
  return rows * (static_cast<std::size_t>(head_dim) + 2) * sizeof(float);
}

namespace {
// One block per (head, merged tile): each of the tile's rows from its splits' partials, weighted by
// exp2(m_s - max m), divided by the weighted sum (the online softmax's merge).
constexpr int kMergeThreads = 256;
__global__ void __launch_bounds__(kMergeThreads)
    prefill_merge_kernel(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                         const std::int32_t* __restrict__ merges, int rows, int D, int q_heads, bf16* out,
                         std::int64_t out_stride) {
  const int head = blockIdx.x;
  const std::int32_t* g = merges + static_cast<std::int64_t>(kPrefillMergeInts) * blockIdx.y;
  const std::int64_t q_row = g[0], tokens = g[1], q0 = g[2];
  const int first = g[3], slots = g[4];
  for (int i = threadIdx.x; i < rows * D; i += blockDim.x) {
    const int r = i / D, d = i % D;
    if (q0 + r >= tokens) continue;
    float mx = -INFINITY;
    for (int s = 0; s < slots; ++s)
      mx = fmaxf(mx, part_ml[((static_cast<std::int64_t>(first + s) * q_heads + head) * rows + r) * 2]);
    const float base = mx == -INFINITY ? 0.0f : mx;
    float sum = 0.0f, acc = 0.0f;
    for (int s = 0; s < slots; ++s) {
      const std::int64_t at = (static_cast<std::int64_t>(first + s) * q_heads + head) * rows + r;
      const float w = exp2f(part_ml[at * 2] - base);
      sum += w * part_ml[at * 2 + 1];
      acc += w * part_o[at * D + d];
    }
    out[(q_row + q0 + r) * out_stride + static_cast<std::int64_t>(head) * D + d] =
        __float2bfloat16(sum > 0.0f ? acc / sum : 0.0f);
  }
}
}  // namespace

void attention_prefill_tiles(const PrefillAttentionArgs& a, const std::int32_t* tiles, std::int64_t tile_count,
                             cudaStream_t stream, const PrefillSplit* split) {
  PrefillAttentionArgs shape = a;
  shape.tokens = 0;
  check_args(shape);
  if (!tiles) throw std::invalid_argument("attention_prefill_tiles: no tiles");
  if (tile_count == 0) return;
  PrefillParams p = params_of(a);
  p.tiles = tiles;
  p.tile_count = tile_count;
  if (split) {
    if (!split->partial || !split->merges) throw std::invalid_argument("attention_prefill_tiles: a split without buffers");
    p.part_ml = static_cast<float*>(split->partial);
    p.part_o = p.part_ml + 2 * split->slots * a.q_heads * attention_prefill_tile_rows(a.head_dim);
  }
  dispatch(p, a.head_dim, stream);
  if (split && split->merge_count > 0) {
    if (split->merge_count > 65535) throw std::invalid_argument("attention_prefill_tiles: too many merged tiles");
    const dim3 grid(static_cast<unsigned>(a.q_heads), static_cast<unsigned>(split->merge_count));
    prefill_merge_kernel<<<grid, kMergeThreads, 0, stream>>>(
        p.part_o, p.part_ml, split->merges, static_cast<int>(attention_prefill_tile_rows(a.head_dim)), a.head_dim,
        a.q_heads, p.out, p.out_stride);
    ZOO_CUDA_CHECK_LAUNCH();
  }
}

struct PrefillAttention::Impl {
#if ZOO_WITH_CUDNN
  detail::CudnnSdpa cudnn;
#endif
  const char* last = "none";
  bool said_unavailable = false;
};

PrefillAttention::PrefillAttention() : impl_(std::make_unique<Impl>()) {}
PrefillAttention::~PrefillAttention() = default;

std::string PrefillAttention::cudnn_unavailable_reason() {
#if ZOO_WITH_CUDNN
  return detail::CudnnSdpa::unavailable_reason();
#else
  return "this build has no cuDNN";
#endif
}

std::int64_t PrefillAttention::cudnn_min_tokens() {
  return env_int("ZOO_CUDNN_MIN_TOKENS", 1, long{1} << 40).value_or(kCudnnMinTokens);
}

void PrefillAttention::run(const PrefillAttentionArgs& a, cudaStream_t stream) {
  check_args(a);
  if (a.tokens == 0) return;
  // What cuDNN's graph here computes: no soft-cap, no window, a contiguous cache.
  const bool plain = a.softcap <= 0.0f && a.window <= 0 && !a.pages;
  if (plain && a.tokens >= cudnn_min_tokens() && env_flag("ZOO_CUDNN", true)) {
#if ZOO_WITH_CUDNN
    if (impl_->cudnn.run(a, stream)) {
      impl_->last = "cudnn";
      return;
    }
#endif
    // A refused shape was logged where its plan failed; a missing or too old cuDNN is said here, once.
    if (!impl_->said_unavailable && env_flag("ZOO_CUDNN_LOG", false)) {
      const std::string why = cudnn_unavailable_reason();
      if (!why.empty()) std::fprintf(stderr, "zoo: cuDNN attention not used: %s\n", why.c_str());
      impl_->said_unavailable = true;
    }
  }
  attention_prefill(a, stream);
  impl_->last = "zoo";
}

const char* PrefillAttention::last_engine() const { return impl_->last; }

}  // namespace zoo::kernels::cuda
