// Per-row reductions over logits: argmax, log-softmax, top-k.
#include <cmath>
#include <stdexcept>
#include <string>

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

}  // namespace zoo::kernels::cuda
