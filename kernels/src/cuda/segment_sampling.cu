// One pick per segment of a row (a multi-codebook head's output) by the rule
// zoo::SegmentSampleRule::threshold_top_k_index_cdf; see sample_segments in ops.hpp.
//
// Bitwise agreement with the host reference matters more than speed here (segments are short and
// few): every float64 sum runs in the reference's order on one thread, and only what has no order
// (the checks, the ranks, the exps) runs in parallel. Ranks come from counting, O(width^2) compares
// from shared memory, which at the widths allowed costs a few microseconds and needs no sort.
#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>

#include "device_utils.cuh"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {
namespace {

constexpr int kSegmentThreads = 1024;

// (value, index) of a first maximal entry; NaN never wins (a NaN segment is refused anyway).
struct Top {
  float v;
  int i;
};
__device__ __forceinline__ Top first_max(Top a, Top b) {
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}

__global__ void __launch_bounds__(kSegmentThreads)
    sample_segments_kernel(const float* __restrict__ logits, int width, const SegmentSampleParams* __restrict__ params,
                           const double* __restrict__ uniforms, SampleOutput* __restrict__ out,
                           const std::int32_t* __restrict__ rows, std::int64_t row_stride) {
  extern __shared__ double shared[];
  double* mass = shared;                              // [width], by rank: exp(x / T - top), then probabilities
  float* x = reinterpret_cast<float*>(mass + width);  // [width], the segment
  int* rank = reinterpret_cast<int*>(x + width);      // [width], a survivor's rank, else -1
  __shared__ int first_nan, first_inf, unmasked, survivors, kept;
  __shared__ double total;
  __shared__ Top warp_top[32];

  // Block (seg, pick): segment seg of pick `pick`'s row, with that pick's request.
  const int tid = threadIdx.x, seg = blockIdx.x, pick = blockIdx.y;
  const std::int64_t first = static_cast<std::int64_t>(pick) * gridDim.x;  // the pick's first segment
  params += pick;
  uniforms += first;
  out += first;
  const float* row = logits + static_cast<std::int64_t>(rows ? rows[pick] : pick) * row_stride +
                     static_cast<std::int64_t>(seg) * width;
  if (tid == 0) {
    first_nan = INT_MAX;
    first_inf = INT_MAX;
    unmasked = 0;
    survivors = 0;
  }
  __syncthreads();
  Top top{-INFINITY, INT_MAX};
  int my_unmasked = 0;
  for (int i = tid; i < width; i += blockDim.x) {
    const float v = row[i];
    x[i] = v;
    if (isnan(v)) atomicMin(&first_nan, i);
    else if (isinf(v) && v > 0) atomicMin(&first_inf, i);
    my_unmasked += !(isinf(v) && v < 0);
    top = first_max(top, {v, i});
  }
  for (int o = 16; o > 0; o >>= 1) {
    const Top other{__shfl_xor_sync(0xffffffffu, top.v, o), __shfl_xor_sync(0xffffffffu, top.i, o)};
    top = first_max(top, other);
    my_unmasked += __shfl_xor_sync(0xffffffffu, my_unmasked, o);
  }
  if ((tid & 31) == 0) {
    warp_top[tid >> 5] = top;
    atomicAdd(&unmasked, my_unmasked);
  }
  __syncthreads();
  top = warp_top[0];
  for (int w = 1; w < static_cast<int>((blockDim.x + 31) >> 5); ++w) top = first_max(top, warp_top[w]);
  const int best = top.i == INT_MAX ? 0 : top.i;  // all NaN: any index, the segment is refused
  // The reference looks for NaN first, so it names a NaN even when a +inf comes earlier.
  const int bad = first_nan != INT_MAX ? first_nan : first_inf != INT_MAX ? first_inf : -1;
  SampleOutput& o = out[seg];
  const float temperature = params->temperature;
  if (temperature <= 0.0f || bad >= 0 || unmasked == 0) {
    // Greedy, or a segment the caller refuses (then the id is only what argmax gave).
    if (tid == 0) o = {best, x[best], bad, bad >= 0 ? x[bad] : 0.0f, unmasked, 0};
    return;
  }

  // x / T (in float64) is increasing in x, so the survivors and their ranks are found on x itself.
  const double t = temperature, scaled_top = static_cast<double>(x[best]) / t;
  const int k = params->top_k <= 0 || params->top_k >= width ? width : params->top_k;
  for (int i = tid; i < width; i += blockDim.x) {
    const float v = x[i];
    int r = -1;
    if (!isinf(v)) {
      // Entries above v, and equal ones at lower indices: v's place in the top-p ranking. v is
      // >= the k-th largest value exactly when fewer than k entries are above it.
      int above = 0, tied_before = 0;
      for (int j = 0; j < width; ++j) {
        const float w = x[j];
        above += w > v;
        tied_before += (w == v) & (j < i);
      }
      if (above < k) {
        r = above + tied_before;
        mass[r] = exp(static_cast<double>(v) / t - scaled_top);
        atomicAdd(&survivors, 1);
      }
    }
    rank[i] = r;
  }
  __syncthreads();
  // Survivors hold ranks 0..survivors-1 (whatever ranks before one is >= it, so survives too).
  if (tid == 0) {
    double sum = 0;  // in index order, as the reference sums its softmax denominator
    for (int i = 0; i < width; ++i)
      if (rank[i] >= 0) sum += mass[rank[i]];
    int n = survivors;
    const float top_p = params->top_p;
    if (top_p < 1.0f) {
      // Rank r is dropped once the mass ranked before it exceeds top_p (rank 0 always stays).
      const double p = top_p;
      double cum = 0;
      int r = 0;
      while (r < n && (r == 0 || cum / sum <= p)) cum += mass[r++];
      n = r;
      sum = cum;
    }
    kept = n;
    total = sum;
  }
  __syncthreads();
  for (int r = tid; r < kept; r += blockDim.x) mass[r] /= total;
  __syncthreads();
  if (tid == 0) {
    // The inverse CDF in index order: the first kept index whose cumulative probability exceeds u;
    // u within rounding of 1 gives the last index with mass.
    const double u = uniforms[seg];
    double cum = 0;
    int last = best;
    for (int i = 0; i < width; ++i) {
      const int r = rank[i];
      if (r < 0 || r >= kept || mass[r] <= 0) continue;
      last = i;
      cum += mass[r];
      if (u < cum) break;
    }
    o = {last, x[last], -1, 0.0f, unmasked, 0};
  }
}

}  // namespace

void sample_segments(const float* logits, std::int64_t segments, std::int64_t width, const SegmentSampleParams* params,
                     const double* u, SampleOutput* out, cudaStream_t stream, std::int64_t picks,
                     const std::int32_t* rows, std::int64_t row_stride) {
  if (segments <= 0 || segments > INT_MAX || width <= 0 || width > kSegmentSampleMaxWidth)
    throw std::invalid_argument("sample_segments: " + std::to_string(segments) + " segments of " +
                                std::to_string(width) + " (width must be within 1.." +
                                std::to_string(kSegmentSampleMaxWidth) + ")");
  if (picks <= 0 || picks > 65535 || row_stride < 0 || (picks > 1 && row_stride < segments * width))
    throw std::invalid_argument("sample_segments: " + std::to_string(picks) + " picks of rows " +
                                std::to_string(row_stride) + " apart (1..65535 picks of whole rows)");
  const int threads = static_cast<int>(std::min<std::int64_t>(kSegmentThreads, (width + 31) / 32 * 32));
  const std::size_t shared = static_cast<std::size_t>(width) * (sizeof(double) + sizeof(float) + sizeof(int));
  const dim3 grid(static_cast<unsigned>(segments), static_cast<unsigned>(picks));
  sample_segments_kernel<<<grid, threads, shared, stream>>>(logits, static_cast<int>(width), params, u, out, rows,
                                                            row_stride);
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
