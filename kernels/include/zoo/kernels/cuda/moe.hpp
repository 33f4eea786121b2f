#pragma once
// A sparse mixture-of-experts MLP in bf16, as transformers' sparse MoE blocks compute it:
//
//   router_logits = bf16(x @ Wr^T)                          [T, E] (a GEMM, then moe_route)
//   probs = softmax(router_logits) in float32; the k largest, descending (ties: lower expert first)
//   if normalize: top /= sum(top) in float32;  weights = bf16(top)
//   out[t] = 0; for each selected expert e of token t in ascending expert id order:
//     a = bf16(bf16(act(bf16(x[t] @ Wg[e]^T))) * bf16(x[t] @ Wu[e]^T))   (act_and_mul, ops.hpp)
//     y = bf16(bf16(a @ Wd[e]^T) * weight);  out[t] = bf16(out[t] + y)
//
// The ascending-id order is transformers' (it loops over the experts that were hit, in id order,
// and index_add_s each one's weighted output into a bf16 tensor), and with bf16 adds the order
// shows in the result.
//
// Weights are stacked per layer: w_gate_up [E][2I][H] (each expert's I gate rows, then its I up
// rows, like the dense packed gate|up) and w_down [E][H][I], all row-major bf16.
//
// Two ways through the experts:
//   - decode (few tokens): moe_route, moe_gate_up_act, moe_down_sum: three kernels that stream only
//     the selected experts' weights, like the GEMV of gemv.cu;
//   - prefill (many tokens): moe_route, moe_group (assignments sorted by expert), gather_rows,
//     grouped_gemm (gate|up, grouped_gemm.hpp, sizes from moe_group's offsets), act_and_mul,
//     grouped_gemm (down), moe_combine; or Gemm::grouped_linear in place of grouped_gemm, with the
//     counts read back to the host first (the earlier path, kept for A/B runs).
//
// Every pointer is device memory; every function here is stream-ordered, allocation-free, never
// synchronizes with the host and may be captured in a CUDA graph, as grouped_gemm may
// (Gemm::grouped_linear may not: gemm.hpp). Expert ids are not checked against E on the device
// (moe_route makes them): an id outside [0, E) reads outside the weights.
//
// Programmatic dependent launch (launch.cuh, sm_90+): moe_route, moe_gate_up_act and moe_down_sum
// are PDL launches. moe_gate_up_act reads the ids only after it waited for the kernel before it
// (moe_route), and lets its successor start only after that wait. moe_down_sum therefore reads
// ids and weights, and starts streaming its experts' down weights, BEFORE it waits for the kernel
// before it: ids and weights must have been written before a kernel that waits before it triggers
// (moe_gate_up_act on the same ids does) -- run the three in this order on one stream.
#include <cstdint>

#include "zoo/kernels/cuda/common.hpp"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {

inline constexpr int kMoeMaxExperts = 512;
inline constexpr int kMoeMaxTopK = 32;

// logits [T, E] float32 (the router GEMM's float32 output) are rounded to bf16 in place, so a tap
// of them shows transformers' bf16 router_logits; then ids [T, k] and weights [T, k] (bf16 values
// stored as float32) get each row's top k in probability order, as torch.topk returns them.
// Softmax and the normalization run in float32 (expf, float sums: the host's float32 softmax may
// differ in the last float bit, which rounding to bf16 hides except at a rounding boundary).
// 1 <= experts <= kMoeMaxExperts, 1 <= k <= min(kMoeMaxTopK, experts); else std::invalid_argument.
void moe_route(float* logits, std::int64_t tokens, int experts, int k, bool normalize, std::int32_t* ids,
               float* weights, cudaStream_t stream);

// out[a, 0..inter) = act_and_mul(act, x[t] @ w_gate_up[ids[a]]^T) for each assignment a = t * k + j,
// with gemv_act_mul's roundings (gemv.hpp): the [2I] projection rounded to bf16, then
// bf16(bf16(act(g)) * u). x [T, H], out [T * k, I]. Reads only the selected experts' weights, with
// 16-byte loads: hidden % 8 == 0 and x, w_gate_up 16-byte aligned (std::invalid_argument else).
// `multiprocessors` (DeviceProperties) sizes the split of H over warps so that T * k * 2I columns
// fill the GPU.
void moe_gate_up_act(GatedActivation act, const Bf16* x, const Bf16* w_gate_up, const std::int32_t* ids,
                     std::int64_t tokens, int k, std::int64_t inter, std::int64_t hidden, Bf16* out,
                     int multiprocessors, cudaStream_t stream);

// out[t, :] = the bf16 weighted sum over token t's k assignments in ascending expert id order (see
// the top): y = bf16(act[a] @ w_down[ids[a]]^T) summed in float32, then bf16(y * weights[a]), added
// to the bf16 row. act [T * k, I] (moe_gate_up_act's out), weights [T, k] as moe_route writes them.
// One kernel: each block owns a few output columns of one token and dots the k experts' rows of
// those columns (each a float32 sum in a fixed order: results are deterministic run to run).
// inter % 8 == 0, act and w_down 16-byte aligned, 1 <= k <= kMoeMaxTopK (std::invalid_argument
// else). See the top for what it reads before its PDL wait.
void moe_down_sum(const Bf16* act, const Bf16* w_down, const std::int32_t* ids, const float* weights,
                  std::int64_t tokens, int k, std::int64_t hidden, std::int64_t inter, Bf16* out,
                  int multiprocessors, cudaStream_t stream);

// ---- the grouped (prefill) path -----------------------------------------------------------------
// Sorts the T * k assignments by expert: counts[e] = assignments of expert e, offsets [E + 1] their
// exclusive prefix sums (offsets[E] = the assignments with a valid id), row_of[a] = the row of
// assignment a in expert-sorted order (expert e's rows are offsets[e] .. offsets[e + 1] - 1), and
// token_of[row] = the token the row came from. The order of one expert's rows varies run to run
// (atomics), which changes no per-row result of a GEMM. An id outside [0, experts) gets no row
// (row_of = -1; moe_combine skips it). counts need no zeroing beforehand. One block;
// T * k <= kMoeMaxAssignments, 1 <= experts <= kMoeMaxExperts (std::invalid_argument else).
inline constexpr std::int64_t kMoeMaxAssignments = std::int64_t{1} << 20;
void moe_group(const std::int32_t* ids, std::int64_t tokens, int k, int experts, std::int32_t* counts,
               std::int32_t* offsets, std::int32_t* row_of, std::int32_t* token_of, cudaStream_t stream);

// out[r, :] = x[token_of[r], :] for r < rows (the expert-sorted input of the grouped GEMM).
void gather_rows(const Bf16* x, const std::int32_t* token_of, std::int64_t rows, std::int64_t hidden, Bf16* out,
                 cudaStream_t stream);

// out[t, :] = sum over token t's assignments in ascending expert id order of bf16(y[row_of[a], :] *
// weights[a]), added to a bf16 zero row as moe_down_sum does (the same result when y holds the same
// bf16 down projections). y [rows, H] in sorted-row order (the down grouped GEMM's output).
// 1 <= k <= kMoeMaxTopK.
void moe_combine(const Bf16* y, const std::int32_t* row_of, const std::int32_t* ids, const float* weights,
                 std::int64_t tokens, int k, std::int64_t hidden, Bf16* out, cudaStream_t stream);

}  // namespace zoo::kernels::cuda
