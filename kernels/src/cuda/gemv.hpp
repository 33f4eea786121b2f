#pragma once
// The small-m path of Gemm::linear (private to kernels/src/cuda): Y[m, n] (+)= X[m, k] @ W[n, k]^T
// for 1 <= m <= kGemvMaxRows, streaming W once at close to the copy bandwidth. Decode at batch 1
// is all m = 1 GEMMs, where cuBLASLt's tiles leave most of the GPU idle for some shapes.
#include <cstdint>

#include "zoo/kernels/cuda/common.hpp"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda::detail {

inline constexpr std::int64_t kGemvMaxRows = 8;

// What the kernel needs: 16-byte vector loads of W and X rows (k % 8 == 0 and both base pointers
// 16-byte aligned), 1 <= m <= kGemvMaxRows, and sizes whose vector indices fit in 32 bits.
// Y has no alignment requirement (scalar stores).
bool gemv_supported(const void* x, const void* w, std::int64_t m, std::int64_t n, std::int64_t k);

// Launches the kernel on `stream`; no allocation, no synchronization (CUDA-graph capturable).
// `y_f32` picks the output type (float32, else bf16). With `accumulate`, Y += X @ W^T; for a bf16 Y
// the product is rounded to bf16 before the add, bf16(bf16(p) + y), as documented in gemm.hpp.
// `multiprocessors` sizes the split over k so that small n still fills the GPU.
void gemv(const Bf16* x, const Bf16* w, void* y, bool y_f32, std::int64_t m, std::int64_t n, std::int64_t k,
          bool accumulate, int multiprocessors, cudaStream_t stream);

// out[i] = bf16(bf16(act(g_i)) * u_i) with [g | u] = x @ w^T for one row x [1, k] and a packed
// w [2 * inter, k] (gate rows first): gemv, then act_and_mul (ops.hpp), in one kernel. Same
// preconditions as gemv with m = 1, n = 2 * inter.
void gemv_act_mul(GatedActivation act, const Bf16* x, const Bf16* w, Bf16* out, std::int64_t inter, std::int64_t k,
                  int multiprocessors, cudaStream_t stream);

}  // namespace zoo::kernels::cuda::detail
