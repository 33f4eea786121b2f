// Encoder-stack and signal front-end ops on CUDA (zoo/kernels/cuda/encoder.hpp). Rows are reduced
// by one block (norms, softmax) or, where the CPU reference sums sequentially and the result
// decides something discrete (the nearest code), by one thread in the same order.
#include <cmath>

#include "zoo/kernels/cuda/encoder.hpp"

namespace zoo::kernels::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t work) {
  const std::int64_t blocks = (work + kThreads - 1) / kThreads;
  const std::int64_t cap = std::int64_t{device_properties().multiprocessors} * 16;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

// Sum over the block; every thread gets the total.
template <class T>
__device__ T block_sum(T v, T* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = 0;
  for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) total += shared[i];
  return total;
}

__device__ float block_max(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) m = fmaxf(m, shared[i]);
  return m;
}

__global__ void layer_norm_kernel(const float* x, const float* __restrict__ w, const float* __restrict__ b, float* y,
                                  int dim, float eps) {
  __shared__ float shared[32];
  const float* xr = x + static_cast<std::int64_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<std::int64_t>(blockIdx.x) * dim;
  float s = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i];
  const float mean = block_sum(s, shared) / static_cast<float>(dim);
  float q = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) q += (xr[i] - mean) * (xr[i] - mean);
  const float inv = 1.0f / sqrtf(block_sum(q, shared) / static_cast<float>(dim) + eps);
  __syncthreads();  // every read of xr is done before y (which may alias x) is written
  for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
}

__global__ void channel_stats_kernel(const float* __restrict__ x, std::int64_t length, int channels, float eps,
                                     float* __restrict__ mean_out, float* __restrict__ scale_out) {
  __shared__ double shared[32];
  const int c = blockIdx.x;
  double s = 0.0;
  for (std::int64_t t = threadIdx.x; t < length; t += blockDim.x) s += x[t * channels + c];
  const double mean = block_sum(s, shared) / static_cast<double>(length);
  double q = 0.0;
  for (std::int64_t t = threadIdx.x; t < length; t += blockDim.x) {
    const double d = x[t * channels + c] - mean;
    q += d * d;
  }
  const double var = block_sum(q, shared) / static_cast<double>(length);
  if (threadIdx.x == 0) {
    mean_out[c] = static_cast<float>(mean);
    scale_out[c] = static_cast<float>(1.0 / sqrt(var + eps));
  }
}

__global__ void channel_apply_kernel(const float* x, const float* __restrict__ mean, const float* __restrict__ scale,
                                     const float* __restrict__ w, const float* __restrict__ b, float* y, std::int64_t n,
                                     int channels) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % channels);
    y[i] = (x[i] - mean[c]) * scale[c] * w[c] + b[c];
  }
}

__global__ void gelu_kernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

__global__ void elu_kernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] > 0.0f ? x[i] : expm1f(x[i]);
}

__global__ void softmax_kernel(float* s, std::int64_t n, float scale) {
  __shared__ float shared[32];
  float* row = s + static_cast<std::int64_t>(blockIdx.x) * n;
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    row[j] *= scale;
    m = fmaxf(m, row[j]);
  }
  const float max_score = block_max(m, shared);
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    row[j] = expf(row[j] - max_score);
    sum += row[j];
  }
  const float inv = 1.0f / block_sum(sum, shared);
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) row[j] *= inv;
}

__global__ void every_nth_kernel(const float* __restrict__ x, std::int64_t every, std::int64_t n, int width, float scale,
                                 float* __restrict__ y) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / width, c = i % width;
    y[i] = x[r * every * width + c] * scale;
  }
}

__global__ void transpose_kernel(const float* __restrict__ x, std::int64_t x_stride, float* __restrict__ y,
                                 std::int64_t rows, std::int64_t cols) {
  __shared__ float tile[32][33];
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * 32, c0 = static_cast<std::int64_t>(blockIdx.x) * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const std::int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = x[r * x_stride + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const std::int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) y[c * rows + r] = tile[threadIdx.x][i];
  }
}

__global__ void resample_kernel(const float* __restrict__ x, std::int64_t length, const float* __restrict__ filters,
                                int phases, int taps, int step, int width, float* __restrict__ y, std::int64_t out_length) {
  for (std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; j < out_length;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t frame = j / phases, phase = j % phases;
    const float* f = filters + phase * taps;
    const std::int64_t start = frame * step - width;
    float acc = 0.0f;
    for (int i = 0; i < taps; ++i) {
      const std::int64_t at = start + i;
      if (at >= 0 && at < length) acc = __fadd_rn(acc, __fmul_rn(x[at], f[i]));  // no FMA: the CPU's rounding
    }
    y[j] = acc;
  }
}

__global__ void nearest_code_kernel(const float* __restrict__ x, int dim, const float* __restrict__ dots,
                                    const float* __restrict__ embed_sq, std::int64_t rows, int codes,
                                    std::int32_t* __restrict__ index, float* __restrict__ gap) {
  for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float xx = 0.0f;
    for (int d = 0; d < dim; ++d) xx = __fadd_rn(xx, __fmul_rn(x[r * dim + d], x[r * dim + d]));
    float best = -INFINITY, second = -INFINITY;
    int arg = 0;
    for (int c = 0; c < codes; ++c) {
      const float score = -__fadd_rn(__fsub_rn(xx, __fmul_rn(2.0f, dots[r * codes + c])), embed_sq[c]);
      if (score > best) {
        second = best;
        best = score;
        arg = c;
      } else if (score > second) {
        second = score;
      }
    }
    index[r] = arg;
    gap[r] = best - second;
  }
}

__global__ void subtract_rows_kernel(float* residual, const float* __restrict__ table, const std::int32_t* __restrict__ index,
                                     std::int64_t n, int width) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / width, c = i % width;
    residual[i] -= table[static_cast<std::int64_t>(index[r]) * width + c];
  }
}

}  // namespace

void layer_norm_f32(const float* x, const float* w, const float* b, float* y, std::int64_t rows, std::int64_t dim,
                    float eps, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return;
  layer_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, b, y, static_cast<int>(dim), eps);
  ZOO_CUDA_CHECK_LAUNCH();
}

void per_channel_norm_f32(const float* x, const float* w, const float* b, float* y, std::int64_t length,
                          std::int64_t channels, float eps, float* stats, cudaStream_t stream) {
  if (length <= 0 || channels <= 0) return;
  float* mean = stats;
  float* scale = stats + channels;
  channel_stats_kernel<<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(x, length, static_cast<int>(channels),
                                                                                 eps, mean, scale);
  ZOO_CUDA_CHECK_LAUNCH();
  const std::int64_t n = length * channels;
  channel_apply_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, mean, scale, w, b, y, n, static_cast<int>(channels));
  ZOO_CUDA_CHECK_LAUNCH();
}

void gelu_erf_f32(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  gelu_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  ZOO_CUDA_CHECK_LAUNCH();
}

void elu_f32(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  elu_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  ZOO_CUDA_CHECK_LAUNCH();
}

void scaled_softmax_rows_f32(float* s, std::int64_t rows, std::int64_t n, float scale, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return;
  softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(s, n, scale);
  ZOO_CUDA_CHECK_LAUNCH();
}

void every_nth_row_scaled_f32(const float* x, std::int64_t every, std::int64_t rows, std::int64_t width, float scale,
                              float* y, cudaStream_t stream) {
  const std::int64_t n = rows * width;
  if (n <= 0) return;
  every_nth_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, every, n, static_cast<int>(width), scale, y);
  ZOO_CUDA_CHECK_LAUNCH();
}

void transpose_f32(const float* x, std::int64_t x_stride, float* y, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32));
  transpose_kernel<<<grid, dim3(32, 8), 0, stream>>>(x, x_stride, y, rows, cols);
  ZOO_CUDA_CHECK_LAUNCH();
}

void polyphase_resample_f32(const float* x, std::int64_t length, const float* filters, std::int64_t phases,
                            std::int64_t taps, std::int64_t step, std::int64_t width, float* y, std::int64_t out_length,
                            cudaStream_t stream) {
  if (out_length <= 0) return;
  resample_kernel<<<grid_for(out_length), kThreads, 0, stream>>>(x, length, filters, static_cast<int>(phases),
                                                                 static_cast<int>(taps), static_cast<int>(step),
                                                                 static_cast<int>(width), y, out_length);
  ZOO_CUDA_CHECK_LAUNCH();
}

void nearest_code_rows_f32(const float* x, std::int64_t dim, const float* dots, const float* embed_sq,
                           std::int64_t rows, std::int64_t codes, std::int32_t* index, float* gap, cudaStream_t stream) {
  if (rows <= 0) return;
  // One thread per row: a few hundred rows of ~1024 codes, and the row's scores are compared in
  // the CPU's order.
  const unsigned blocks = static_cast<unsigned>((rows + 63) / 64);
  nearest_code_kernel<<<blocks, 64, 0, stream>>>(x, static_cast<int>(dim), dots, embed_sq, rows, static_cast<int>(codes),
                                                 index, gap);
  ZOO_CUDA_CHECK_LAUNCH();
}

void subtract_table_rows_f32(float* residual, const float* table, const std::int32_t* index, std::int64_t rows,
                             std::int64_t width, cudaStream_t stream) {
  const std::int64_t n = rows * width;
  if (n <= 0) return;
  subtract_rows_kernel<<<grid_for(n), kThreads, 0, stream>>>(residual, table, index, n, static_cast<int>(width));
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
