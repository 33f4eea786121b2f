#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "zoo/kernels/cuda/common.hpp"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {

// Linear layers through cuBLASLt: Y[m, n] = X[m, k] @ W[n, k]^T with bf16 operands, float32
// accumulation, and a bf16 or float32 result, all row-major (W laid out like a torch Linear
// weight). With `accumulate`, Y += X @ W^T (beta = 1): a residual add that costs nothing extra.
// With a bf16 Y, the errors measured on an H200 (CUDA 13.0) are those of two roundings, as if
// the product were rounded to bf16 before the add: like transformers' bf16(bf16(x @ W^T) + h).
//
// Few rows (m <= gemv_max_rows(), decode at batch 1 is m = 1) go to a GEMV kernel instead, which
// streams W with 16-byte loads at close to the copy bandwidth, where cuBLASLt's tiles leave much of
// the GPU idle. It keeps these semantics, accumulate included (bf16(bf16(p) + y) by construction),
// and needs k % 8 == 0 and 16-byte aligned X and W; other calls take cuBLASLt. Its sums are
// float32 too, in another order: results agree with cuBLASLt's to the same tolerances, not bitwise.
//
// Owns the cuBLASLt handle and a workspace; descriptors, layouts and the heuristic's algorithm
// are cached per shape, so after the first call for a shape a call allocates nothing and never
// synchronizes: it is stream-ordered and may be captured in a CUDA graph (capture a shape only
// after one uncaptured call, or accept the host-side heuristic query during capture).
// One Gemm per thread (the plan cache is not locked) and per device.
class Gemm {
 public:
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{32} << 20;
  // Rows up to which the GEMV kernel is used unless ZOO_GEMV (0..8, read at construction; 0 means
  // cuBLASLt always) says otherwise. Measured on an H200 (docs/performance.md): at m = 1 the GEMV
  // is 1.0-4x faster on every decode GEMM of the 0.6B-8B shapes; at m = 2-4 it loses 3-16% on the
  // 8B shapes, so only m = 1 takes it by default.
  static constexpr std::int64_t kDefaultGemvMaxRows = 1;
  // On sm_90+ the GEMV kernel is a programmatic dependent launch (kernels/src/cuda/launch.cuh;
  // ZOO_PDL=0 turns it off): it starts streaming W while the kernel before it in the stream still
  // runs, and waits for that kernel only before it reads X and writes Y. W (a weight) must
  // therefore not be written by the kernel launched just before the call.

  explicit Gemm(std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~Gemm();
  Gemm(Gemm&&) noexcept;
  Gemm& operator=(Gemm&&) noexcept;
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void linear(const Bf16* x, const Bf16* w, Bf16* y, std::int64_t m, std::int64_t n, std::int64_t k,
              cudaStream_t stream, bool accumulate = false);
  void linear(const Bf16* x, const Bf16* w, float* y, std::int64_t m, std::int64_t n, std::int64_t k,
              cudaStream_t stream, bool accumulate = false);
  // Y = bf16(X @ W^T + bias) with the bias (bf16, [n]) added to the float32 sum before the single
  // rounding, as torch's bf16 Linear does (cuBLASLt's bias epilogue; also at m = 1, where the GEMV
  // kernel would round twice). A null bias is plain linear().
  void linear_bias(const Bf16* x, const Bf16* w, const Bf16* bias, Bf16* y, std::int64_t m, std::int64_t n,
                   std::int64_t k, cudaStream_t stream);

  // A gated MLP's input projection: act = silu_and_mul(x @ w^T) (ops.hpp's rounding) for a packed
  // w [2 * inter, k] with the gate rows first. At m = 1 on the GEMV path it is one kernel that never
  // writes the [1, 2 * inter] projection (gate_up is then left untouched); otherwise the projection
  // goes to gate_up [m, 2 * inter] and silu_and_mul follows. ZOO_GEMV_SILU=0 (read at construction)
  // keeps the two kernels everywhere. Results are the same either way (gemv_test checks).
  void linear_silu_mul(const Bf16* x, const Bf16* w, Bf16* gate_up, Bf16* act, std::int64_t m, std::int64_t inter,
                       std::int64_t k, cudaStream_t stream);
  // The same for any gated activation: out = act_and_mul(act, x @ w^T), fused at m = 1 likewise.
  void linear_act_mul(GatedActivation act, const Bf16* x, const Bf16* w, Bf16* gate_up, Bf16* out, std::int64_t m,
                      std::int64_t inter, std::int64_t k, cudaStream_t stream);

  // A mixture of experts' grouped projection (moe.hpp's prefill path): for each group g with
  // host_counts[g] > 0, Y[off_g, off_g + c_g) = X[off_g, off_g + c_g) @ W_g^T, where
  // W_g = w + g * w_stride is [n, k] row-major, c_g = host_counts[g] and off_g the sum of the counts
  // before g. X [sum c, k], Y [sum c, n], bf16, float32 accumulation rounded once, as linear(). One
  // cuBLAS grouped GEMM (cublasGemmGroupedBatchedEx, a problem per non-empty group); one
  // cublasGemmEx per group where the library refuses the grouped call for these types.
  // Unlike linear() it is NOT capturable in a CUDA graph (std::logic_error while `stream` captures):
  // the counts are host memory (the caller reads moe_group's counts back first), and the groups'
  // matrix pointers go to the device through pinned staging buffers that are reused every other
  // call, so a call may block the host until the grouped GEMM two calls back has finished. The
  // first call creates a cuBLAS handle; a larger group count than before grows the staging.
  void grouped_linear(const Bf16* x, const Bf16* w, std::int64_t w_stride, const std::int32_t* host_counts, int groups,
                      Bf16* y, std::int64_t n, std::int64_t k, cudaStream_t stream);

  // Number of distinct shapes planned so far (for tests of the cache).
  std::size_t cached_plans() const;

  // The GEMV kernel's row limit (0..8; 0: cuBLASLt for every call), and how many calls took it.
  void set_gemv_max_rows(std::int64_t rows);
  std::int64_t gemv_max_rows() const;
  std::size_t gemv_calls() const;

  // Batch invariance: every row of Y bitwise the same whatever m is and wherever the row sits, so
  // that a sequence's logits do not depend on what else shares its step. On, every linear() takes
  // one cuBLASLt algorithm per (n, k, output type, alignment, bias), chosen once for
  // kInvariantAnchorRows rows among those that do not split k (a split's partial sums would be
  // added in an order that depends on m); the GEMV kernel (another reduction order) is not used,
  // fused activations included. Slower at m = 1 (no GEMV), and a std::runtime_error where the
  // library will not run the anchor's algorithm at some m. grouped_linear() is not covered.
  static constexpr std::int64_t kInvariantAnchorRows = 256;
  void set_batch_invariant(bool on);
  bool batch_invariant() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zoo::kernels::cuda
