#pragma once
// A bf16 grouped GEMM whose group sizes live in device memory: the mixture-of-experts prefill's
// expert projections without reading the per-expert counts back to the host (Gemm::grouped_linear
// needs them there), so the call never synchronizes and may be captured in a CUDA graph.
//
// Two kernels behind one call, both with 128-row x 64-deep tiles in shared memory (a 128-byte row
// per tile row, 16-byte chunks XOR-swizzled by the row), cp.async copies that zero-fill whatever
// lies past a group's rows, n or k, and an epilogue staged through shared memory for 16-byte stores:
//   - sm_90a (H100/H200): 128 x 256 tiles, two warpgroups each running wgmma.m64n256k16 from shared
//     memory descriptors (128-byte swizzle), a 4-stage pipeline (two k-tiles in flight while one
//     wgmma batch runs), one block an SM;
//   - every other device, and Hopper under ZOO_CUDA_PRE_HOPPER=1: mma.sync m16n8k16 with ldmatrix,
//     8 warps of 64 x 64 (or 64 x 32), 128 x 256 tiles with 4 or 3 stages where the shared memory
//     allows (sm_90, sm_80), else 128 x 128 with 3 stages (sm_86/89's 99 KB).
// Tiles are scheduled from the device offsets: each block scans the groups' tile counts
// ceil(rows_g / 128) and finds its (group, m-tile); the grid is sized for the bound
// ceil(max_rows / 128) + groups m-tiles, and blocks past the real count exit at once. A group's
// blocks are adjacent in launch order, so the blocks that share an expert's weight tile run
// together and its weights come from DRAM about once. Warps (mma.sync) or warpgroups (wgmma) whose
// rows all lie past the group's end skip their multiplies.
// On an H200 at the prefill shapes of a 128-expert, top-8 MoE it runs at 300-450 TFLOP/s, 1.3-1.7x cuBLAS's
// grouped GEMM (numbers in grouped_gemm.cu).
#include <cstdint>

#include "zoo/kernels/cuda/common.hpp"

namespace zoo::kernels::cuda {

// y[r, :] = bf16(x[r, :] @ W_g^T) for every row r in [offsets[g], offsets[g+1]), g = 0..groups-1,
// W_g = w + g * w_stride, [n, k] row-major (a torch Linear weight); x [rows, k], y [rows, n] row-major bf16,
// float32 accumulation rounded once. offsets: device int32 [groups + 1], non-decreasing, offsets[0] = 0,
// offsets[groups] <= max_rows. max_rows (host) bounds the rows (sizes the grid); rows past offsets[groups]
// are neither read nor written. Stream-ordered, no host sync, allocation-free, capturable in a CUDA graph.
// Needs k % 8 == 0, n % 8 == 0, 16-byte aligned x, w, y (std::invalid_argument with a clear message else).
// Also w_stride % 8 == 0 (each W_g 16-byte aligned) and 0 <= groups <= kMoeMaxExperts (512). Offsets
// are clamped to [0, max_rows] on the device (a bad offset never writes past max_rows rows). k == 0
// writes zeros. Results are deterministic (a fixed summation order per kernel), but the two kernels
// may differ from each other in the last bit.
void grouped_gemm(const Bf16* x, const Bf16* w, std::int64_t w_stride, const std::int32_t* offsets,
                  int groups, std::int64_t max_rows, std::int64_t n, std::int64_t k, Bf16* y,
                  cudaStream_t stream);

// Whether grouped_gemm takes the wgmma kernel on the current device now: an sm_90 device, the
// Hopper paths on (hopper_paths(), i.e. not ZOO_CUDA_PRE_HOPPER=1) and an sm_90a image of the kernel
// in this build (a build for compute_90 PTX or sm_90 without the "a" has none). Else mma.sync.
bool grouped_gemm_uses_wgmma();

}  // namespace zoo::kernels::cuda
