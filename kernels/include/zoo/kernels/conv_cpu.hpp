#pragma once
// CPU float32 1-D convolution ops, channels-last: a sequence is [length, channels] row-major, so
// every time step's channels are contiguous. That layout turns im2col into row copies and both
// convolutions into one GEMM through the blocked `linear` (cpu_ops.hpp). Weights come in torch
// layout and are packed once (pack_*) into the layout the GEMM reads.
#include <cstdint>

namespace zoo::kernels::cpu {

// Snake activation, per channel c: y = x + sin(alpha[c] * x)^2 / (alpha[c] + 1e-9).
// x, y: [length, channels] (may alias).
void snake(const float* x, const float* alpha, float* y, std::int64_t length, std::int64_t channels);

struct Conv1dShape {
  std::int64_t length = 0;  // input time steps
  std::int64_t in_channels = 0, out_channels = 0;
  std::int64_t kernel = 1, stride = 1, padding = 0, dilation = 1;  // zero padding on both ends

  // torch: floor((length + 2 padding - dilation (kernel - 1) - 1) / stride) + 1
  std::int64_t out_length() const;
  // out_length(), or std::invalid_argument when the shape has no output (the CPU and CUDA ops' check).
  std::int64_t checked_out_length() const;
};

// torch Conv1d weight [out, in, kernel] -> packed [out, kernel, in] (packed must hold out*in*kernel).
void pack_conv1d_weight(const float* weight, float* packed, const Conv1dShape& shape);

// y[out_length, out] = conv1d(x[length, in]) + bias (bias may be null). `packed` from
// pack_conv1d_weight. Throws std::invalid_argument on a shape with no output.
void conv1d(const float* x, const float* packed, const float* bias, float* y, const Conv1dShape& shape);

struct ConvTranspose1dShape {
  std::int64_t length = 0;  // input time steps
  std::int64_t in_channels = 0, out_channels = 0;
  std::int64_t kernel = 1, stride = 1, padding = 0, output_padding = 0;

  // torch: (length - 1) stride - 2 padding + kernel + output_padding
  std::int64_t out_length() const;
  // out_length(), or std::invalid_argument when output_padding >= max(stride, 1) or the output is
  // empty (the CPU and CUDA ops' check).
  std::int64_t checked_out_length() const;
};

// torch ConvTranspose1d weight [in, out, kernel] -> packed [kernel, out, in].
void pack_conv_transpose1d_weight(const float* weight, float* packed, const ConvTranspose1dShape& shape);

// y[out_length, out] = conv_transpose1d(x[length, in]) + bias (bias may be null): GEMM into
// per-input-step columns [kernel, out], then each column added at output step j*stride - padding + k.
// Throws std::invalid_argument when output_padding >= max(stride, 1) or the output is empty.
void conv_transpose1d(const float* x, const float* packed, const float* bias, float* y,
                      const ConvTranspose1dShape& shape);

}  // namespace zoo::kernels::cpu
