// Channels-last 1-D convolutions as GEMMs over the blocked `linear`.
//
// conv1d: for a tile of output steps, im2col copies the input rows each output step reads
// (kernel rows of `in` floats, zero rows in the padding) into cols[rows, kernel * in], and
// linear(cols, packed [out, kernel * in]) gives the tile's output. Tiles bound the im2col buffer
// (a 10 s waveform at 32 channels and kernel 7 would otherwise need ~200 MB).
//
// conv_transpose1d: every input step j contributes w[:, :, k]^T x[j] to output step
// j * stride - padding + k. One GEMM per tile gives cols[j, k, out] = packed[k, out, :] . x[j],
// then the columns are added into y (col2im). The add runs over output steps in parallel, each
// output step gathering its (at most ceil(kernel / stride)) contributions, so no two threads
// write the same row.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "zoo/kernels/conv_cpu.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::kernels::cpu {
namespace {

// im2col / column buffers hold about this many floats per tile (16 MiB): large enough that the
// GEMM sees hundreds of rows, small enough to stay far below the activations' own size.
constexpr std::int64_t kTileFloats = std::int64_t{1} << 22;
constexpr std::int64_t kElementwiseGrain = std::int64_t{1} << 14;

// The calling thread's im2col / column scratch, reused across calls (a tile is up to 16 MiB: a
// fresh allocation per call would page-fault it in every time). Portable code: this file is
// built once, for the baseline ISA, and reaches the SIMD kernels through the dispatched `linear`.
float* scratch(std::size_t count) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

std::int64_t tile_rows(std::int64_t row_floats, std::int64_t total_rows) {
  return std::clamp<std::int64_t>(kTileFloats / std::max<std::int64_t>(row_floats, 1), 1, std::max<std::int64_t>(total_rows, 1));
}

void add_bias_rows(float* y, const float* bias, std::int64_t rows, std::int64_t channels) {
  if (!bias) return;
  ThreadPool::global().parallel_for(rows, std::max<std::int64_t>(1, kElementwiseGrain / channels),
                                    [&](std::int64_t begin, std::int64_t end) {
                                      for (std::int64_t t = begin; t < end; ++t) {
                                        float* row = y + t * channels;
                                        for (std::int64_t c = 0; c < channels; ++c) row[c] += bias[c];
                                      }
                                    });
}

}  // namespace

std::int64_t Conv1dShape::out_length() const {
  if (stride < 1 || dilation < 1 || kernel < 1 || padding < 0) return 0;
  const std::int64_t span = length + 2 * padding - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

std::int64_t Conv1dShape::checked_out_length() const {
  const std::int64_t n = out_length();
  if (n <= 0 || in_channels < 1 || out_channels < 1)
    throw std::invalid_argument("conv1d: empty output for length " + std::to_string(length) + ", kernel " +
                                std::to_string(kernel) + ", padding " + std::to_string(padding));
  return n;
}

void pack_conv1d_weight(const float* weight, float* packed, const Conv1dShape& s) {
  for (std::int64_t o = 0; o < s.out_channels; ++o)
    for (std::int64_t i = 0; i < s.in_channels; ++i)
      for (std::int64_t k = 0; k < s.kernel; ++k)
        packed[(o * s.kernel + k) * s.in_channels + i] = weight[(o * s.in_channels + i) * s.kernel + k];
}

void conv1d(const float* x, const float* packed, const float* bias, float* y, const Conv1dShape& s) {
  const std::int64_t out_len = s.checked_out_length();
  const std::int64_t cin = s.in_channels, cout = s.out_channels, row = s.kernel * cin;
  if (s.kernel == 1 && s.stride == 1 && s.padding == 0) {
    linear(x, packed, y, out_len, cout, cin);  // a pointwise convolution is a plain linear
  } else {
    const std::int64_t rows = tile_rows(row, out_len);
    float* cols = scratch(static_cast<std::size_t>(rows * row));
    for (std::int64_t t0 = 0; t0 < out_len; t0 += rows) {
      const std::int64_t n = std::min(rows, out_len - t0);
      ThreadPool::global().parallel_for(n, std::max<std::int64_t>(1, kElementwiseGrain / row),
                                        [&](std::int64_t begin, std::int64_t end) {
                                          for (std::int64_t r = begin; r < end; ++r) {
                                            const std::int64_t base = (t0 + r) * s.stride - s.padding;
                                            for (std::int64_t k = 0; k < s.kernel; ++k) {
                                              const std::int64_t src = base + k * s.dilation;
                                              float* dst = cols + r * row + k * cin;
                                              if (src >= 0 && src < s.length)
                                                std::copy_n(x + src * cin, cin, dst);
                                              else
                                                std::fill_n(dst, cin, 0.0f);
                                            }
                                          }
                                        });
      linear(cols, packed, y + t0 * cout, n, cout, row);
    }
  }
  add_bias_rows(y, bias, out_len, cout);
}

std::int64_t ConvTranspose1dShape::out_length() const {
  if (stride < 1 || kernel < 1 || padding < 0 || output_padding < 0 || length < 1) return 0;
  const std::int64_t n = (length - 1) * stride - 2 * padding + kernel + output_padding;
  return n < 0 ? 0 : n;
}

std::int64_t ConvTranspose1dShape::checked_out_length() const {
  if (output_padding >= std::max<std::int64_t>(stride, 1))
    throw std::invalid_argument("conv_transpose1d: output_padding " + std::to_string(output_padding) +
                                " must be smaller than the stride " + std::to_string(stride));
  const std::int64_t n = out_length();
  if (n <= 0 || in_channels < 1 || out_channels < 1)
    throw std::invalid_argument("conv_transpose1d: empty output for length " + std::to_string(length));
  return n;
}

void pack_conv_transpose1d_weight(const float* weight, float* packed, const ConvTranspose1dShape& s) {
  for (std::int64_t i = 0; i < s.in_channels; ++i)
    for (std::int64_t o = 0; o < s.out_channels; ++o)
      for (std::int64_t k = 0; k < s.kernel; ++k)
        packed[(k * s.out_channels + o) * s.in_channels + i] = weight[(i * s.out_channels + o) * s.kernel + k];
}

void conv_transpose1d(const float* x, const float* packed, const float* bias, float* y,
                      const ConvTranspose1dShape& s) {
  const std::int64_t out_len = s.checked_out_length();
  const std::int64_t cin = s.in_channels, cout = s.out_channels, row = s.kernel * cout;
  std::fill_n(y, out_len * cout, 0.0f);
  const std::int64_t rows = tile_rows(row, s.length);
  float* cols = scratch(static_cast<std::size_t>(rows * row));
  for (std::int64_t j0 = 0; j0 < s.length; j0 += rows) {
    const std::int64_t n = std::min(rows, s.length - j0);
    linear(x + j0 * cin, packed, cols, n, row, cin);
    // Output steps this tile reaches: t = j * stride - padding + k for j in [j0, j0 + n).
    const std::int64_t t_lo = std::max<std::int64_t>(0, j0 * s.stride - s.padding);
    const std::int64_t t_hi = std::min(out_len, (j0 + n - 1) * s.stride - s.padding + s.kernel);
    if (t_hi <= t_lo) continue;
    ThreadPool::global().parallel_for(
        t_hi - t_lo, std::max<std::int64_t>(1, kElementwiseGrain / row), [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t t = t_lo + begin; t < t_lo + end; ++t) {
            float* dst = y + t * cout;
            // k = t + padding - j * stride in [0, kernel), j in the tile.
            const std::int64_t tp = t + s.padding;
            std::int64_t j_first = std::max(j0, tp - s.kernel + 1 <= 0 ? 0 : (tp - s.kernel + s.stride) / s.stride);
            const std::int64_t j_last = std::min(j0 + n - 1, tp / s.stride);
            for (std::int64_t j = j_first; j <= j_last; ++j) {
              const std::int64_t k = tp - j * s.stride;
              if (k < 0 || k >= s.kernel) continue;
              const float* src = cols + (j - j0) * row + k * cout;
              for (std::int64_t o = 0; o < cout; ++o) dst[o] += src[o];
            }
          }
        });
  }
  add_bias_rows(y, bias, out_len, cout);
}

}  // namespace zoo::kernels::cpu
