// The grouped GEMM of grouped_gemm.hpp: a wgmma kernel for sm_90a and an mma.sync kernel for every
// device, sharing the tile scheduler, the swizzled tile layout and the cp.async loaders.
//
// Shared-memory tiles: ROWS x 64 bf16 (BK = 64, 128 bytes a row); 16-byte chunk c of row r sits at
// chunk position c ^ (r & 7). It is the 128-byte swizzle of TMA and wgmma (which apply it to the
// shared address bits 4-6 ^ 7-9, hence 1024-byte aligned tiles there), and it keeps the 8 rows of an
// ldmatrix phase on 8 different bank groups for the mma.sync kernel.
//
// Pipelines (k-tile kt lives in stage kt % STAGES):
//   - mma.sync: the classic multistage loop; iteration kt waits for tile kt, then issues the copy of
//     tile kt + STAGES - 1 into the stage iteration kt - 1 read (every warp passed the barrier, and
//     mma.sync reads its operands synchronously), then multiplies tile kt;
//   - wgmma: the multiplies are asynchronous and one batch stays in flight (wait_group 1), so the
//     stage being refilled is that of tile kt - 2: copies run two k-tiles ahead with 4 stages.
//     cp.async writes through the generic proxy and wgmma reads through the async proxy: each
//     thread fences (fence.proxy.async) after its copies landed, before the barrier.
//
// Measured on an H200 (a MoE prefill of hidden 2048, 128 experts of 768, top 8; test_cuda "[grouped_gemm_bench]"):
// gate|up (n 1536, k 2048) 347-357 TFLOP/s at 2048 tokens and 435-448 at 4096, down (n 2048, k 768)
// 300-306 and 376-382, against 197-282 for cuBLAS's grouped GEMM and 601-775 for a dense GEMM of
// the same rows with one weight (which stays in L2; the grouped GEMMs stream 0.4-0.8 GB of expert
// weights from DRAM, about 100-200 us at the H200's bandwidth). The mma.sync kernel reaches 222-292.
// Tried and slower: 128 x 128 wgmma tiles (2 blocks an SM with 3 stages, or 4 stages): 235-368; a
// persistent kernel (a block per SM, tiles round robin, the next tile's copies overlapping the
// current tile's end): 253-388 (static assignment unbalances the partial tiles); copies three
// k-tiles ahead (a second barrier per k-tile): the same as two.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "attention_common.cuh"
#include "device_utils.cuh"
#include "zoo/kernels/cuda/grouped_gemm.hpp"
#include "zoo/kernels/cuda/moe.hpp"

// The wgmma code exists only in sm_90a images (arch-specific instructions); elsewhere the wgmma
// kernel is an empty stub declared for 32 threads, which the host sees (cudaFuncGetAttributes'
// maxThreadsPerBlock) and then takes the mma.sync kernel.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ZOO_GG_WGMMA 1
#define ZOO_GG_WGMMA_THREADS 256
#elif defined(__CUDA_ARCH__)
#define ZOO_GG_WGMMA_THREADS 32
#else
#define ZOO_GG_WGMMA_THREADS 256
#endif

namespace zoo::kernels::cuda {
namespace {
using namespace detail;

constexpr int kThreads = 256;  // both kernels: 8 warps (2 warpgroups)
constexpr int kBM = 128;
constexpr int kBK = 64;
constexpr int kRowBytes = kBK * 2;
static_assert(ZOO_GG_WGMMA_THREADS == kThreads || ZOO_GG_WGMMA_THREADS == 32, "the wgmma kernel's block");
static_assert(kMoeMaxExperts <= 2 * kThreads, "the tile scheduler gives each thread two groups");

__device__ __forceinline__ std::uint32_t swz(int row, int chunk) {
  return static_cast<std::uint32_t>(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
}

// The block's tile: rows [row0, row0 + rows) of group `group`, columns [n0, n0 + BN).
struct Tile {
  int row0, rows, group, n0;
};

// Block b takes m-slot b / n_tiles and n-tile b % n_tiles (a group's blocks are adjacent). The
// m-slots enumerate the groups' m-tiles in group order: each thread takes two groups, their tile
// counts ceil(rows / kBM) are scanned across the block, and the thread whose group holds the slot
// publishes the tile. False (for every thread) when the slot is past the last tile.
__device__ __forceinline__ bool find_tile(const std::int32_t* offsets, int groups, int max_rows, int n_tiles,
                                          int bn, Tile& tile) {
  __shared__ int warp_sums[kThreads / 32];
  __shared__ int found[3];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int slot = static_cast<int>(blockIdx.x / static_cast<unsigned>(n_tiles));
  const int n_tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(n_tiles));
  int start[2], end[2], tiles[2];
  int local = 0;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int g = 2 * t + j;
    start[j] = end[j] = tiles[j] = 0;
    if (g < groups) {
      const int s = min(max(offsets[g], 0), max_rows);
      const int e = min(max(offsets[g + 1], s), max_rows);
      start[j] = s;
      end[j] = e;
      tiles[j] = static_cast<int>((static_cast<std::int64_t>(e) - s + kBM - 1) / kBM);
    }
    local += tiles[j];
  }
  int incl = local;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) warp_sums[warp] = incl;
  if (t == 0) found[2] = -1;
  __syncthreads();
  int p = incl - local;
  for (int i = 0; i < warp; ++i) p += warp_sums[i];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    if (slot >= p && slot < p + tiles[j]) {
      const int row0 = start[j] + (slot - p) * kBM;
      found[0] = row0;
      found[1] = min(kBM, end[j] - row0);
      found[2] = 2 * t + j;
    }
    p += tiles[j];
  }
  __syncthreads();
  if (found[2] < 0) return false;
  tile = Tile{found[0], found[1], found[2], n_tile * bn};
  return true;
}

// Copies of a ROWS x 64 tile by the block's 256 threads: thread t moves chunk t % 8 of rows t / 8,
// t / 8 + 32, ... (the same swizzle phase, since r & 7 is the same). Rows at or past `row_limit` and
// chunks at or past k are zero-filled and not read.
template <int ROWS>
struct TileLoader {
  static constexpr int kIters = ROWS / 32;
  const bf16* src;
  std::int64_t row_stride;   // elements between this thread's rows (32 rows)
  std::uint32_t dst, valid;  // swizzled offset of the first row; bit i: row i in range
  int col;

  __device__ __forceinline__ void init(const bf16* base, std::int64_t ld, int row_limit, int tid) {
    const int r = tid >> 3, c = tid & 7;
    col = c * 8;
    row_stride = 32 * ld;
    src = base + static_cast<std::int64_t>(r) * ld + col;
    dst = swz(r, c);
    valid = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) valid |= static_cast<std::uint32_t>(r + 32 * i < row_limit) << i;
  }
  __device__ __forceinline__ void load(std::uint32_t tile, int k0, int k) const {
    const bool in_k = k0 + col < k;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const bool ok = in_k && ((valid >> i) & 1u);
      cp_async_16(tile + dst + i * 32 * kRowBytes, ok ? src + i * row_stride + k0 : src, ok);
    }
  }
};

// The C tile (bf16, staged in shared memory with rows of BN + 8 values: the fragment writes hit 32
// different banks) to y: 16-byte stores of the tile's valid rows and columns.
template <int BN>
__device__ __forceinline__ void store_tile(const unsigned char* stage, const Tile& tile, int n, bf16* y) {
  constexpr int kChunks = BN / 8, kStride = (BN + 8) * 2;
  for (int idx = threadIdx.x; idx < kBM * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const int col = tile.n0 + c * 8;
    if (r < tile.rows && col < n)
      *reinterpret_cast<uint4*>(y + static_cast<std::int64_t>(tile.row0 + r) * n + col) =
          *reinterpret_cast<const uint4*>(stage + r * kStride + c * 16);
  }
}

__device__ __forceinline__ void stage_pair(unsigned char* stage, int stride, int row, int col, float lo,
                                           float hi) {
  *reinterpret_cast<std::uint32_t*>(stage + row * stride + col * 2) = pack_bf16x2(lo, hi);
}

// ---- mma.sync (sm_80+) -------------------------------------------------------------------------
// 8 warps as 2 (m) x 4 (n); warp tile 64 x BN / 4: 4 m16 fragments x BN / 32 n8 fragments.
template <int BN, int STAGES>
constexpr int mma_smem_bytes() {
  return STAGES * (kBM + BN) * kRowBytes;
}

template <int BN, int STAGES>
__global__ void __launch_bounds__(kThreads, 1)
    grouped_gemm_mma_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, std::int64_t w_stride,
                            const std::int32_t* __restrict__ offsets, int groups, int max_rows, int n, int k,
                            int n_tiles, bf16* __restrict__ y) {
  constexpr int kStageBytes = (kBM + BN) * kRowBytes;
  constexpr int NF = BN / 32;  // n8 fragments per warp
  static_assert(STAGES >= 2 && kBM * (BN + 8) * 2 <= STAGES * kStageBytes, "the C staging fits the pipeline");
  extern __shared__ __align__(128) unsigned char smem[];
  Tile tile;
  if (!find_tile(offsets, groups, max_rows, n_tiles, BN, tile)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;
  const std::uint32_t base = smem_addr(smem);
  TileLoader<kBM> la;
  la.init(x + static_cast<std::int64_t>(tile.row0) * k, k, tile.rows, tid);
  TileLoader<BN> lb;
  lb.init(w + tile.group * w_stride + static_cast<std::int64_t>(tile.n0) * k, k, n - tile.n0, tid);
  const int kt_count = (k + kBK - 1) / kBK;
  const auto load = [&](int kt) {
    const std::uint32_t a = base + (kt % STAGES) * kStageBytes;
    la.load(a, kt * kBK, k);
    lb.load(a + kBM * kRowBytes, kt * kBK, k);
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < kt_count) load(s);
    cp_async_commit();
  }
  // m16 fragments of this warp that hold rows of the group (the others are skipped).
  const int m_frags = min(max((tile.rows - wm * 64 + 15) / 16, 0), 4);
  float acc[4][NF][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < NF; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

  for (int kt = 0; kt < kt_count; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (kt + STAGES - 1 < kt_count) load(kt + STAGES - 1);
    cp_async_commit();
    if (m_frags == 0) continue;
    const std::uint32_t a_tile = base + (kt % STAGES) * kStageBytes, b_tile = a_tile + kBM * kRowBytes;
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      std::uint32_t af[4][4], bfr[NF / 2][4];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
        if (mi < m_frags)
          ldmatrix_x4(af[mi], a_tile + swz(wm * 64 + mi * 16 + (lane & 15), 2 * ks + (lane >> 4)));
#pragma unroll
      for (int nb = 0; nb < NF / 2; ++nb)
        ldmatrix_x4(bfr[nb], b_tile + swz(wn * (BN / 4) + nb * 16 + ((lane >> 4) << 3) + (lane & 7),
                                          2 * ks + ((lane >> 3) & 1)));
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
        if (mi < m_frags) {
#pragma unroll
          for (int nb = 0; nb < NF / 2; ++nb) {
            mma_bf16_16816(acc[mi][2 * nb], af[mi], bfr[nb][0], bfr[nb][1]);
            mma_bf16_16816(acc[mi][2 * nb + 1], af[mi], bfr[nb][2], bfr[nb][3]);
          }
        }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the pipeline's shared memory: stage C there
  constexpr int kStride = (BN + 8) * 2;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
    if (mi < m_frags) {
      const int row = wm * 64 + mi * 16 + (lane >> 2);
#pragma unroll
      for (int nf = 0; nf < NF; ++nf) {
        const int col = wn * (BN / 4) + nf * 8 + 2 * (lane & 3);
        stage_pair(smem, kStride, row, col, acc[mi][nf][0], acc[mi][nf][1]);
        stage_pair(smem, kStride, row + 8, col, acc[mi][nf][2], acc[mi][nf][3]);
      }
    }
  __syncthreads();
  store_tile<BN>(smem, tile, n, y);
}

// ---- wgmma (sm_90a) ----------------------------------------------------------------------------
#if defined(ZOO_GG_WGMMA)
// A K-major operand tile with the 128-byte swizzle: 8-row core groups 1024 bytes apart (the stride
// byte offset), the leading byte offset unused (a k16 step stays inside a 128-byte row) but set to 1
// as is customary; a k16 step moves the start address by 32 bytes (+2 in the encoded field).
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t addr) {
  return static_cast<std::uint64_t>((addr & 0x3FFFFu) >> 4) | (std::uint64_t{1} << 16) |
         (std::uint64_t{1024 >> 4} << 32) | (std::uint64_t{1} << 62);
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// d += a b for a 64 x 16 tile of A and a 256 x 16 tile of B (K-major, shared memory).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], std::uint64_t a_desc,
                                                 std::uint64_t b_desc) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
        "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),
        "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),
        "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),
        "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]),
        "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
        "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),
        "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),
        "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a_desc), "l"(b_desc), "r"(1));
}

// Keeps the compiler from moving accumulator accesses across the asynchronous multiplies.
__device__ __forceinline__ void fence_operands(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
#endif  // ZOO_GG_WGMMA

// 2 warpgroups; warpgroup g multiplies rows 64 g .. 64 g + 63 of the 128 x 256 tile by all 256
// columns (128 float accumulators a thread: wgmma.m64n256k16), and skips its multiplies when those
// rows are all past the group's end. Copies run two k-tiles ahead of the multiplies (see the top).
constexpr int kWgBN = 256;
constexpr int kWgStages = 4;
constexpr int kWgStageBytes = (kBM + kWgBN) * kRowBytes;        // 48 KiB
constexpr int kWgSmemBytes = kWgStages * kWgStageBytes + 1024;  // + the 1024-byte alignment
static_assert(kBM * (kWgBN + 8) * 2 <= kWgStages * kWgStageBytes, "the C staging fits the pipeline");

__global__ void __launch_bounds__(ZOO_GG_WGMMA_THREADS, 1)
    grouped_gemm_wgmma_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, std::int64_t w_stride,
                              const std::int32_t* __restrict__ offsets, int groups, int max_rows, int n,
                              int k, int n_tiles, bf16* __restrict__ y) {
#if defined(ZOO_GG_WGMMA)
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Tile tile;
  if (!find_tile(offsets, groups, max_rows, n_tiles, kWgBN, tile)) return;
  const int tid = threadIdx.x, wg = tid >> 7;
  const std::uint32_t raw = smem_addr(smem_raw);
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  TileLoader<kBM> la;
  la.init(x + static_cast<std::int64_t>(tile.row0) * k, k, tile.rows, tid);
  TileLoader<kWgBN> lb;
  lb.init(w + tile.group * w_stride + static_cast<std::int64_t>(tile.n0) * k, k, n - tile.n0, tid);
  const int kt_count = (k + kBK - 1) / kBK;
  const auto load = [&](int kt) {
    const std::uint32_t a = base + (kt % kWgStages) * kWgStageBytes;
    la.load(a, kt * kBK, k);
    lb.load(a + kBM * kRowBytes, kt * kBK, k);
  };
#pragma unroll
  for (int s = 0; s < kWgStages - 2; ++s) {
    if (s < kt_count) load(s);
    cp_async_commit();
  }
  const bool active = wg * 64 < tile.rows;
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  fence_operands(acc);
  for (int kt = 0; kt < kt_count; ++kt) {
    cp_async_wait<kWgStages - 3>();  // tile kt has landed (this thread's copies)
    fence_proxy_async();             // ... and is visible to the async proxy
    __syncthreads();                 // everyone's copies; the multiplies of tile kt - 2 are retired
    if (kt + kWgStages - 2 < kt_count) load(kt + kWgStages - 2);
    cp_async_commit();
    if (active) {
      const std::uint32_t a_tile = base + (kt % kWgStages) * kWgStageBytes;
      const std::uint64_t a_desc = smem_desc(a_tile + wg * 64 * kRowBytes);
      const std::uint64_t b_desc = smem_desc(a_tile + kBM * kRowBytes);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kBK / 16; ++ks) wgmma_m64n256k16(acc, a_desc + 2 * ks, b_desc + 2 * ks);
      wgmma_commit();
      wgmma_wait<1>();  // tile kt - 1's multiplies are done
    }
  }
  wgmma_wait<0>();
  fence_operands(acc);
  cp_async_wait<0>();
  __syncthreads();  // both warpgroups are done with the pipeline's shared memory: stage C there
  constexpr int kStride = (kWgBN + 8) * 2;
  if (active) {
    const int lane = tid & 31;
    const int row = wg * 64 + ((tid >> 5) & 3) * 16 + (lane >> 2);
#pragma unroll
    for (int i = 0; i < kWgBN / 8; ++i) {
      const int col = i * 8 + 2 * (lane & 3);
      stage_pair(smem, kStride, row, col, acc[4 * i], acc[4 * i + 1]);
      stage_pair(smem, kStride, row + 8, col, acc[4 * i + 2], acc[4 * i + 3]);
    }
  }
  __syncthreads();
  store_tile<kWgBN>(smem, tile, n, y);
#endif
}

// Whether the wgmma kernel's image on `device` is the real one (see ZOO_GG_WGMMA), once per device.
bool wgmma_image(int device) {
  static std::mutex mutex;
  static std::map<int, bool> known;
  std::lock_guard lock(mutex);
  const auto it = known.find(device);
  if (it != known.end()) return it->second;
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, grouped_gemm_wgmma_kernel);
  if (status != cudaSuccess) (void)cudaGetLastError();  // no image for this device: not sticky, clear it
  const bool ok = status == cudaSuccess && attributes.maxThreadsPerBlock >= kThreads;
  known.emplace(device, ok);
  return ok;
}

// Launches `kernel` (either kind: the same arguments, 256 threads) over the bound on the m-tiles
// times the n-tiles of width bn.
template <class Kernel>
void launch(Kernel kernel, int bn, int smem, const bf16* x, const bf16* w, std::int64_t w_stride,
            const std::int32_t* offsets, int groups, int max_rows, int n, int k, bf16* y,
            cudaStream_t stream) {
  const int n_tiles = (n + bn - 1) / bn;
  const std::int64_t slots = (std::int64_t{max_rows} + kBM - 1) / kBM + groups;
  const std::int64_t blocks = slots * n_tiles;
  if (blocks > INT_MAX) throw std::invalid_argument("grouped_gemm: max_rows * n too large for one grid");
  allow_dynamic_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(x, w, w_stride, offsets, groups, max_rows,
                                                                    n, k, n_tiles, y);
  ZOO_CUDA_CHECK_LAUNCH();
}

bool use_wgmma() {
  if (!hopper_paths()) return false;
  const DeviceProperties& props = device_properties();
  if (props.major != 9 || props.shared_memory_per_block_optin < static_cast<std::size_t>(kWgSmemBytes))
    return false;
  return wgmma_image(props.device);
}

bool misaligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 != 0;
}

}  // namespace

bool grouped_gemm_uses_wgmma() {
  return use_wgmma();
}

void grouped_gemm(const Bf16* x, const Bf16* w, std::int64_t w_stride, const std::int32_t* offsets,
                  int groups, std::int64_t max_rows, std::int64_t n, std::int64_t k, Bf16* y,
                  cudaStream_t stream) {
  if (groups < 0 || groups > kMoeMaxExperts)
    throw std::invalid_argument("grouped_gemm: groups must be from 0 to " + std::to_string(kMoeMaxExperts) +
                                ", got " + std::to_string(groups));
  if (max_rows < 0 || n < 0 || k < 0 || w_stride < 0)
    throw std::invalid_argument("grouped_gemm: negative max_rows, n, k or w_stride");
  if (n % 8 != 0 || k % 8 != 0)
    throw std::invalid_argument("grouped_gemm: n and k must be multiples of 8 (16-byte rows), got n " +
                                std::to_string(n) + ", k " + std::to_string(k));
  if (w_stride % 8 != 0)
    throw std::invalid_argument(
        "grouped_gemm: w_stride must be a multiple of 8 elements (16-byte aligned "
        "weights per group), got " +
        std::to_string(w_stride));
  if (n > INT_MAX || k > INT_MAX) throw std::invalid_argument("grouped_gemm: n or k beyond int");
  if (groups == 0 || max_rows == 0 || n == 0) return;
  if (offsets == nullptr || x == nullptr || w == nullptr || y == nullptr)
    throw std::invalid_argument("grouped_gemm: null x, w, y or offsets");
  if (misaligned(x) || misaligned(w) || misaligned(y))
    throw std::invalid_argument("grouped_gemm: x, w and y must be 16-byte aligned");
  // Offsets are int32: no group reaches past INT_MAX rows.
  const int rows = static_cast<int>(std::min<std::int64_t>(max_rows, INT_MAX));
  const int ni = static_cast<int>(n), ki = static_cast<int>(k);
  const auto go = [&](auto kernel, int bn, int smem) {
    launch(kernel, bn, smem, dev(x), dev(w), w_stride, offsets, groups, rows, ni, ki, dev(y), stream);
  };
  if (use_wgmma()) return go(grouped_gemm_wgmma_kernel, kWgBN, kWgSmemBytes);
  // mma.sync: the widest tile and the most stages the device's shared memory allows.
  const std::size_t smem = device_properties().shared_memory_per_block_optin;
  if (smem >= static_cast<std::size_t>(mma_smem_bytes<256, 4>()))
    go(grouped_gemm_mma_kernel<256, 4>, 256, mma_smem_bytes<256, 4>());
  else if (smem >= static_cast<std::size_t>(mma_smem_bytes<256, 3>()))
    go(grouped_gemm_mma_kernel<256, 3>, 256, mma_smem_bytes<256, 3>());
  else
    go(grouped_gemm_mma_kernel<128, 3>, 128, mma_smem_bytes<128, 3>());
}

}  // namespace zoo::kernels::cuda
