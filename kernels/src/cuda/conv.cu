// conv.hpp's kernels: Snake, row sums, im2col (with Snake fused), the transposed convolution's
// overlap-add, the direct convolution for few output channels, and the GEMM orchestration.
// sinf, not __sinf: Snake's argument alpha * x reaches hundreds on deep random stacks, where the
// fast intrinsic loses most of its bits.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "zoo/kernels/cuda/conv.hpp"

namespace zoo::kernels::cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t work, int threads = kThreads) {
  const std::int64_t blocks = (work + threads - 1) / threads;
  const std::int64_t cap = std::int64_t{device_properties().multiprocessors} * 32;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

// As the CPU op and torch: x + (1 / (alpha + 1e-9)) * sin(alpha * x)^2.
__device__ __forceinline__ float snake_of(float v, float alpha) {
  const float inv = 1.0f / (alpha + 1e-9f);
  const float s = sinf(alpha * v);
  return v + inv * (s * s);
}

__global__ void snake_kernel(const float* x, const float* __restrict__ alpha, float* y, std::int64_t n, int channels) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = snake_of(x[i], alpha[i % channels]);
}

__global__ void bias_rows_kernel(float* y, const float* __restrict__ bias, std::int64_t n, int width) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] += bias[i % width];
}

__global__ void sum_rows_kernel(const float* __restrict__ tables, std::int64_t table_rows, int width,
                                const std::int32_t* __restrict__ ids, int per_row, std::int64_t rows,
                                float* __restrict__ out) {
  const std::int64_t n = rows * width;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = i / width, c = i % width;
    float acc = 0.0f;
    for (int j = 0; j < per_row; ++j) {
      const std::int32_t id = ids[t * per_row + j];
      if (id >= 0 && id < table_rows) acc += tables[id * static_cast<std::int64_t>(width) + c];
    }
    out[i] = acc;
  }
}

// cols[r, k * in + c] = pre(x[r * stride - padding + k * dilation, c]), zero outside [0, length).
// One block per output row (grid-stride), threads over the row's kernel * in / VEC vectors.
template <int VEC, bool SNAKE>
__global__ void im2col_kernel(const float* __restrict__ x, const float* __restrict__ alpha, float* __restrict__ cols,
                              std::int64_t length, int in, int kernel, int stride, int padding, int dilation,
                              std::int64_t out_length) {
  const int row_vecs = kernel * in / VEC, in_vecs = in / VEC;
  for (std::int64_t r = blockIdx.x; r < out_length; r += gridDim.x) {
    float* dst = cols + r * static_cast<std::int64_t>(kernel) * in;
    const std::int64_t base = r * stride - padding;
    for (int v = threadIdx.x; v < row_vecs; v += blockDim.x) {
      const int k = v / in_vecs, c = (v - k * in_vecs) * VEC;
      const std::int64_t src = base + static_cast<std::int64_t>(k) * dilation;
      float out[VEC];
      if (src >= 0 && src < length) {
        if constexpr (VEC == 4) {
          const float4 q = *reinterpret_cast<const float4*>(x + src * in + c);
          out[0] = q.x, out[1] = q.y, out[2] = q.z, out[3] = q.w;
        } else {
          out[0] = x[src * in + c];
        }
        if constexpr (SNAKE) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) out[j] = snake_of(out[j], alpha[c + j]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) out[j] = 0.0f;
      }
      if constexpr (VEC == 4) {
        *reinterpret_cast<float4*>(dst + k * in + c) = make_float4(out[0], out[1], out[2], out[3]);
      } else {
        dst[k * in + c] = out[0];
      }
    }
  }
}

// y[t, o] = bias[o] + sum over input steps j (ascending) with k = t + padding - j * stride in
// [0, kernel) of cols[j, k * out + o]: each output step gathers its contributions (at most
// ceil(kernel / stride)), so nothing is written twice and no atomics are needed.
__global__ void col2im_kernel(const float* __restrict__ cols, const float* __restrict__ bias, float* __restrict__ y,
                              std::int64_t length, int out, int kernel, int stride, int padding,
                              std::int64_t out_length) {
  const std::int64_t n = out_length * out;
  const std::int64_t row = static_cast<std::int64_t>(kernel) * out;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = i / out;
    const int o = static_cast<int>(i - t * out);
    const std::int64_t tp = t + padding;
    const std::int64_t j_first = tp - kernel + 1 <= 0 ? 0 : (tp - kernel + stride) / stride;
    const std::int64_t j_last = std::min(length - 1, tp / stride);
    float acc = 0.0f;
    for (std::int64_t j = j_first; j <= j_last; ++j) acc += cols[j * row + (tp - j * stride) * out + o];
    y[i] = bias ? acc + bias[o] : acc;
  }
}

// One thread per output step, all (<= kConv1dDirectMaxOut) output channels: for a mono output the
// GEMM would use one column of its tiles.
template <bool SNAKE>
__global__ void direct_conv_kernel(const float* __restrict__ x, const float* __restrict__ packed,
                                   const float* __restrict__ bias, const float* __restrict__ alpha, float* y,
                                   std::int64_t length, int in, int out, int kernel, int stride, int padding,
                                   int dilation, std::int64_t out_length, bool accumulate) {
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < out_length;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float acc[kConv1dDirectMaxOut] = {};
    for (int k = 0; k < kernel; ++k) {
      const std::int64_t src = t * stride - padding + static_cast<std::int64_t>(k) * dilation;
      if (src < 0 || src >= length) continue;
      const float* row = x + src * in;
      for (int c = 0; c < in; ++c) {
        float v = row[c];
        if constexpr (SNAKE) v = snake_of(v, alpha[c]);
        for (int o = 0; o < out; ++o) acc[o] += v * packed[(static_cast<std::int64_t>(o) * kernel + k) * in + c];
      }
    }
    for (int o = 0; o < out; ++o) {
      float v = acc[o] + (bias ? bias[o] : 0.0f);
      if (accumulate) v += y[t * out + o];
      y[t * out + o] = v;
    }
  }
}

void check_workspace(const char* op, std::size_t need, std::size_t have, const float* workspace) {
  if (need > have || (need > 0 && workspace == nullptr))
    throw std::invalid_argument(std::string(op) + ": workspace of " + std::to_string(have) + " floats, needs " +
                                std::to_string(need));
}

bool pointwise(const Conv1dShape& s) { return s.kernel == 1 && s.stride == 1 && s.padding == 0; }

}  // namespace

void add_bias_rows_f32(float* y, const float* bias, std::int64_t rows, std::int64_t n, cudaStream_t stream) {
  if (rows * n == 0) return;
  bias_rows_kernel<<<grid_for(rows * n), kThreads, 0, stream>>>(y, bias, rows * n, static_cast<int>(n));
  ZOO_CUDA_CHECK_LAUNCH();
}

void snake(const float* x, const float* alpha, float* y, std::int64_t length, std::int64_t channels,
           cudaStream_t stream) {
  const std::int64_t n = length * channels;
  if (n <= 0) return;
  snake_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, alpha, y, n, static_cast<int>(channels));
  ZOO_CUDA_CHECK_LAUNCH();
}

void sum_rows(const float* tables, std::int64_t table_rows, std::int64_t width, const std::int32_t* ids,
              std::int64_t per_row, std::int64_t rows, float* out, cudaStream_t stream) {
  if (rows * width <= 0) return;
  sum_rows_kernel<<<grid_for(rows * width), kThreads, 0, stream>>>(tables, table_rows, static_cast<int>(width), ids,
                                                                   static_cast<int>(per_row), rows, out);
  ZOO_CUDA_CHECK_LAUNCH();
}

std::size_t conv1d_workspace_floats(const Conv1dShape& s, bool with_snake) {
  if (s.out_channels <= kConv1dDirectMaxOut) return 0;
  if (pointwise(s)) return with_snake ? static_cast<std::size_t>(s.length * s.in_channels) : 0;
  return static_cast<std::size_t>(s.out_length() * s.kernel * s.in_channels);
}

void conv1d(GemmF32& gemm, const float* x, const float* packed, const float* bias, float* y, const Conv1dShape& s,
            float* workspace, std::size_t workspace_floats, cudaStream_t stream, const float* snake_alpha,
            bool accumulate) {
  const std::int64_t out_len = s.checked_out_length();
  const std::int64_t cin = s.in_channels, cout = s.out_channels;
  check_workspace("conv1d", conv1d_workspace_floats(s, snake_alpha != nullptr), workspace_floats, workspace);
  const int in = static_cast<int>(cin), kernel = static_cast<int>(s.kernel), stride = static_cast<int>(s.stride),
            padding = static_cast<int>(s.padding), dilation = static_cast<int>(s.dilation);
  if (cout <= kConv1dDirectMaxOut) {
    const unsigned grid = grid_for(out_len, 128);
    if (snake_alpha)
      direct_conv_kernel<true><<<grid, 128, 0, stream>>>(x, packed, bias, snake_alpha, y, s.length, in,
                                                         static_cast<int>(cout), kernel, stride, padding, dilation,
                                                         out_len, accumulate);
    else
      direct_conv_kernel<false><<<grid, 128, 0, stream>>>(x, packed, bias, nullptr, y, s.length, in,
                                                          static_cast<int>(cout), kernel, stride, padding, dilation,
                                                          out_len, accumulate);
    ZOO_CUDA_CHECK_LAUNCH();
    return;
  }
  const float* a = x;
  if (pointwise(s)) {
    if (snake_alpha) {
      snake(x, snake_alpha, workspace, s.length, cin, stream);
      a = workspace;
    }
  } else {
    const std::int64_t row = s.kernel * cin;
    const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>(out_len, 1 << 20));
    const int threads = static_cast<int>(std::min<std::int64_t>(256, std::max<std::int64_t>(32, (row + 31) / 32 * 32)));
    const bool vec4 = cin % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                      reinterpret_cast<std::uintptr_t>(workspace) % 16 == 0;
    if (vec4 && snake_alpha)
      im2col_kernel<4, true><<<grid, threads, 0, stream>>>(x, snake_alpha, workspace, s.length, in, kernel, stride, padding, dilation, out_len);
    else if (vec4)
      im2col_kernel<4, false><<<grid, threads, 0, stream>>>(x, nullptr, workspace, s.length, in, kernel, stride, padding, dilation, out_len);
    else if (snake_alpha)
      im2col_kernel<1, true><<<grid, threads, 0, stream>>>(x, snake_alpha, workspace, s.length, in, kernel, stride, padding, dilation, out_len);
    else
      im2col_kernel<1, false><<<grid, threads, 0, stream>>>(x, nullptr, workspace, s.length, in, kernel, stride, padding, dilation, out_len);
    ZOO_CUDA_CHECK_LAUNCH();
    a = workspace;
  }
  gemm.linear(a, packed, bias, y, out_len, cout, pointwise(s) ? cin : s.kernel * cin, stream, accumulate);
}

std::size_t conv_transpose1d_workspace_floats(const ConvTranspose1dShape& s, bool with_snake) {
  return static_cast<std::size_t>((with_snake ? s.length * s.in_channels : 0) + s.length * s.kernel * s.out_channels);
}

void conv_transpose1d(GemmF32& gemm, const float* x, const float* packed, const float* bias, float* y,
                      const ConvTranspose1dShape& s, float* workspace, std::size_t workspace_floats,
                      cudaStream_t stream, const float* snake_alpha) {
  const std::int64_t out_len = s.checked_out_length();
  check_workspace("conv_transpose1d", conv_transpose1d_workspace_floats(s, snake_alpha != nullptr), workspace_floats,
                  workspace);
  const float* a = x;
  float* cols = workspace;
  if (snake_alpha) {
    snake(x, snake_alpha, workspace, s.length, s.in_channels, stream);
    a = workspace;
    cols = workspace + s.length * s.in_channels;
  }
  gemm.linear(a, packed, nullptr, cols, s.length, s.kernel * s.out_channels, s.in_channels, stream);
  col2im_kernel<<<grid_for(out_len * s.out_channels), kThreads, 0, stream>>>(
      cols, bias, y, s.length, static_cast<int>(s.out_channels), static_cast<int>(s.kernel),
      static_cast<int>(s.stride), static_cast<int>(s.padding), out_len);
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
