// Per-row reductions over logits: argmax, log-softmax, top-k, and sampling a token.
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>

#include <cub/cub.cuh>

#include "device_utils.cuh"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {
namespace {
using namespace detail;

constexpr int kRowThreads = 1024;

// A (value, index) candidate; index < 0 means "none". Order as torch.argmax / torch.topk (and
// the CPU reference): NaN ranks above every number, then larger values, ties to the lower index.
struct Best {
  float v;
  std::int32_t i;
};
__device__ __forceinline__ bool ranks_before(float av, std::int32_t ai, float bv, std::int32_t bi) {
  const bool nan_a = isnan(av), nan_b = isnan(bv);
  if (nan_a || nan_b) return nan_a && (!nan_b || ai < bi);
  return av > bv || (av == bv && ai < bi);
}
__device__ __forceinline__ bool better(Best a, Best b) { return a.i >= 0 && (b.i < 0 || ranks_before(a.v, a.i, b.v, b.i)); }
__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)};
    if (better(other, b)) b = other;
  }
  return b;
}
// Every thread gets the block's best. scratch: 32 entries.
__device__ __forceinline__ Best block_best(Best b, Best* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  b = warp_best(b);
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  Best r = scratch[0];
  for (int i = 1; i < warps; ++i)
    if (better(scratch[i], r)) r = scratch[i];
  __syncthreads();
  return r;
}

// ---- argmax ------------------------------------------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kRowThreads) argmax_kernel(const T* __restrict__ x, std::int64_t n,
                                                             std::int32_t* __restrict__ out) {
  __shared__ Best scratch[32];
  const T* row = x + static_cast<std::int64_t>(blockIdx.x) * n;
  Best b{0.0f, -1};
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const Best c{to_f32(row[i]), static_cast<std::int32_t>(i)};
    if (better(c, b)) b = c;
  }
  b = block_best(b, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = b.i;
}

// ---- log-softmax -------------------------------------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kRowThreads) log_softmax_kernel(const T* __restrict__ x, float* __restrict__ out,
                                                                  std::int64_t n) {
  __shared__ float fscratch[32];
  __shared__ double dscratch[32];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * n;
  float m = -INFINITY;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, to_f32(x[base + i]));
  m = block_reduce(m, fscratch, MaxOp{});
  double s = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(expf(to_f32(x[base + i]) - m));
  s = block_reduce(s, dscratch, SumOp{});
  // Like the CPU reference: the normalizer and the subtraction in float64 (an all -inf row gives NaN).
  const double log_norm = static_cast<double>(m) + log(s);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    out[base + i] = static_cast<float>(static_cast<double>(to_f32(x[base + i])) - log_norm);
}

// ---- top-k -------------------------------------------------------------------------------------
// Stage 1: one block per (chunk of kChunk entries, row) picks the chunk's top k by k rounds of a
// block-wide "best remaining" reduction. Each thread keeps the best of its own 32 entries (a
// bitmask marks those taken), so a round costs one reduction plus one thread's rescan.
// Stage 2: one block per row merges the chunks' candidates the same way, taking them from the
// workspace (taken candidates are overwritten with index -1).
constexpr int kTopKThreads = 256;
constexpr int kPerThread = 32;
constexpr std::int64_t kChunk = std::int64_t{kTopKThreads} * kPerThread;

template <class T>
__global__ void __launch_bounds__(kTopKThreads)
    top_k_chunk_kernel(const T* __restrict__ x, std::int64_t n, int k, std::int64_t chunks,
                       float* __restrict__ out_v, std::int32_t* __restrict__ out_i) {
  __shared__ Best scratch[32];
  const std::int64_t row = blockIdx.y, chunk = blockIdx.x;
  const T* src = x + row * n;
  const std::int64_t begin = chunk * kChunk;
  // Element j of this thread: begin + threadIdx.x + j * kTopKThreads (coalesced across the warp),
  // held in registers (constant indices after unrolling); `taken` marks used and absent ones.
  float vals[kPerThread];
  std::uint32_t taken = 0;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const std::int64_t idx = begin + threadIdx.x + static_cast<std::int64_t>(j) * kTopKThreads;
    vals[j] = idx < n ? to_f32(src[idx]) : 0.0f;
    if (idx >= n) taken |= 1u << j;
  }
  auto rescan = [&]() {
    Best b{0.0f, -1};
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const Best c{vals[j], static_cast<std::int32_t>(begin + threadIdx.x + static_cast<std::int64_t>(j) * kTopKThreads)};
      if (!((taken >> j) & 1u) && better(c, b)) b = c;
    }
    return b;
  };
  Best mine = rescan();
  const std::int64_t out_base = (row * chunks + chunk) * k;
  for (int r = 0; r < k; ++r) {
    const Best win = block_best(mine, scratch);
    if (threadIdx.x == 0) {
      out_v[out_base + r] = win.v;
      out_i[out_base + r] = win.i;
    }
    if (win.i >= 0 && win.i == mine.i) {
      const int j = static_cast<int>((win.i - begin - threadIdx.x) / kTopKThreads);
      taken |= 1u << j;
      mine = rescan();
    }
  }
}

__global__ void __launch_bounds__(kTopKThreads)
    top_k_merge_kernel(float* __restrict__ cand_v, std::int32_t* __restrict__ cand_i, std::int64_t per_row, int k,
                       float* __restrict__ out_v, std::int32_t* __restrict__ out_i) {
  __shared__ Best scratch[32];
  const std::int64_t row = blockIdx.x;
  float* cv = cand_v + row * per_row;
  std::int32_t* ci = cand_i + row * per_row;
  auto rescan = [&]() {
    Best b{0.0f, -1};
    for (std::int64_t j = threadIdx.x; j < per_row; j += kTopKThreads) {
      const Best c{cv[j], ci[j]};
      if (better(c, b)) b = c;
    }
    return b;
  };
  Best mine = rescan();
  for (int r = 0; r < k; ++r) {
    const Best win = block_best(mine, scratch);
    if (threadIdx.x == 0) {
      if (out_v) out_v[row * k + r] = win.v;
      out_i[row * k + r] = win.i;
    }
    if (win.i >= 0 && win.i == mine.i) {
      // Candidates hold distinct indices, so exactly one slot (owned by this thread) matches.
      for (std::int64_t j = threadIdx.x; j < per_row; j += kTopKThreads)
        if (ci[j] == win.i) ci[j] = -1;
      mine = rescan();
    }
  }
}

// ---- sampling ----------------------------------------------------------------------------------
// Three steps (zoo::sample_logits is the reference): `prep` checks the row and either takes the
// greedy argmax or writes the scaled candidates; a stable descending radix sort orders them (ties
// keep the lower index first); `pick` sums the masses of the kept prefix per segment, then the
// last block finds the top-p crossing and the draw's crossing inside one segment each. Each
// kernel's blocks leave partial results in the workspace; the last block to finish (a ticket
// counter it resets) combines them, so one launch does the whole step.
constexpr int kSampleThreads = 256;
constexpr int kPrepBlocksMax = 256;
constexpr int kPickBlocks = 128;

struct SampleTickets {
  unsigned int prep;
  unsigned int pick;
};
struct PrepPartial {
  float best_v;
  std::int32_t best_i;
  std::int32_t bad;  // INT_MAX: none
  std::int32_t unmasked;
};

// The pieces of the workspace (offsets aligned for the sort).
struct SampleLayout {
  std::size_t tickets, partials, segments, keys_in, keys_out, idx_in, idx_out, sort_temp, sort_bytes, total;
};
constexpr std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }
SampleLayout sample_layout(std::int64_t n) {
  SampleLayout l{};
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align256(bytes);
    return here;
  };
  l.tickets = take(sizeof(SampleTickets));
  l.partials = take(sizeof(PrepPartial) * kPrepBlocksMax);
  l.segments = take(sizeof(double) * kPickBlocks);
  l.keys_in = take(sizeof(float) * static_cast<std::size_t>(n));
  l.keys_out = take(sizeof(float) * static_cast<std::size_t>(n));
  l.idx_in = take(sizeof(std::int32_t) * static_cast<std::size_t>(n));
  l.idx_out = take(sizeof(std::int32_t) * static_cast<std::size_t>(n));
  std::size_t sort_bytes = 0;
  ZOO_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, sort_bytes, static_cast<const float*>(nullptr),
                                                          static_cast<float*>(nullptr),
                                                          static_cast<const std::int32_t*>(nullptr),
                                                          static_cast<std::int32_t*>(nullptr), static_cast<int>(n)));
  l.sort_bytes = sort_bytes;
  l.sort_temp = take(sort_bytes);
  l.total = at;
  return l;
}

// The host's ranking value: NaN ranks as -inf.
__device__ __forceinline__ float rank_value(float x) { return isnan(x) ? -INFINITY : x; }

__device__ __forceinline__ bool greedy_before(float av, std::int32_t ai, float bv, std::int32_t bi) {
  return av > bv || (av == bv && ai < bi);
}

__device__ PrepPartial combine(PrepPartial a, PrepPartial b) {
  PrepPartial r;
  const bool take_b = greedy_before(b.best_v, b.best_i, a.best_v, a.best_i);
  r.best_v = take_b ? b.best_v : a.best_v;
  r.best_i = take_b ? b.best_i : a.best_i;
  r.bad = min(a.bad, b.bad);
  r.unmasked = a.unmasked + b.unmasked;
  return r;
}

__device__ PrepPartial block_combine(PrepPartial v, PrepPartial* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    PrepPartial other{__shfl_xor_sync(0xffffffffu, v.best_v, o), __shfl_xor_sync(0xffffffffu, v.best_i, o),
                      __shfl_xor_sync(0xffffffffu, v.bad, o), __shfl_xor_sync(0xffffffffu, v.unmasked, o)};
    v = combine(v, other);
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  PrepPartial r = scratch[0];
  for (int i = 1; i < warps; ++i) r = combine(r, scratch[i]);
  __syncthreads();
  return r;
}

// The last block of a grid to arrive gets true (and resets the ticket for the next launch).
__device__ bool last_block(unsigned int* ticket) {
  __shared__ bool last;
  __threadfence();  // this block's partial results are visible before its ticket is
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int t = atomicAdd(ticket, 1u);
    last = t == gridDim.x - 1;
    if (last) *ticket = 0;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

__global__ void __launch_bounds__(kSampleThreads)
    sample_prep_kernel(const float* __restrict__ x, int n, bool greedy, const SampleParams* __restrict__ params,
                       SampleOutput* __restrict__ out, std::byte* ws, SampleLayout l) {
  __shared__ PrepPartial scratch[32];
  auto* partials = reinterpret_cast<PrepPartial*>(ws + l.partials);
  auto* keys = reinterpret_cast<float*>(ws + l.keys_in);
  auto* idx = reinterpret_cast<std::int32_t*>(ws + l.idx_in);
  const float temperature = greedy ? 1.0f : params->temperature;
  PrepPartial mine{-INFINITY, INT_MAX, INT_MAX, 0};
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = x[i];
    if (isnan(v) || v == INFINITY) mine.bad = min(mine.bad, i);
    if (v != -INFINITY) ++mine.unmasked;
    const float r = rank_value(v);
    if (greedy) {
      if (greedy_before(r, i, mine.best_v, mine.best_i)) {
        mine.best_v = r;
        mine.best_i = i;
      }
    } else {
      // As the host: float32 division; + 0 makes -0 equal +0 for the radix order (the host's
      // comparison already treats them as equal, ties to the lower index).
      keys[i] = __fadd_rn(__fdiv_rn(r, temperature), 0.0f);
      idx[i] = i;
    }
  }
  mine = block_combine(mine, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = mine;
  if (!last_block(&reinterpret_cast<SampleTickets*>(ws + l.tickets)->prep)) return;
  PrepPartial all{-INFINITY, INT_MAX, INT_MAX, 0};
  for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += blockDim.x) all = combine(all, partials[b]);
  all = block_combine(all, scratch);
  if (threadIdx.x == 0) {
    out->bad_index = all.bad == INT_MAX ? -1 : all.bad;
    out->bad_value = all.bad == INT_MAX ? 0.0f : x[all.bad];
    out->unmasked = all.unmasked;
    if (greedy) {
      out->id = all.best_i;
      out->logit = x[all.best_i];
    }
  }
}

// The first index i < limit (in sorted order) whose cumulative mass passes `target`
// (`inclusive`: >=, else >), and that cumulative mass; limit - 1 if rounding finds none. `sums`
// holds the segments' prefix sums (sums[j] = mass before segment j). Run by one whole block.
struct Crossing {
  int index;
  double cumulative;
};
__device__ Crossing find_crossing(const float* keys, double top, const double* sums, int segments, int seg, int limit,
                                  double target, bool inclusive) {
  using Scan = cub::BlockScan<double, kSampleThreads>;
  __shared__ typename Scan::TempStorage scan_temp;
  __shared__ int segment;
  __shared__ int found_i[kSampleThreads];
  __shared__ double found_c[kSampleThreads];
  auto passes = [&](double c) { return inclusive ? c >= target : c > target; };
  if (threadIdx.x == 0) {
    segment = -1;
    for (int j = 0; j < segments && j * seg < limit; ++j)
      if (passes(sums[j + 1]) || (j + 1) * seg >= limit) {
        segment = j;
        break;
      }
  }
  __syncthreads();
  const int s0 = segment * seg, s1 = min(s0 + seg, limit);
  const int per = (s1 - s0 + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int b0 = min(s0 + static_cast<int>(threadIdx.x) * per, s1), b1 = min(b0 + per, s1);
  double local = 0;
  for (int i = b0; i < b1; ++i) local += exp(static_cast<double>(keys[i]) - top);
  double before = 0, segment_mass = 0;
  Scan(scan_temp).ExclusiveSum(local, before, segment_mass);
  double c = sums[segment] + before;
  found_i[threadIdx.x] = INT_MAX;
  for (int i = b0; i < b1; ++i) {
    c += exp(static_cast<double>(keys[i]) - top);
    if (passes(c)) {
      found_i[threadIdx.x] = i;
      found_c[threadIdx.x] = c;
      break;
    }
  }
  __syncthreads();
  __shared__ Crossing result;
  if (threadIdx.x == 0) {
    // None found (rounding): the last index, with the mass through it.
    result = {s1 - 1, sums[segment] + segment_mass};
    for (int t = 0; t < static_cast<int>(blockDim.x); ++t)
      if (found_i[t] != INT_MAX) {
        result = {found_i[t], found_c[t]};
        break;
      }
  }
  __syncthreads();
  return result;
}

__global__ void __launch_bounds__(kSampleThreads)
    sample_pick_kernel(const float* __restrict__ x, int n, const SampleParams* __restrict__ params,
                       SampleOutput* __restrict__ out, std::byte* ws, SampleLayout l) {
  __shared__ double scratch[32];
  __shared__ double sums[kPickBlocks + 1];
  const auto* keys = reinterpret_cast<const float*>(ws + l.keys_out);
  const auto* idx = reinterpret_cast<const std::int32_t*>(ws + l.idx_out);
  auto* segments = reinterpret_cast<double*>(ws + l.segments);
  const SampleParams p = *params;
  const int keep = p.top_k > 0 ? min(p.top_k, n) : n;
  const float top = keys[0];
  if (!isfinite(top)) {  // nothing has probability: the host falls back to the first candidate
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      out->id = idx[0];
      out->logit = x[idx[0]];
    }
    return;
  }
  const double dtop = static_cast<double>(top);
  const int seg = (keep + kPickBlocks - 1) / kPickBlocks;
  const int s0 = min(static_cast<int>(blockIdx.x) * seg, keep), s1 = min(s0 + seg, keep);
  double local = 0;
  for (int i = s0 + static_cast<int>(threadIdx.x); i < s1; i += blockDim.x)
    local += exp(static_cast<double>(keys[i]) - dtop);
  local = block_reduce(local, scratch, SumOp{});
  if (threadIdx.x == 0) segments[blockIdx.x] = local;
  if (!last_block(&reinterpret_cast<SampleTickets*>(ws + l.tickets)->pick)) return;
  if (threadIdx.x == 0) {
    sums[0] = 0;
    for (int j = 0; j < kPickBlocks; ++j) sums[j + 1] = sums[j] + segments[j];
  }
  __syncthreads();
  int limit = keep;
  double total = sums[kPickBlocks];
  if (p.top_p < 1.0f) {
    const Crossing c = find_crossing(keys, dtop, sums, kPickBlocks, seg, keep,
                                     static_cast<double>(p.top_p) * total, true);
    limit = c.index + 1;
    total = c.cumulative;
  }
  const Crossing pick = find_crossing(keys, dtop, sums, kPickBlocks, seg, limit, p.u * total, false);
  if (threadIdx.x == 0) {
    out->id = idx[pick.index];
    out->logit = x[idx[pick.index]];
  }
}

void check_rows(std::int64_t rows, std::int64_t n, const char* what) {
  if (rows < 0 || n <= 0 || n > 0x7fffffff || rows > 0x7fffffff)
    throw std::invalid_argument(std::string(what) + ": bad shape");
}

template <class T>
void launch_argmax(const T* x, std::int64_t rows, std::int64_t n, std::int32_t* out, cudaStream_t stream) {
  check_rows(rows, n, "argmax_rows");
  if (rows == 0) return;
  argmax_kernel<T><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, n, out);
  ZOO_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_log_softmax(const T* x, float* out, std::int64_t rows, std::int64_t n, cudaStream_t stream) {
  check_rows(rows, n, "log_softmax_rows");
  if (rows == 0) return;
  log_softmax_kernel<T><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, out, n);
  ZOO_CUDA_CHECK_LAUNCH();
}

std::int64_t top_k_chunks(std::int64_t n) { return (n + kChunk - 1) / kChunk; }

template <class T>
void launch_top_k(const T* x, std::int64_t rows, std::int64_t n, int k, std::int32_t* indices, float* values,
                  void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  check_rows(rows, n, "top_k_rows");
  if (k < 1 || k > kMaxTopK || k > n)
    throw std::invalid_argument("top_k_rows: k=" + std::to_string(k) + " must be in [1, min(n, " +
                                std::to_string(kMaxTopK) + ")]");
  if (rows == 0) return;
  const std::int64_t chunks = top_k_chunks(n);
  if (chunks > 65535) throw std::invalid_argument("top_k_rows: row too long");
  if (chunks == 1) {
    // The chunk's candidates are the answer; values go to a scratch slot when not wanted.
    if (!values && workspace_bytes < top_k_workspace_bytes(rows, n, k))
      throw std::invalid_argument("top_k_rows: workspace too small");
    float* v = values ? values : static_cast<float*>(workspace);
    top_k_chunk_kernel<T><<<dim3(1, static_cast<unsigned>(rows)), kTopKThreads, 0, stream>>>(x, n, k, 1, v, indices);
    ZOO_CUDA_CHECK_LAUNCH();
    return;
  }
  if (workspace_bytes < top_k_workspace_bytes(rows, n, k)) throw std::invalid_argument("top_k_rows: workspace too small");
  const std::int64_t per_row = chunks * k;
  float* cand_v = static_cast<float*>(workspace);
  auto* cand_i = reinterpret_cast<std::int32_t*>(cand_v + rows * per_row);
  top_k_chunk_kernel<T><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows)), kTopKThreads, 0, stream>>>(
      x, n, k, chunks, cand_v, cand_i);
  ZOO_CUDA_CHECK_LAUNCH();
  top_k_merge_kernel<<<static_cast<unsigned>(rows), kTopKThreads, 0, stream>>>(cand_v, cand_i, per_row, k, values,
                                                                             indices);
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void argmax_rows(const float* x, std::int64_t rows, std::int64_t n, std::int32_t* out, cudaStream_t stream) {
  launch_argmax(x, rows, n, out, stream);
}
void argmax_rows(const Bf16* x, std::int64_t rows, std::int64_t n, std::int32_t* out, cudaStream_t stream) {
  launch_argmax(dev(x), rows, n, out, stream);
}
void log_softmax_rows(const float* x, float* out, std::int64_t rows, std::int64_t n, cudaStream_t stream) {
  launch_log_softmax(x, out, rows, n, stream);
}
void log_softmax_rows(const Bf16* x, float* out, std::int64_t rows, std::int64_t n, cudaStream_t stream) {
  launch_log_softmax(dev(x), out, rows, n, stream);
}

std::size_t top_k_workspace_bytes(std::int64_t rows, std::int64_t n, int k) {
  if (rows <= 0 || n <= 0 || k <= 0) return 0;
  return static_cast<std::size_t>(rows) * static_cast<std::size_t>(top_k_chunks(n)) * static_cast<std::size_t>(k) *
         (sizeof(float) + sizeof(std::int32_t));
}

void top_k_rows(const float* x, std::int64_t rows, std::int64_t n, int k, std::int32_t* indices, float* values,
                void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  launch_top_k(x, rows, n, k, indices, values, workspace, workspace_bytes, stream);
}
void top_k_rows(const Bf16* x, std::int64_t rows, std::int64_t n, int k, std::int32_t* indices, float* values,
                void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  launch_top_k(dev(x), rows, n, k, indices, values, workspace, workspace_bytes, stream);
}

std::size_t sample_workspace_bytes(std::int64_t n) {
  check_rows(1, n, "sample_row");
  return sample_layout(n).total;
}

void sample_row(const float* logits, std::int64_t n, bool greedy, const SampleParams* params, SampleOutput* out,
                void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  check_rows(1, n, "sample_row");
  const SampleLayout l = sample_layout(n);
  if (workspace_bytes < l.total) throw std::invalid_argument("sample_row: workspace too small");
  auto* ws = static_cast<std::byte*>(workspace);
  const int count = static_cast<int>(n);
  const int prep_blocks =
      static_cast<int>(std::min<std::int64_t>(kPrepBlocksMax, (n + 4 * kSampleThreads - 1) / (4 * kSampleThreads)));
  sample_prep_kernel<<<prep_blocks, kSampleThreads, 0, stream>>>(logits, count, greedy, params, out, ws, l);
  ZOO_CUDA_CHECK_LAUNCH();
  if (greedy) return;
  std::size_t sort_bytes = l.sort_bytes;
  ZOO_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      ws + l.sort_temp, sort_bytes, reinterpret_cast<const float*>(ws + l.keys_in),
      reinterpret_cast<float*>(ws + l.keys_out), reinterpret_cast<const std::int32_t*>(ws + l.idx_in),
      reinterpret_cast<std::int32_t*>(ws + l.idx_out), count, 0, 32, stream));
  sample_pick_kernel<<<kPickBlocks, kSampleThreads, 0, stream>>>(logits, count, params, out, ws, l);
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
