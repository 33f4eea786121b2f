#pragma once
// Float32 CUDA ops of bidirectional (encoder) stacks and signal front ends, the device side of
// kernels/encoder_cpu.hpp: same layouts (channels-last [steps, channels]), same formulas, same
// summation order where a row is reduced by one thread (so the nearest-code pick sees the scores
// the CPU computes from the same inputs). Every pointer is device memory; stream-ordered.
#include <cstdint>

#include "zoo/kernels/cuda/common.hpp"

namespace zoo::kernels::cuda {

// As cpu::layer_norm (two float32 passes per row); x and y may alias.
void layer_norm_f32(const float* x, const float* w, const float* b, float* y, std::int64_t rows, std::int64_t dim,
                    float eps, cudaStream_t stream);
// As cpu::per_channel_norm (statistics in double); x and y may alias. `stats`: 2 x channels floats
// of workspace.
void per_channel_norm_f32(const float* x, const float* w, const float* b, float* y, std::int64_t length,
                          std::int64_t channels, float eps, float* stats, cudaStream_t stream);
// As cpu::gelu_erf / cpu::elu over n values; x and y may alias.
void gelu_erf_f32(const float* x, float* y, std::int64_t n, cudaStream_t stream);
void elu_f32(const float* x, float* y, std::int64_t n, cudaStream_t stream);
// s[r, :] = softmax(scale * s[r, :]) in place over rows of n values (max subtracted, float32).
void scaled_softmax_rows_f32(float* s, std::int64_t rows, std::int64_t n, float scale, cudaStream_t stream);
// y[r, :] = x[r * every, :] * scale for r < rows (rows of `width`): keeping every `every`-th row.
void every_nth_row_scaled_f32(const float* x, std::int64_t every, std::int64_t rows, std::int64_t width, float scale,
                              float* y, cudaStream_t stream);
// y[c, r] = x[r, c] for x [rows, cols] (x row stride `x_stride` floats).
void transpose_f32(const float* x, std::int64_t x_stride, float* y, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream);
// Polyphase FIR as cpu::SincResampler::run: y[j] = sum_i x[(j / phases) * step - width + i] *
// filters[j % phases][i] (zero outside the input), taps in ascending order, j < out_length.
void polyphase_resample_f32(const float* x, std::int64_t length, const float* filters, std::int64_t phases,
                            std::int64_t taps, std::int64_t step, std::int64_t width, float* y, std::int64_t out_length,
                            cudaStream_t stream);
// Nearest code per row as a Euclidean codebook picks it: score[c] = -((|x|^2 - 2 dots[r, c]) +
// embed_sq[c]), the largest wins (ties to the lower code); also best minus second best. x [rows,
// dim], dots [rows, codes] = x @ embed^T. |x|^2 is summed in ascending order in float32, as the CPU.
void nearest_code_rows_f32(const float* x, std::int64_t dim, const float* dots, const float* embed_sq,
                           std::int64_t rows, std::int64_t codes, std::int32_t* index, float* gap, cudaStream_t stream);
// residual[r, :] -= table[index[r], :] over rows of `width`.
void subtract_table_rows_f32(float* residual, const float* table, const std::int32_t* index, std::int64_t rows,
                             std::int64_t width, cudaStream_t stream);

}  // namespace zoo::kernels::cuda
