// The mixture-of-experts kernels of moe.hpp: routing, the decode path's two expert GEMVs, and the
// prefill path's grouping, gather and combine.
//
// moe_route is a warp per token with the row in registers: a decode step runs it once per layer
// between two weight streams, so its latency counts (about 2 us in a graph for E 128, k 8 on an
// H200, against 5.6 us for a first version that kept the row in shared memory and scanned it).
//
// moe_gate_up_act is gemv.cu's gated kernel with one more level of indirection: a block's row of X
// is token a / k of its assignment a, and its W is expert ids[a]'s packed gate|up block. A block is
// 8 warps; each (gate i, up i) column pair is owned by `ks` warps that split H into contiguous
// chunks of 512-byte steps, 16-byte loads, U in flight per lane, partial sums meeting in shared
// memory (a fixed order: deterministic).
//
// moe_down_sum: a block owns `cols` output columns of one token; its warps take the cols * k dot
// products (a column of one expert: a row of w_down[e], length I) in turn, each a warp-wide float32
// sum, and one thread per column then rounds and adds them in ascending expert id order.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <stdexcept>
#include <string>

#include "device_utils.cuh"
#include "launch.cuh"
#include "stream_dot.cuh"
#include "vec.cuh"
#include "zoo/kernels/cuda/moe.hpp"

namespace zoo::kernels::cuda {
namespace {
using namespace detail;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 8;  // 16-byte loads in flight per lane, as gemv.cu's one-row kernel

// Loads the U vectors of one lane's first step over [begin, end) of a row (zeros past the end).
__device__ __forceinline__ void load_step(uint4 (&wv)[kUnroll], const uint4* row, int base, int end) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) wv[u] = base + 32 * u < end ? load_stream(row + base + 32 * u) : uint4{};
}

// One lane's share of the dot of row[begin, end) with x[begin, end), vectors lane, lane + 32, ...;
// wv holds the first step's loads already.
__device__ __forceinline__ float dot_lane(uint4 (&wv)[kUnroll], const uint4* row, const uint4* x, int first,
                                          int end) {
  float acc = 0.0f;
  for (int base = first; base < end; base += 32 * kUnroll) {
    if (base != first) load_step(wv, row, base, end);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + 32 * u;
      if (v < end) acc = dot8(acc, wv[u], __ldg(x + v));
    }
  }
  return acc;
}

// order[r] = the j < k with the r-th smallest id (ties: lower j first). Threads 0..k-1 of the block.
__device__ __forceinline__ void order_by_id(const int* id, int k, int* order) {
  const int j = threadIdx.x;
  if (j < k) {
    int rank = 0;
    for (int i = 0; i < k; ++i) rank += id[i] < id[j] || (id[i] == id[j] && i < j);
    order[rank] = j;
  }
}

// ---- routing -------------------------------------------------------------------------------------
constexpr int kRouteWarps = 4;
static_assert(kMoeMaxExperts <= 32 * 16, "moe_route's widest kernel holds 16 experts per lane");

// A warp per row; lane l holds experts l, l + 32, ... (V of them) in registers, so the row's
// loads are all in flight at once and the k selection rounds touch no memory. The rounds rank
// 32-bit keys: a probability's bits (non-negative floats order as their bits; NaN, 0x7fc00000,
// above every number, as torch.topk ranks it) with the top bit set, so that 0 can mean "taken".
template <int V>
__global__ void __launch_bounds__(kRouteWarps * 32)
    moe_route_kernel(float* logits, std::int64_t tokens, int experts, int k, bool normalize, std::int32_t* ids,
                     float* weights) {
  // The next kernel (moe_gate_up_act) waits for this one to complete before it reads anything.
  allow_dependent_launch();
  grid_dependency_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (row >= tokens) return;
  float* l = logits + row * experts;
  float p[V];
#pragma unroll
  for (int i = 0; i < V; ++i) p[i] = lane + 32 * i < experts ? l[lane + 32 * i] : 0.0f;
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < V; ++i)
    if (lane + 32 * i < experts) {
      p[i] = round_bf16(p[i]);
      l[lane + 32 * i] = p[i];
      m = fmaxf(m, p[i]);
    }
  m = warp_max(m);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i)
    if (lane + 32 * i < experts) {
      p[i] = expf(p[i] - m);
      s += p[i];
    }
  s = warp_sum(s);
  unsigned key[V];
#pragma unroll
  for (int i = 0; i < V; ++i) key[i] = lane + 32 * i < experts ? __float_as_uint(p[i] / s) | 0x80000000u : 0u;
  // k rounds of a warp-wide arg-max (ties to the lower expert); lane r keeps the r-th pick.
  float mine = 0.0f;
  int mine_id = 0;
  for (int r = 0; r < k; ++r) {
    unsigned best = 0;
    int best_id = INT_MAX;
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (key[i] > best) {  // strict: of equal keys the lower expert (lower i) stays
        best = key[i];
        best_id = lane + 32 * i;
      }
    const unsigned top = __reduce_max_sync(0xffffffffu, best);
    // k <= experts: a key is left in every round, so top != 0 and the id is an expert.
    const int id = __reduce_min_sync(0xffffffffu, best == top ? best_id : INT_MAX);
    if (lane == r) {
      mine = __uint_as_float(top & 0x7fffffffu);
      mine_id = id;
    }
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (lane + 32 * i == id) key[i] = 0u;
  }
  if (normalize) mine = mine / warp_sum(lane < k ? mine : 0.0f);
  if (lane < k) {
    ids[row * k + lane] = mine_id;
    weights[row * k + lane] = round_bf16(mine);
  }
}

// ---- decode: gate|up + activation --------------------------------------------------------------
template <GatedActivation ACT>
__global__ void __launch_bounds__(kThreads, 4)
    moe_gate_up_kernel(const uint4* __restrict__ x, const uint4* __restrict__ w, const std::int32_t* ids, int k,
                       int n, int kv, int ks, unsigned col_blocks, bf16* __restrict__ out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int cols_per_block = kWarps / ks;
  const std::int64_t a = blockIdx.x / col_blocks;  // the assignment: token a / k, expert ids[a]
  const int vcol = static_cast<int>(blockIdx.x % col_blocks) * cols_per_block + warp / ks;
  // Virtual columns 2i and 2i + 1 are the expert's W rows i (gate) and n/2 + i (up).
  const int col = (vcol & 1) * (n >> 1) + (vcol >> 1);
  const int part = warp % ks;
  const int chunk = ((kv + ks - 1) / ks + 31) & ~31;
  const int v_begin = part * chunk;
  const int v_end = min(kv, v_begin + chunk);

  // The ids come from the kernel just before (moe_route), so no weight can be loaded before the
  // wait. The successor is let go only after it: moe_down_sum reads the ids before its own wait.
  grid_dependency_wait();
  allow_dependent_launch();
  const std::int64_t e = ids[a];
  const uint4* wrow = w + (e * n + col) * static_cast<std::int64_t>(kv);
  const uint4* xrow = x + (a / k) * kv;
  float acc = 0.0f;
  if (vcol < n) {
    uint4 wv[kUnroll];
    load_step(wv, wrow, v_begin + lane, v_end);
    acc = dot_lane(wv, wrow, xrow, v_begin + lane, v_end);
  }
  __shared__ float partial[kWarps];
  acc = warp_sum(acc);
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  const int t = threadIdx.x;
  const int vc = static_cast<int>(blockIdx.x % col_blocks) * cols_per_block + 2 * t;
  if (t < cols_per_block / 2 && vc < n) {
    float g = partial[2 * t * ks], u = partial[(2 * t + 1) * ks];
    for (int p = 1; p < ks; ++p) {
      g += partial[2 * t * ks + p];
      u += partial[(2 * t + 1) * ks + p];
    }
    // The projections as a GEMM stores them (bf16), then act_and_mul's arithmetic.
    const float gr = round_bf16(g), ur = round_bf16(u);
    const float o = ACT == GatedActivation::silu        ? silu_times(gr, ur)
                    : ACT == GatedActivation::gelu_tanh ? gelu_tanh_times(gr, ur)
                                                        : gelu_erf_times(gr, ur);
    out[a * (n >> 1) + (vc >> 1)] = __float2bfloat16_rn(o);
  }
}

// ---- decode: down projection + weighted sum ------------------------------------------------------
constexpr int kDownMaxCols = 16;

__global__ void __launch_bounds__(kThreads, 4)
    moe_down_kernel(const uint4* __restrict__ act, const uint4* __restrict__ w, const std::int32_t* ids,
                    const float* weights, int k, int hidden, int iv, int cols, unsigned col_blocks,
                    bf16* __restrict__ out) {
  __shared__ int s_id[kMoeMaxTopK], s_order[kMoeMaxTopK];
  __shared__ float s_weight[kMoeMaxTopK];
  __shared__ float partial[kDownMaxCols * kMoeMaxTopK];  // [column][j]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t t = blockIdx.x / col_blocks;
  const int col0 = static_cast<int>(blockIdx.x % col_blocks) * cols;
  const int ncols = min(cols, hidden - col0);
  const int items = ncols * k;  // item c * k + j: column col0 + c of assignment t * k + j

  // The kernel before (moe_gate_up_act) lets this one start only after its own wait, i.e. after
  // the router's ids and weights are complete: they and the down weights may be read now.
  allow_dependent_launch();
  if (threadIdx.x < k) {
    s_id[threadIdx.x] = ids[t * k + threadIdx.x];
    s_weight[threadIdx.x] = weights[t * k + threadIdx.x];
  }
  __syncthreads();
  order_by_id(s_id, k, s_order);
  const uint4* wrow = nullptr;
  uint4 wv[kUnroll];
  if (warp < items) {
    const int c = warp / k, j = warp % k;
    wrow = w + (static_cast<std::int64_t>(s_id[j]) * hidden + col0 + c) * iv;
    load_step(wv, wrow, lane, iv);
  }
  grid_dependency_wait();  // act is the previous kernel's output
  for (int item = warp; item < items; item += kWarps) {
    const int c = item / k, j = item % k;
    if (item != warp) {
      wrow = w + (static_cast<std::int64_t>(s_id[j]) * hidden + col0 + c) * iv;
      load_step(wv, wrow, lane, iv);
    }
    const float acc = warp_sum(dot_lane(wv, wrow, act + (t * k + j) * iv, lane, iv));
    if (lane == 0) partial[item] = acc;
  }
  __syncthreads();
  const int c = threadIdx.x;
  if (c < ncols) {
    float o = 0.0f;  // out = zeros (bf16), then out = bf16(out + bf16(bf16(y) * weight)) per expert
    for (int r = 0; r < k; ++r) {
      const int j = s_order[r];
      o = round_bf16(o + round_bf16(round_bf16(partial[c * k + j]) * s_weight[j]));
    }
    out[t * hidden + col0 + c] = __float2bfloat16_rn(o);
  }
}

// ---- prefill: grouping, gather, combine ------------------------------------------------------------
constexpr int kGroupThreads = 1024;

__global__ void __launch_bounds__(kGroupThreads)
    moe_group_kernel(const std::int32_t* ids, std::int64_t n, int k, int experts, std::int32_t* counts,
                     std::int32_t* offsets, std::int32_t* row_of, std::int32_t* token_of) {
  __shared__ int s_count[kMoeMaxExperts];
  __shared__ int s_offset[kMoeMaxExperts + 1];
  for (int e = threadIdx.x; e < experts; e += blockDim.x) s_count[e] = 0;
  __syncthreads();
  // Pass 1: each assignment's place among its expert's rows (kept in row_of meanwhile).
  for (std::int64_t a = threadIdx.x; a < n; a += blockDim.x) {
    const int e = ids[a];
    row_of[a] = e >= 0 && e < experts ? atomicAdd(&s_count[e], 1) : -1;
  }
  __syncthreads();
  // Exclusive prefix sums by one warp: each lane sums a contiguous slice of the experts.
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    const int per = (experts + 31) / 32;
    const int begin = min(experts, lane * per), end = min(experts, begin + per);
    int local = 0;
    for (int e = begin; e < end; ++e) local += s_count[e];
    int incl = local;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    int run = incl - local;
    for (int e = begin; e < end; ++e) {
      s_offset[e] = run;
      run += s_count[e];
    }
    if (lane == 31) s_offset[experts] = incl;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    counts[e] = s_count[e];
    offsets[e] = s_offset[e];
  }
  if (threadIdx.x == 0) offsets[experts] = s_offset[experts];
  // Pass 2: places to rows (each thread revisits the assignments it placed).
  for (std::int64_t a = threadIdx.x; a < n; a += blockDim.x) {
    const int place = row_of[a];
    if (place < 0) continue;
    const int r = s_offset[ids[a]] + place;
    row_of[a] = r;
    token_of[r] = static_cast<std::int32_t>(a / k);
  }
}

template <int VEC>
__global__ void gather_rows_kernel(const bf16* __restrict__ x, const std::int32_t* token_of, std::int64_t rows,
                                   std::int64_t hidden, bf16* __restrict__ out) {
  const std::int64_t per_row = hidden / VEC, total = rows * per_row;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = idx / per_row, i = (idx % per_row) * VEC;
    const std::int32_t tok = token_of[r];
    bf16* dst = out + r * hidden + i;
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(dst) = tok >= 0 ? *reinterpret_cast<const uint4*>(x + tok * hidden + i) : uint4{};
    } else {
      *dst = tok >= 0 ? x[tok * hidden + i] : __float2bfloat16_rn(0.0f);
    }
  }
}

template <int VEC>
__global__ void __launch_bounds__(kThreads)
    moe_combine_kernel(const bf16* __restrict__ y, const std::int32_t* row_of, const std::int32_t* ids,
                       const float* weights, std::int64_t tokens, int k, std::int64_t hidden, bf16* __restrict__ out) {
  __shared__ int s_id[kMoeMaxTopK], s_row[kMoeMaxTopK], s_order[kMoeMaxTopK];
  __shared__ float s_weight[kMoeMaxTopK];
  for (std::int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    if (threadIdx.x < k) {
      s_id[threadIdx.x] = ids[t * k + threadIdx.x];
      s_row[threadIdx.x] = row_of[t * k + threadIdx.x];
      s_weight[threadIdx.x] = weights[t * k + threadIdx.x];
    }
    __syncthreads();
    order_by_id(s_id, k, s_order);
    __syncthreads();
    for (std::int64_t c = static_cast<std::int64_t>(threadIdx.x) * VEC; c < hidden;
         c += static_cast<std::int64_t>(blockDim.x) * VEC) {
      float o[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) o[i] = 0.0f;
      for (int r = 0; r < k; ++r) {
        const int j = s_order[r];
        const std::int32_t row = s_row[j];
        if (row < 0) continue;
        float v[VEC];
        load_f32<VEC>(y + row * hidden + c, v);
        const float wj = s_weight[j];
#pragma unroll
        for (int i = 0; i < VEC; ++i) o[i] = round_bf16(o[i] + round_bf16(v[i] * wj));
      }
      store_bf16<VEC>(out + t * hidden + c, o);
    }
    __syncthreads();  // the shared rows are rewritten for the next token
  }
}

unsigned grid_for(std::int64_t work, int threads) {
  const std::int64_t blocks = (work + threads - 1) / threads;
  const std::int64_t cap = std::int64_t{device_properties().multiprocessors} * 16;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

void check_k(const char* what, int k) {
  if (k < 1 || k > kMoeMaxTopK)
    throw std::invalid_argument(std::string(what) + ": k must be 1.." + std::to_string(kMoeMaxTopK) + ", got " +
                                std::to_string(k));
}

void check_tokens(const char* what, std::int64_t tokens) {
  if (tokens < 0) throw std::invalid_argument(std::string(what) + ": negative token count");
}

// gemv.cu's split of k over warps for n columns in all: until ~48 warps per SM, as long as each
// warp keeps at least 4 x 512 bytes of its row.
int split_k(std::int64_t columns, int kv, int multiprocessors, int max_ks) {
  const std::int64_t target_warps = std::int64_t{48} * (multiprocessors > 0 ? multiprocessors : 132);
  int ks = 1;
  while (ks < max_ks && columns * ks < target_warps && kv >= 128 * ks) ks *= 2;
  return ks;
}

template <GatedActivation ACT>
void launch_gate_up(const uint4* x, const uint4* w, const std::int32_t* ids, int k, int n, int kv, int ks,
                    unsigned col_blocks, unsigned blocks, bf16* out, cudaStream_t stream) {
  launch_pdl(moe_gate_up_kernel<ACT>, blocks, kThreads, 0, stream, x, w, ids, k, n, kv, ks, col_blocks, out);
}

}  // namespace

void moe_route(float* logits, std::int64_t tokens, int experts, int k, bool normalize, std::int32_t* ids,
               float* weights, cudaStream_t stream) {
  check_tokens("moe_route", tokens);
  if (experts < 1 || experts > kMoeMaxExperts)
    throw std::invalid_argument("moe_route: experts must be 1.." + std::to_string(kMoeMaxExperts) + ", got " +
                                std::to_string(experts));
  check_k("moe_route", k);
  if (k > experts) throw std::invalid_argument("moe_route: k is larger than the number of experts");
  if (tokens == 0) return;
  const auto blocks = static_cast<unsigned>((tokens + kRouteWarps - 1) / kRouteWarps);
  const auto launch = [&](auto kernel) {
    launch_pdl(kernel, blocks, kRouteWarps * 32, 0, stream, logits, tokens, experts, k, normalize, ids, weights);
  };
  if (experts <= 32) launch(moe_route_kernel<1>);
  else if (experts <= 64) launch(moe_route_kernel<2>);
  else if (experts <= 128) launch(moe_route_kernel<4>);
  else if (experts <= 256) launch(moe_route_kernel<8>);
  else launch(moe_route_kernel<16>);
  ZOO_CUDA_CHECK_LAUNCH();
}

void moe_gate_up_act(GatedActivation act, const Bf16* x, const Bf16* w_gate_up, const std::int32_t* ids,
                     std::int64_t tokens, int k, std::int64_t inter, std::int64_t hidden, Bf16* out,
                     int multiprocessors, cudaStream_t stream) {
  check_tokens("moe_gate_up_act", tokens);
  check_k("moe_gate_up_act", k);
  if (inter < 1 || hidden < 8 || hidden % 8 != 0 || !aligned16(x) || !aligned16(w_gate_up))
    throw std::invalid_argument("moe_gate_up_act: needs inter >= 1, hidden a multiple of 8 and 16-byte aligned x, w");
  if (2 * inter > (std::int64_t{1} << 30) || hidden / 8 > (std::int64_t{1} << 30))
    throw std::invalid_argument("moe_gate_up_act: sizes too large");
  if (tokens == 0) return;
  const int kv = static_cast<int>(hidden / 8);
  const int n = static_cast<int>(2 * inter);
  const std::int64_t assignments = tokens * k;
  // At most 4 warps per column, so that a block holds whole (gate, up) pairs.
  const int ks = split_k(n * assignments, kv, multiprocessors, kWarps / 2);
  const int cols_per_block = kWarps / ks;
  const auto col_blocks = static_cast<unsigned>((n + cols_per_block - 1) / cols_per_block);
  if (assignments * col_blocks > INT_MAX) throw std::invalid_argument("moe_gate_up_act: too many tokens");
  const auto blocks = static_cast<unsigned>(assignments * col_blocks);
  const auto* xv = reinterpret_cast<const uint4*>(x);
  const auto* wv = reinterpret_cast<const uint4*>(w_gate_up);
  switch (act) {
    case GatedActivation::silu:
      launch_gate_up<GatedActivation::silu>(xv, wv, ids, k, n, kv, ks, col_blocks, blocks, dev(out), stream);
      break;
    case GatedActivation::gelu_tanh:
      launch_gate_up<GatedActivation::gelu_tanh>(xv, wv, ids, k, n, kv, ks, col_blocks, blocks, dev(out), stream);
      break;
    case GatedActivation::gelu:
      launch_gate_up<GatedActivation::gelu>(xv, wv, ids, k, n, kv, ks, col_blocks, blocks, dev(out), stream);
      break;
  }
  ZOO_CUDA_CHECK_LAUNCH();
}

void moe_down_sum(const Bf16* act, const Bf16* w_down, const std::int32_t* ids, const float* weights,
                  std::int64_t tokens, int k, std::int64_t hidden, std::int64_t inter, Bf16* out,
                  int multiprocessors, cudaStream_t stream) {
  check_tokens("moe_down_sum", tokens);
  check_k("moe_down_sum", k);
  if (hidden < 1 || inter < 8 || inter % 8 != 0 || !aligned16(act) || !aligned16(w_down))
    throw std::invalid_argument("moe_down_sum: needs hidden >= 1, inter a multiple of 8 and 16-byte aligned act, w");
  if (hidden > (std::int64_t{1} << 30) || inter / 8 > (std::int64_t{1} << 30))
    throw std::invalid_argument("moe_down_sum: sizes too large");
  if (tokens == 0) return;
  // Halve the columns per block while the GPU holds fewer than 4 blocks per SM and a block keeps
  // at least one dot product per warp.
  const std::int64_t target_blocks = std::int64_t{4} * (multiprocessors > 0 ? multiprocessors : 132);
  int cols = kDownMaxCols;
  while (cols > 1 && (cols / 2) * k >= kWarps && tokens * ((hidden + cols - 1) / cols) < target_blocks) cols /= 2;
  const auto col_blocks = static_cast<unsigned>((hidden + cols - 1) / cols);
  if (tokens * col_blocks > INT_MAX) throw std::invalid_argument("moe_down_sum: too many tokens");
  const auto blocks = static_cast<unsigned>(tokens * col_blocks);
  launch_pdl(moe_down_kernel, blocks, kThreads, 0, stream, reinterpret_cast<const uint4*>(act),
             reinterpret_cast<const uint4*>(w_down), ids, weights, k, static_cast<int>(hidden),
             static_cast<int>(inter / 8), cols, col_blocks, dev(out));
  ZOO_CUDA_CHECK_LAUNCH();
}

void moe_group(const std::int32_t* ids, std::int64_t tokens, int k, int experts, std::int32_t* counts,
               std::int32_t* offsets, std::int32_t* row_of, std::int32_t* token_of, cudaStream_t stream) {
  check_tokens("moe_group", tokens);
  check_k("moe_group", k);
  if (experts < 1 || experts > kMoeMaxExperts)
    throw std::invalid_argument("moe_group: experts must be 1.." + std::to_string(kMoeMaxExperts));
  if (tokens * k > kMoeMaxAssignments)
    throw std::invalid_argument("moe_group: more than " + std::to_string(kMoeMaxAssignments) + " assignments");
  // Also for no tokens: counts and offsets are then zeros.
  moe_group_kernel<<<1, kGroupThreads, 0, stream>>>(ids, tokens * k, k, experts, counts, offsets, row_of, token_of);
  ZOO_CUDA_CHECK_LAUNCH();
}

void gather_rows(const Bf16* x, const std::int32_t* token_of, std::int64_t rows, std::int64_t hidden, Bf16* out,
                 cudaStream_t stream) {
  if (rows < 0 || hidden < 0) throw std::invalid_argument("gather_rows: negative size");
  if (rows == 0 || hidden == 0) return;
  if (hidden % 8 == 0 && aligned16(x) && aligned16(out))
    gather_rows_kernel<8><<<grid_for(rows * hidden / 8, kThreads), kThreads, 0, stream>>>(dev(x), token_of, rows,
                                                                                         hidden, dev(out));
  else
    gather_rows_kernel<1><<<grid_for(rows * hidden, kThreads), kThreads, 0, stream>>>(dev(x), token_of, rows, hidden,
                                                                                     dev(out));
  ZOO_CUDA_CHECK_LAUNCH();
}

void moe_combine(const Bf16* y, const std::int32_t* row_of, const std::int32_t* ids, const float* weights,
                 std::int64_t tokens, int k, std::int64_t hidden, Bf16* out, cudaStream_t stream) {
  check_tokens("moe_combine", tokens);
  check_k("moe_combine", k);
  if (hidden < 0) throw std::invalid_argument("moe_combine: negative size");
  if (tokens == 0 || hidden == 0) return;
  const std::int64_t cap = std::int64_t{device_properties().multiprocessors} * 16;
  const auto blocks = static_cast<unsigned>(tokens < cap ? tokens : cap);
  if (hidden % 8 == 0 && aligned16(y) && aligned16(out))
    moe_combine_kernel<8><<<blocks, kThreads, 0, stream>>>(dev(y), row_of, ids, weights, tokens, k, hidden, dev(out));
  else
    moe_combine_kernel<1><<<blocks, kThreads, 0, stream>>>(dev(y), row_of, ids, weights, tokens, k, hidden, dev(out));
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
