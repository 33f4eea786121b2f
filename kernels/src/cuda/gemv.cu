// Y[m, n] (+)= X[m, k] @ W[n, k]^T for a few rows of X: a memory-bound stream over W.
//
// A block is 8 warps. Each output column n (a row of W) is owned by `ks` warps of one block that
// split k into contiguous chunks (ks in {1, 2, 4, 8}, picked so that n * ks warps fill the GPU even
// for n = 1024); each warp walks its chunk with 16-byte loads, up to U of them in flight per lane,
// and keeps m float32 sums. The partial sums meet in shared memory and one thread per (row, column)
// writes the result, so the summation order is fixed: results are deterministic run to run.
// W is read with a no-L1-allocate load (it is streamed once per call); X is small and stays in
// L1/L2 across the columns of a block.
//
// The gated variant (one row of X) multiplies by a packed [2I, k] gate|up weight and writes
// act[i] = bf16(bf16(silu(gate_i)) * up_i) directly: a block's columns come in (gate i, up i)
// pairs, so the SiLU-and-multiply is its epilogue and the [1, 2I] projection never goes to memory.
// Its sums are the plain kernel's, term for term (same split, same order).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>

#include "device_utils.cuh"
#include "gemv.hpp"
#include "launch.cuh"
#include "stream_dot.cuh"

namespace zoo::kernels::cuda::detail {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kNoAct = -1;  // gemv_kernel's ACT for a plain product

__device__ __forceinline__ void store(float* y, float v, bool accumulate) { *y = accumulate ? *y + v : v; }
__device__ __forceinline__ void store(bf16* y, float v, bool accumulate) {
  // Accumulating into bf16 rounds the product first: bf16(bf16(p) + y), as cuBLASLt was measured to
  // (gemm.hpp), so both paths fall in one tolerance class.
  *y = __float2bfloat16_rn(accumulate ? round_bf16(v) + __bfloat162float(*y) : v);
}

// Loads in flight per lane: more for one row of X (the W stream is all there is), fewer when the
// X loads and sums of many rows compete for registers.
template <int M>
inline constexpr int kUnroll = M <= 2 ? 8 : (M <= 4 ? 4 : 2);

// ACT: none (a plain product), or the gated activation of the fused MLP input (gemv_act_mul).
template <int M, class Out, int ACT = kNoAct>
__global__ void __launch_bounds__(kThreads, (M <= 3 ? 4 : 3))
    gemv_kernel(const uint4* __restrict__ x, const uint4* __restrict__ w, Out* __restrict__ y, int n, int kv, int ks,
                bool accumulate) {
  constexpr bool GATED = ACT != kNoAct;
  static_assert(!GATED || M == 1, "the gated variant takes one row");
  constexpr int U = kUnroll<M>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int cols_per_block = kWarps / ks;
  const int vcol = blockIdx.x * cols_per_block + warp / ks;
  // Gated: virtual columns 2i and 2i + 1 are W rows i (gate) and n/2 + i (up).
  const int col = GATED ? (vcol & 1) * (n >> 1) + (vcol >> 1) : vcol;
  const int part = warp % ks;
  // Chunks of whole 32-vector (512-byte) steps, so every warp's loads stay coalesced.
  const int chunk = ((kv + ks - 1) / ks + 31) & ~31;
  const int v_begin = part * chunk;
  const int v_end = min(kv, v_begin + chunk);

  float acc[M];
#pragma unroll
  for (int i = 0; i < M; ++i) acc[i] = 0.0f;

  // The next kernel of the chain may start its own weight stream now (launch.cuh).
  allow_dependent_launch();
  // U loads per lane are issued before any is used, also in a short or partial last step
  // (predicated, not a one-load-at-a-time tail loop): a chunk of 128 vectors, as in the 1024-wide
  // head, is then one round trip to memory rather than four. The first U loads of W do not depend
  // on the previous kernel: they are in flight before the wait for X (for the 0.6B shapes that is
  // the whole of this warp's part of W).
  const uint4* wrow = w + static_cast<std::size_t>(col) * kv;
  const bool active = vcol < n;
  uint4 wv[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int v = v_begin + lane + 32 * u;
    wv[u] = active && v < v_end ? load_stream(wrow + v) : uint4{};
  }
  grid_dependency_wait();

  if (active) {
    for (int base = v_begin + lane; base < v_end; base += 32 * U) {
      if (base != v_begin + lane) {
#pragma unroll
        for (int u = 0; u < U; ++u) wv[u] = base + 32 * u < v_end ? load_stream(wrow + base + 32 * u) : uint4{};
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int v = base + 32 * u;
        if (v < v_end) {
#pragma unroll
          for (int i = 0; i < M; ++i) acc[i] = dot8(acc[i], wv[u], __ldg(x + static_cast<std::size_t>(i) * kv + v));
        }
      }
    }
  }

  __shared__ float partial[kWarps][M];
#pragma unroll
  for (int i = 0; i < M; ++i) {
    const float s = warp_sum(acc[i]);
    if (lane == 0) partial[warp][i] = s;
  }
  __syncthreads();
  const int t = threadIdx.x;
  if constexpr (GATED) {
    const int vc = blockIdx.x * cols_per_block + 2 * t;
    if (t < cols_per_block / 2 && vc < n) {
      float g = partial[2 * t * ks][0], u = partial[(2 * t + 1) * ks][0];
      for (int p = 1; p < ks; ++p) {
        g += partial[2 * t * ks + p][0];
        u += partial[(2 * t + 1) * ks + p][0];
      }
      // The projections as the plain kernel stores them (bf16), then act_and_mul's arithmetic.
      const float gr = round_bf16(g), ur = round_bf16(u);
      const float o = ACT == static_cast<int>(GatedActivation::silu)        ? silu_times(gr, ur)
                      : ACT == static_cast<int>(GatedActivation::gelu_tanh) ? gelu_tanh_times(gr, ur)
                                                                            : gelu_erf_times(gr, ur);
      y[vc >> 1] = __float2bfloat16_rn(o);
    }
  } else if (t < cols_per_block * M) {
    const int c = t / M, i = t % M;
    const int out_col = blockIdx.x * cols_per_block + c;
    if (out_col < n) {
      float s = partial[c * ks][i];
      for (int p = 1; p < ks; ++p) s += partial[c * ks + p][i];
      store(y + static_cast<std::size_t>(i) * n + out_col, s, accumulate);
    }
  }
}

template <int M>
void launch(const uint4* x, const uint4* w, void* y, bool y_f32, int n, int kv, int ks, bool accumulate,
            cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((n + kWarps / ks - 1) / (kWarps / ks));
  if (y_f32)
    launch_pdl(gemv_kernel<M, float>, blocks, kThreads, 0, stream, x, w, static_cast<float*>(y), n, kv, ks, accumulate);
  else
    launch_pdl(gemv_kernel<M, bf16>, blocks, kThreads, 0, stream, x, w, static_cast<bf16*>(y), n, kv, ks, accumulate);
}

}  // namespace

bool gemv_supported(const void* x, const void* w, std::int64_t m, std::int64_t n, std::int64_t k) {
  const auto aligned = [](const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; };
  return m >= 1 && m <= kGemvMaxRows && n >= 1 && k >= 8 && k % 8 == 0 && aligned(x) && aligned(w) &&
         n <= (std::int64_t{1} << 30) && k / 8 * kGemvMaxRows <= (std::int64_t{1} << 30);
}

namespace {
// Split k until n * ks warps reach ~48 per SM (more than the ~32 the registers keep resident, so
// the work is in small pieces and the last wave is short), as long as each warp still gets at
// least two 16-byte loads per lane (a 1024-byte stretch of its row) to have in flight.
int split_k(std::int64_t n, int kv, int multiprocessors, int max_ks) {
  const std::int64_t target_warps = std::int64_t{48} * (multiprocessors > 0 ? multiprocessors : 132);
  int ks = 1;
  while (ks < max_ks && n * ks < target_warps && kv >= 128 * ks) ks *= 2;
  return ks;
}
}  // namespace

template <GatedActivation ACT>
void launch_gated(const uint4* x, const uint4* w, bf16* act, int n, int kv, int ks, unsigned blocks,
                  cudaStream_t stream) {
  launch_pdl(gemv_kernel<1, bf16, static_cast<int>(ACT)>, blocks, kThreads, 0, stream, x, w, act, n, kv, ks, false);
}

void gemv_act_mul(GatedActivation act, const Bf16* x, const Bf16* w, Bf16* out, std::int64_t inter, std::int64_t k,
                  int multiprocessors, cudaStream_t stream) {
  if (!gemv_supported(x, w, 1, 2 * inter, k)) throw std::invalid_argument("gemv_act_mul: unsupported shape or alignment");
  const int kv = static_cast<int>(k / 8);
  const int n = static_cast<int>(2 * inter);
  // At most 4 warps per column, so that a block holds whole (gate, up) pairs; the plain kernel
  // picks the same split for every decode shape (gemv_test checks the two agree bitwise).
  const int ks = split_k(n, kv, multiprocessors, kWarps / 2);
  const unsigned blocks = static_cast<unsigned>((n + kWarps / ks - 1) / (kWarps / ks));
  const auto* xv = reinterpret_cast<const uint4*>(x);
  const auto* wv = reinterpret_cast<const uint4*>(w);
  switch (act) {
    case GatedActivation::silu: launch_gated<GatedActivation::silu>(xv, wv, dev(out), n, kv, ks, blocks, stream); break;
    case GatedActivation::gelu_tanh:
      launch_gated<GatedActivation::gelu_tanh>(xv, wv, dev(out), n, kv, ks, blocks, stream);
      break;
    case GatedActivation::gelu: launch_gated<GatedActivation::gelu>(xv, wv, dev(out), n, kv, ks, blocks, stream); break;
  }
  ZOO_CUDA_CHECK_LAUNCH();
}

void gemv(const Bf16* x, const Bf16* w, void* y, bool y_f32, std::int64_t m, std::int64_t n, std::int64_t k,
          bool accumulate, int multiprocessors, cudaStream_t stream) {
  if (!gemv_supported(x, w, m, n, k)) throw std::invalid_argument("gemv: unsupported shape or alignment");
  const int kv = static_cast<int>(k / 8);
  const int ks = split_k(n, kv, multiprocessors, kWarps);
  const auto* xv = reinterpret_cast<const uint4*>(x);
  const auto* wv = reinterpret_cast<const uint4*>(w);
  const int ni = static_cast<int>(n);
  switch (m) {
    case 1: launch<1>(xv, wv, y, y_f32, ni, kv, ks, accumulate, stream); break;
    case 2: launch<2>(xv, wv, y, y_f32, ni, kv, ks, accumulate, stream); break;
    case 3: launch<3>(xv, wv, y, y_f32, ni, kv, ks, accumulate, stream); break;
    case 4: launch<4>(xv, wv, y, y_f32, ni, kv, ks, accumulate, stream); break;
    case 5: launch<5>(xv, wv, y, y_f32, ni, kv, ks, accumulate, stream); break;
    case 6: launch<6>(xv, wv, y, y_f32, ni, kv, ks, accumulate, stream); break;
    case 7: launch<7>(xv, wv, y, y_f32, ni, kv, ks, accumulate, stream); break;
    default: launch<8>(xv, wv, y, y_f32, ni, kv, ks, accumulate, stream); break;
  }
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda::detail
