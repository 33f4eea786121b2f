#pragma once
// Float32 1-D convolution ops on CUDA, channels-last like the CPU ops (conv_cpu.hpp): a sequence
// is [length, channels] row-major and the weights are packed by the same pack_* functions, so a
// layer's packed weights serve both backends. cuDNN is not available everywhere Zoo runs on a GPU,
// so every convolution is a GEMM through cuBLASLt with CUBLAS_COMPUTE_32F: float32 operands and
// accumulation, TF32 off (TF32 drifts by ~1e-3 relative on deep random stacks).
//
//   conv1d: im2col (a row gather in this layout) into a workspace, then one GEMM
//     y[L_out, out] = cols[L_out, kernel * in] @ packed[out, kernel * in]^T with the bias added in
//     the GEMM's epilogue. A pointwise convolution reads x directly. Layers with a handful of
//     output channels (GEMM tiles would be mostly empty) take a direct kernel instead.
//   conv_transpose1d: one GEMM into per-input-step columns cols[L_in, kernel * out], then an
//     overlap-add (col2im) that gathers each output step's contributions and adds the bias.
//
// An optional Snake activation on the input, y = x + sin(alpha x)^2 / (alpha + 1e-9) per input
// channel, is fused into the gather that already reads the input (im2col / the direct kernel),
// so it costs no pass of its own there.
//
// Every pointer is device memory. Calls are stream-ordered and allocation-free once a GEMM shape
// has been planned; the caller owns the workspace (size from the *_workspace_floats functions).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "zoo/kernels/conv_cpu.hpp"
#include "zoo/kernels/cuda/common.hpp"

namespace zoo::kernels::cuda {

using Conv1dShape = cpu::Conv1dShape;
using ConvTranspose1dShape = cpu::ConvTranspose1dShape;

// Float32 GEMMs through cuBLASLt, TF32 off: Y[m, n] = X[m, k] @ W[n, k]^T (+ bias[n]) (+ Y when
// `accumulate`), all row-major. Plans are cached per shape (see Gemm in gemm.hpp); one object per
// thread and device.
class GemmF32 {
 public:
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{32} << 20;
  explicit GemmF32(std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~GemmF32();
  GemmF32(GemmF32&&) noexcept;
  GemmF32& operator=(GemmF32&&) noexcept;
  GemmF32(const GemmF32&) = delete;
  GemmF32& operator=(const GemmF32&) = delete;

  // bias may be null. With `accumulate`, Y = X @ W^T + bias + Y (a residual add in the epilogue).
  void linear(const float* x, const float* w, const float* bias, float* y, std::int64_t m, std::int64_t n,
              std::int64_t k, cudaStream_t stream, bool accumulate = false);
  std::size_t cached_plans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// y = x + sin(alpha[c] x)^2 * (1 / (alpha[c] + 1e-9)) over x [length, channels]; y may alias x.
void snake(const float* x, const float* alpha, float* y, std::int64_t length, std::int64_t channels,
           cudaStream_t stream);

// out[t, :] = sum_{j < per_row} tables[ids[t * per_row + j], :] for t < rows, summed in j order.
// tables: [table_rows, width]. Ids outside [0, table_rows) add nothing (callers validate on the host).
void sum_rows(const float* tables, std::int64_t table_rows, std::int64_t width, const std::int32_t* ids,
              std::int64_t per_row, std::int64_t rows, float* out, cudaStream_t stream);

// Output channels up to which conv1d uses the direct kernel instead of im2col + GEMM.
inline constexpr std::int64_t kConv1dDirectMaxOut = 4;

// Floats of workspace conv1d needs for `shape` (0 when it needs none).
std::size_t conv1d_workspace_floats(const Conv1dShape& shape, bool snake);
// y[out_length, out] = conv1d(snake_alpha ? snake(x) : x) + bias (+ y when `accumulate`).
// packed: pack_conv1d_weight's layout [out, kernel * in]. bias and snake_alpha may be null.
// Throws std::invalid_argument on an empty output or a workspace smaller than needed.
void conv1d(GemmF32& gemm, const float* x, const float* packed, const float* bias, float* y, const Conv1dShape& shape,
            float* workspace, std::size_t workspace_floats, cudaStream_t stream, const float* snake_alpha = nullptr,
            bool accumulate = false);

std::size_t conv_transpose1d_workspace_floats(const ConvTranspose1dShape& shape, bool snake);
// y[out_length, out] = conv_transpose1d(snake_alpha ? snake(x) : x) + bias. packed:
// pack_conv_transpose1d_weight's layout [kernel * out, in]. Same errors as the CPU op.
void conv_transpose1d(GemmF32& gemm, const float* x, const float* packed, const float* bias, float* y,
                      const ConvTranspose1dShape& shape, float* workspace, std::size_t workspace_floats,
                      cudaStream_t stream, const float* snake_alpha = nullptr);

}  // namespace zoo::kernels::cuda
