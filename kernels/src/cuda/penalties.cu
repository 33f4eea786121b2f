// Repetition, frequency and presence penalties over each sequence's own tokens (ops.hpp): counts
// per id in a workspace row (as vLLM's bincount), then one pass over the row.
#include <cstdint>

#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {
namespace {

constexpr int kPenaltyThreads = 512;

// A count per id: bit 30 marks "in the sequence", the bits below count its output occurrences.
constexpr std::int32_t kSeen = 1 << 30, kCount = kSeen - 1;

// zoo::apply_penalties with the same float operations, rounded to nearest as the host's are.
__global__ void __launch_bounds__(kPenaltyThreads)
    penalties_kernel(float* logits, std::int64_t n, const PenaltyRow* rows, const std::int32_t* tokens,
                     std::int32_t* workspace, const LogitBias* biases) {
  const PenaltyRow r = rows[blockIdx.x];
  std::int32_t* count = workspace + static_cast<std::int64_t>(blockIdx.x) * n;
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x) count[v] = 0;
  __syncthreads();
  const std::int32_t* seq = tokens + r.tokens_at;
  for (std::int32_t i = static_cast<std::int32_t>(threadIdx.x); i < r.length; i += static_cast<std::int32_t>(blockDim.x)) {
    if (i >= r.output_start) atomicAdd(&count[seq[i]], 1);
    atomicOr(&count[seq[i]], kSeen);
  }
  __syncthreads();
  const float* src = logits + static_cast<std::int64_t>(r.from_row) * n;
  float* dst = logits + static_cast<std::int64_t>(r.to_row) * n;
  if (r.bias_count > 0) {  // biases first: the copy, then each biased id, then the penalties read the copy
    for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x) dst[v] = src[v];
    __syncthreads();
    for (std::int32_t i = static_cast<std::int32_t>(threadIdx.x); i < r.bias_count; i += static_cast<std::int32_t>(blockDim.x)) {
      const LogitBias b = biases[r.bias_at + i];
      dst[b.id] = __fadd_rn(dst[b.id], b.bias);
    }
    __syncthreads();
    src = dst;
  }
  for (std::int64_t v = threadIdx.x; v < n; v += blockDim.x) {
    float x = src[v];
    const std::int32_t c = count[v];
    if (c != 0) {
      if (r.repetition != 1.0f) x = x > 0.0f ? __fdiv_rn(x, r.repetition) : __fmul_rn(x, r.repetition);
      if (const std::int32_t out = c & kCount; out > 0) {
        if (r.frequency != 0.0f) x = __fsub_rn(x, __fmul_rn(r.frequency, static_cast<float>(out)));
        if (r.presence != 0.0f) x = __fsub_rn(x, r.presence);
      }
    }
    dst[v] = x;
  }
}

__global__ void restore_kernel(const float* logits, std::int64_t n, const PenaltyRow* rows, std::int64_t count,
                               SampleOutput* out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const PenaltyRow r = rows[i];
  SampleOutput& o = out[r.pick];
  if (o.id >= 0 && o.id < n) o.logit = logits[static_cast<std::int64_t>(r.from_row) * n + o.id];
}

__global__ void scatter_kernel(std::int32_t* history, const std::int32_t* pairs, std::int64_t count) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const std::int32_t dest = pairs[i];
  if (dest >= 0) history[dest] = pairs[count + i];
}

unsigned blocks_for(std::int64_t count, int threads) { return static_cast<unsigned>((count + threads - 1) / threads); }

}  // namespace

std::size_t penalty_workspace_bytes(std::int64_t n) { return static_cast<std::size_t>(n) * 4; }

void apply_penalties_rows(float* logits, std::int64_t n, const PenaltyRow* rows, std::int64_t count,
                          const std::int32_t* tokens, void* workspace, cudaStream_t stream, const LogitBias* biases) {
  if (count <= 0) return;
  penalties_kernel<<<static_cast<unsigned>(count), kPenaltyThreads, 0, stream>>>(
      logits, n, rows, tokens, static_cast<std::int32_t*>(workspace), biases);
  ZOO_CUDA_CHECK_LAUNCH();
}

void restore_pick_logits(const float* logits, std::int64_t n, const PenaltyRow* rows, std::int64_t count,
                         SampleOutput* out, cudaStream_t stream) {
  if (count <= 0) return;
  restore_kernel<<<blocks_for(count, 128), 128, 0, stream>>>(logits, n, rows, count, out);
  ZOO_CUDA_CHECK_LAUNCH();
}

void scatter_tokens(std::int32_t* history, const std::int32_t* pairs, std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  scatter_kernel<<<blocks_for(count, 256), 256, 0, stream>>>(history, pairs, count);
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
