// Per-row reductions over logits: argmax, log-softmax, top-k, and sampling a token.
#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>

#include <cub/cub.cuh>

#include "device_utils.cuh"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {
namespace {
using namespace detail;

constexpr int kRowThreads = 1024;

// A (value, index) candidate; index < 0 means "none". Order as torch.argmax / torch.topk (and
// the CPU reference): NaN ranks above every number, then larger values, ties to the lower index.
struct Best {
  float v;
  std::int32_t i;
};
__device__ __forceinline__ bool ranks_before(float av, std::int32_t ai, float bv, std::int32_t bi) {
  const bool nan_a = isnan(av), nan_b = isnan(bv);
  if (nan_a || nan_b) return nan_a && (!nan_b || ai < bi);
  return av > bv || (av == bv && ai < bi);
}
__device__ __forceinline__ bool better(Best a, Best b) { return a.i >= 0 && (b.i < 0 || ranks_before(a.v, a.i, b.v, b.i)); }
__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)};
    if (better(other, b)) b = other;
  }
  return b;
}
// Every thread gets the block's best. scratch: 32 entries.
__device__ __forceinline__ Best block_best(Best b, Best* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  b = warp_best(b);
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  Best r = scratch[0];
  for (int i = 1; i < warps; ++i)
    if (better(scratch[i], r)) r = scratch[i];
  __syncthreads();
  return r;
}

// ---- argmax ------------------------------------------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kRowThreads) argmax_kernel(const T* __restrict__ x, std::int64_t n,
                                                             std::int32_t* __restrict__ out) {
  __shared__ Best scratch[32];
  const T* row = x + static_cast<std::int64_t>(blockIdx.x) * n;
  Best b{0.0f, -1};
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const Best c{to_f32(row[i]), static_cast<std::int32_t>(i)};
    if (better(c, b)) b = c;
  }
  b = block_best(b, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = b.i;
}

// ---- log-softmax -------------------------------------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kRowThreads) log_softmax_kernel(const T* __restrict__ x, float* __restrict__ out,
                                                                  std::int64_t n) {
  __shared__ float fscratch[32];
  __shared__ double dscratch[32];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * n;
  float m = -INFINITY;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, to_f32(x[base + i]));
  m = block_reduce(m, fscratch, MaxOp{});
  double s = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(expf(to_f32(x[base + i]) - m));
  s = block_reduce(s, dscratch, SumOp{});
  // Like the CPU reference: the normalizer and the subtraction in float64 (an all -inf row gives NaN).
  const double log_norm = static_cast<double>(m) + log(s);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    out[base + i] = static_cast<float>(static_cast<double>(to_f32(x[base + i])) - log_norm);
}

// ---- top-k -------------------------------------------------------------------------------------
// Stage 1: one block per (chunk of kChunk entries, row) picks the chunk's top k by k rounds of a
// block-wide "best remaining" reduction. Each thread keeps the best of its own 32 entries (a
// bitmask marks those taken), so a round costs one reduction plus one thread's rescan.
// Stage 2: one block per row merges the chunks' candidates the same way, taking them from the
// workspace (taken candidates are overwritten with index -1).
constexpr int kTopKThreads = 256;
constexpr int kPerThread = 32;
constexpr std::int64_t kChunk = std::int64_t{kTopKThreads} * kPerThread;

template <class T>
__global__ void __launch_bounds__(kTopKThreads)
    top_k_chunk_kernel(const T* __restrict__ x, std::int64_t n, int k, std::int64_t chunks,
                       float* __restrict__ out_v, std::int32_t* __restrict__ out_i) {
  __shared__ Best scratch[32];
  const std::int64_t row = blockIdx.y, chunk = blockIdx.x;
  const T* src = x + row * n;
  const std::int64_t begin = chunk * kChunk;
  // Element j of this thread: begin + threadIdx.x + j * kTopKThreads (coalesced across the warp),
  // held in registers (constant indices after unrolling); `taken` marks used and absent ones.
  float vals[kPerThread];
  std::uint32_t taken = 0;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const std::int64_t idx = begin + threadIdx.x + static_cast<std::int64_t>(j) * kTopKThreads;
    vals[j] = idx < n ? to_f32(src[idx]) : 0.0f;
    if (idx >= n) taken |= 1u << j;
  }
  auto rescan = [&]() {
    Best b{0.0f, -1};
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const Best c{vals[j], static_cast<std::int32_t>(begin + threadIdx.x + static_cast<std::int64_t>(j) * kTopKThreads)};
      if (!((taken >> j) & 1u) && better(c, b)) b = c;
    }
    return b;
  };
  Best mine = rescan();
  const std::int64_t out_base = (row * chunks + chunk) * k;
  for (int r = 0; r < k; ++r) {
    const Best win = block_best(mine, scratch);
    if (threadIdx.x == 0) {
      out_v[out_base + r] = win.v;
      out_i[out_base + r] = win.i;
    }
    if (win.i >= 0 && win.i == mine.i) {
      const int j = static_cast<int>((win.i - begin - threadIdx.x) / kTopKThreads);
      taken |= 1u << j;
      mine = rescan();
    }
  }
}

__global__ void __launch_bounds__(kTopKThreads)
    top_k_merge_kernel(float* __restrict__ cand_v, std::int32_t* __restrict__ cand_i, std::int64_t per_row, int k,
                       float* __restrict__ out_v, std::int32_t* __restrict__ out_i) {
  __shared__ Best scratch[32];
  const std::int64_t row = blockIdx.x;
  float* cv = cand_v + row * per_row;
  std::int32_t* ci = cand_i + row * per_row;
  auto rescan = [&]() {
    Best b{0.0f, -1};
    for (std::int64_t j = threadIdx.x; j < per_row; j += kTopKThreads) {
      const Best c{cv[j], ci[j]};
      if (better(c, b)) b = c;
    }
    return b;
  };
  Best mine = rescan();
  for (int r = 0; r < k; ++r) {
    const Best win = block_best(mine, scratch);
    if (threadIdx.x == 0) {
      if (out_v) out_v[row * k + r] = win.v;
      out_i[row * k + r] = win.i;
    }
    if (win.i >= 0 && win.i == mine.i) {
      // Candidates hold distinct indices, so exactly one slot (owned by this thread) matches.
      for (std::int64_t j = threadIdx.x; j < per_row; j += kTopKThreads)
        if (ci[j] == win.i) ci[j] = -1;
      mine = rescan();
    }
  }
}

// ---- sampling ----------------------------------------------------------------------------------
// zoo::sample_logits is the reference. `prep` checks the row and either takes the greedy argmax or
// forms the candidates' keys (x / T, NaN as -inf, -0 as +0). Then, by the mode:
//  - sort: a stable descending radix sort (cub) orders all of them (ties keep the lower index
//    first) and `pick` sums the masses of the kept prefix per segment; its last block finds the
//    top-p crossing and the draw's crossing inside one segment each.
//  - select (top-k <= kSampleSelectMaxK): a candidate is a 64-bit word, its key's order bits above
//    its inverted index, so words are distinct and rank as the host ranks (larger key first, ties
//    to the lower index). A radix select narrows down the words that can be among the k largest:
//    `prep` histograms their top 12 bits, and `select` gathers the words in or above the bin of
//    the k-th into the workspace. While those are more than one block sorts (a narrow band of
//    keys, or ties across the k-th: rare rows), its last block histograms the next 12 bits of the
//    gathered words in the k-th's bin. Then it sorts the survivors in shared memory and picks
//    among the first k.
// Each kernel's blocks leave partial results in the workspace; the last block to finish (a ticket
// counter it resets) combines them, so one launch does its whole step.
constexpr int kSampleThreads = 256;
constexpr int kPrepBlocksMax = 256;
constexpr int kPickBlocks = 128;
constexpr int kSelectThreads = 1024;
constexpr int kSelectItems = 4;
constexpr int kSelectCap = kSelectThreads * kSelectItems;  // words one block sorts
constexpr int kSelectBlocksMax = 128;
constexpr int kDigitBits = 12;
constexpr int kDigitBins = 1 << kDigitBits;
static_assert(kSampleSelectMaxK <= kSelectThreads * 2 && kSampleSelectMaxK <= kSelectCap);

using Word = unsigned long long;

struct SampleTickets {
  unsigned int prep;
  unsigned int pick;
  unsigned int select;
  unsigned int gathered;  // words gathered by `select` so far
};
struct PrepPartial {
  float best_v;
  std::int32_t best_i;
  std::int32_t bad;  // INT_MAX: none
  std::int32_t unmasked;
};
// Where the radix select stands: the survivors are the words w with (w >> shift) >= prefix,
// `count` of them (>= k), `above` of which (< k) have (w >> shift) > prefix.
struct SelectState {
  Word prefix;
  int shift;
  int count;
  int above;
  int k;
};

// The pieces of the workspace (offsets aligned for the sort).
struct SampleLayout {
  std::size_t tickets, partials, segments, keys_in, keys_out, idx_in, idx_out, sort_temp, sort_bytes, hist, state,
      words, survivors, total;
  int index_bits;  // the bits of an index in a word
};
constexpr std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }
SampleLayout sample_layout(std::int64_t n) {
  SampleLayout l{};
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align256(bytes);
    return here;
  };
  l.tickets = take(sizeof(SampleTickets));
  l.partials = take(sizeof(PrepPartial) * kPrepBlocksMax);
  l.segments = take(sizeof(double) * kPickBlocks);
  l.keys_in = take(sizeof(float) * static_cast<std::size_t>(n));
  l.keys_out = take(sizeof(float) * static_cast<std::size_t>(n));
  l.idx_in = take(sizeof(std::int32_t) * static_cast<std::size_t>(n));
  l.idx_out = take(sizeof(std::int32_t) * static_cast<std::size_t>(n));
  std::size_t sort_bytes = 0;
  ZOO_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, sort_bytes, static_cast<const float*>(nullptr),
                                                          static_cast<float*>(nullptr),
                                                          static_cast<const std::int32_t*>(nullptr),
                                                          static_cast<std::int32_t*>(nullptr), static_cast<int>(n)));
  l.sort_bytes = sort_bytes;
  l.sort_temp = take(sort_bytes);
  l.hist = take(sizeof(unsigned) * kDigitBins);
  l.state = take(sizeof(SelectState));
  l.words = take(sizeof(Word) * static_cast<std::size_t>(n));
  l.survivors = take(sizeof(Word) * kSelectCap);
  l.total = at;
  while (l.index_bits < 31 && (std::int64_t{1} << l.index_bits) < n) ++l.index_bits;
  return l;
}

// The host's ranking value: NaN ranks as -inf.
__device__ __forceinline__ float rank_value(float x) { return isnan(x) ? -INFINITY : x; }

// A candidate's key as the host forms it: float32 division; + 0 makes -0 equal +0 for the radix
// order (the host's comparison already treats them as equal, ties to the lower index).
__device__ __forceinline__ float sample_key(float x, float temperature) {
  return __fadd_rn(__fdiv_rn(rank_value(x), temperature), 0.0f);
}

// Bits of a float that order as the float does (no NaN here; -0 is gone).
__device__ __forceinline__ unsigned order_bits(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_order_bits(unsigned o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}
// key's order bits, then (2^index_bits - 1 - index): a larger word ranks first, as the host ranks.
__device__ __forceinline__ Word make_word(float key, int i, int index_bits) {
  const Word mask = (Word{1} << index_bits) - 1;
  return (static_cast<Word>(order_bits(key)) << index_bits) | (mask - static_cast<Word>(i));
}
__device__ __forceinline__ float word_key(Word w, int index_bits) {
  return from_order_bits(static_cast<unsigned>(w >> index_bits));
}
__device__ __forceinline__ int word_index(Word w, int index_bits) {
  const Word mask = (Word{1} << index_bits) - 1;
  return static_cast<int>(mask - (w & mask));
}
__device__ __forceinline__ int select_k(const SampleParams& p, int n) {
  return min(min(max(p.top_k, 1), kSampleSelectMaxK), n);
}

__device__ __forceinline__ bool greedy_before(float av, std::int32_t ai, float bv, std::int32_t bi) {
  return av > bv || (av == bv && ai < bi);
}

__device__ PrepPartial combine(PrepPartial a, PrepPartial b) {
  PrepPartial r;
  const bool take_b = greedy_before(b.best_v, b.best_i, a.best_v, a.best_i);
  r.best_v = take_b ? b.best_v : a.best_v;
  r.best_i = take_b ? b.best_i : a.best_i;
  r.bad = min(a.bad, b.bad);
  r.unmasked = a.unmasked + b.unmasked;
  return r;
}

__device__ PrepPartial block_combine(PrepPartial v, PrepPartial* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    PrepPartial other{__shfl_xor_sync(0xffffffffu, v.best_v, o), __shfl_xor_sync(0xffffffffu, v.best_i, o),
                      __shfl_xor_sync(0xffffffffu, v.bad, o), __shfl_xor_sync(0xffffffffu, v.unmasked, o)};
    v = combine(v, other);
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  PrepPartial r = scratch[0];
  for (int i = 1; i < warps; ++i) r = combine(r, scratch[i]);
  __syncthreads();
  return r;
}

// The last block of a grid to arrive gets true (and resets the ticket for the next launch).
__device__ bool last_block(unsigned int* ticket) {
  __shared__ bool last;
  __threadfence();  // this block's partial results are visible before its ticket is
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int t = atomicAdd(ticket, 1u);
    last = t == gridDim.x - 1;
    if (last) *ticket = 0;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// Of `bins` counts (ranked from the highest bin down), the bin holding the r-th word (1-based):
// the words in the bins above it (`above` < r) and in it (`count` >= r - above). Run by one whole
// block of Threads threads.
struct Bucket {
  int bin, above, count;
};
template <int Threads>
using BucketScan = cub::BlockScan<int, Threads>;
template <int Threads>
__device__ Bucket find_bucket(const unsigned* hist, int bins, int r,
                              typename BucketScan<Threads>::TempStorage& scan_temp) {
  __shared__ Bucket result;
  const int per = (bins + Threads - 1) / Threads;
  const int j0 = min(static_cast<int>(threadIdx.x) * per, bins), j1 = min(j0 + per, bins);
  int local = 0;
  for (int j = j0; j < j1; ++j) local += static_cast<int>(hist[bins - 1 - j]);
  int before = 0;
  BucketScan<Threads>(scan_temp).ExclusiveSum(local, before);
  if (before < r && r <= before + local) {  // exactly one thread
    int c = before;
    for (int j = j0; j < j1; ++j) {
      const int h = static_cast<int>(hist[bins - 1 - j]);
      if (c + h >= r) {
        result = {bins - 1 - j, c, h};
        break;
      }
      c += h;
    }
  }
  __syncthreads();
  const Bucket b = result;
  __syncthreads();
  return b;
}

template <SampleMode Mode>
__global__ void __launch_bounds__(kSampleThreads)
    sample_prep_kernel(const float* __restrict__ x, int n, const SampleParams* __restrict__ params,
                       SampleOutput* __restrict__ out, std::byte* ws, SampleLayout l,
                       const std::int32_t* __restrict__ rows = nullptr, std::size_t ws_stride = 0) {
  constexpr bool greedy = Mode == SampleMode::greedy, select = Mode == SampleMode::select;
  if (rows) {  // many picks in one launch (grid.y): pick y reads logits row rows[y], its own workspace
    x += static_cast<std::int64_t>(rows[blockIdx.y]) * n;
    out += blockIdx.y;
    ws += blockIdx.y * ws_stride;
    if (!greedy) params += blockIdx.y;
  }
  __shared__ PrepPartial scratch[32];
  __shared__ unsigned hist[select ? kDigitBins : 1];  // select: the block's counts of the top 12 bits
  __shared__ typename BucketScan<kSampleThreads>::TempStorage bucket_temp;
  auto* partials = reinterpret_cast<PrepPartial*>(ws + l.partials);
  auto* keys = reinterpret_cast<float*>(ws + l.keys_in);
  auto* idx = reinterpret_cast<std::int32_t*>(ws + l.idx_in);
  auto* grid_hist = reinterpret_cast<unsigned*>(ws + l.hist);
  const float temperature = greedy ? 1.0f : params->temperature;
  if constexpr (select) {
    for (int b = threadIdx.x; b < kDigitBins; b += blockDim.x) hist[b] = 0;
    __syncthreads();
  }
  PrepPartial mine{-INFINITY, INT_MAX, INT_MAX, 0};
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = x[i];
    if (isnan(v) || v == INFINITY) mine.bad = min(mine.bad, i);
    if (v != -INFINITY) ++mine.unmasked;
    if constexpr (greedy) {
      const float r = rank_value(v);
      if (greedy_before(r, i, mine.best_v, mine.best_i)) {
        mine.best_v = r;
        mine.best_i = i;
      }
    } else {
      const float key = sample_key(v, temperature);
      if constexpr (select) {
        atomicAdd(&hist[order_bits(key) >> (32 - kDigitBits)], 1u);  // select reads x again
      } else {
        keys[i] = key;
        idx[i] = i;
      }
    }
  }
  if constexpr (select) {
    __syncthreads();
    for (int b = threadIdx.x; b < kDigitBins; b += blockDim.x)
      if (hist[b] != 0) atomicAdd(&grid_hist[b], hist[b]);
  }
  mine = block_combine(mine, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = mine;
  if (!last_block(&reinterpret_cast<SampleTickets*>(ws + l.tickets)->prep)) return;
  PrepPartial all{-INFINITY, INT_MAX, INT_MAX, 0};
  for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += blockDim.x) all = combine(all, partials[b]);
  all = block_combine(all, scratch);
  if (threadIdx.x == 0) {
    out->bad_index = all.bad == INT_MAX ? -1 : all.bad;
    out->bad_value = all.bad == INT_MAX ? 0.0f : x[all.bad];
    out->unmasked = all.unmasked;
    if (greedy) {
      out->id = all.best_i;
      out->logit = x[all.best_i];
    }
  }
  if constexpr (select) {
    // The bin of the k-th word's top 12 bits; the grid's histogram is left zeroed for the next call.
    for (int b = threadIdx.x; b < kDigitBins; b += blockDim.x) {
      hist[b] = __ldcg(&grid_hist[b]);
      grid_hist[b] = 0;
    }
    __syncthreads();
    const int k = select_k(*params, n);
    const Bucket b = find_bucket<kSampleThreads>(hist, kDigitBins, k, bucket_temp);
    if (threadIdx.x == 0)
      *reinterpret_cast<SelectState*>(ws + l.state) =
          SelectState{static_cast<Word>(b.bin), 32 + l.index_bits - kDigitBits, b.above + b.count, b.above, k};
  }
}

// Min-p: the first rank i in [1, limit) whose weight mass(i) = exp(key_i - top) is below min_p
// (the weights fall with the rank, so a binary search), or `limit`. Every thread gets it.
template <class Mass>
__device__ int min_p_cut(Mass mass, int limit, float min_p) {
  __shared__ int cut;
  if (threadIdx.x == 0) {
    int lo = 1, hi = limit;  // the answer lies in [lo, hi]
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (mass(mid) < static_cast<double>(min_p)) hi = mid;
      else lo = mid + 1;
    }
    cut = max(lo, 1);
  }
  __syncthreads();
  const int r = min(cut, limit);
  __syncthreads();
  return r;
}

// A rank and the cumulative mass through it.
struct Crossing {
  int index;
  double cumulative;
};

// The first rank i < limit whose cumulative mass passes `target` (`inclusive`: >=, else >) and
// that mass; `fallback` if rounding finds none. This thread holds ranks [b0, b1), `before` is the
// mass of the ranks before b0. Run by one whole block.
template <class Mass>
__device__ Crossing first_crossing(Mass mass, int b0, int b1, int limit, double before, double target,
                                   bool inclusive, Crossing fallback) {
  __shared__ int first;
  __shared__ Crossing result;
  if (threadIdx.x == 0) {
    first = INT_MAX;
    result = fallback;
  }
  __syncthreads();
  double c = before;
  int found = INT_MAX;
  for (int i = b0; i < min(b1, limit); ++i) {
    c += mass(i);
    if (inclusive ? c >= target : c > target) {
      found = i;
      break;
    }
  }
  if (found != INT_MAX) atomicMin(&first, found);
  __syncthreads();
  if (found != INT_MAX && found == first) result = {found, c};
  __syncthreads();
  const Crossing r = result;
  __syncthreads();
  return r;
}

// The first index i < limit (in sorted order) whose cumulative mass passes `target`
// (`inclusive`: >=, else >), and that cumulative mass; limit - 1 if rounding finds none. `sums`
// holds the segments' prefix sums (sums[j] = mass before segment j). Run by one whole block.
__device__ Crossing find_crossing(const float* keys, double top, const double* sums, int segments, int seg, int limit,
                                  double target, bool inclusive) {
  using Scan = cub::BlockScan<double, kSampleThreads>;
  __shared__ typename Scan::TempStorage scan_temp;
  __shared__ int segment;
  auto passes = [&](double c) { return inclusive ? c >= target : c > target; };
  if (threadIdx.x == 0) segment = INT_MAX;
  __syncthreads();
  // The first segment that reaches the target, or the last one before limit.
  for (int j = threadIdx.x; j < segments; j += blockDim.x)
    if (j * seg < limit && (passes(sums[j + 1]) || (j + 1) * seg >= limit)) atomicMin(&segment, j);
  __syncthreads();
  const int s0 = segment * seg, s1 = min(s0 + seg, limit);
  const int per = (s1 - s0 + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int b0 = min(s0 + static_cast<int>(threadIdx.x) * per, s1), b1 = min(b0 + per, s1);
  auto mass = [&](int i) { return exp(static_cast<double>(keys[i]) - top); };
  double local = 0;
  for (int i = b0; i < b1; ++i) local += mass(i);
  double before = 0, segment_mass = 0;
  Scan(scan_temp).ExclusiveSum(local, before, segment_mass);
  // None found (rounding): the last index, with the mass through it.
  return first_crossing(mass, b0, b1, s1, sums[segment] + before, target, inclusive,
                        Crossing{s1 - 1, sums[segment] + segment_mass});
}

// `sorted_out`: the sort left the keys in keys_out (else back in keys_in). With `rows`, pick y of
// grid.y reads logits row rows[y] and its own workspace, as in sample_prep_kernel.
__global__ void __launch_bounds__(kSampleThreads)
    sample_pick_kernel(const float* __restrict__ x, int n, const SampleParams* __restrict__ params,
                       SampleOutput* __restrict__ out, std::byte* ws, SampleLayout l, bool sorted_out = true,
                       const std::int32_t* __restrict__ rows = nullptr, std::size_t ws_stride = 0) {
  if (rows) {
    x += static_cast<std::int64_t>(rows[blockIdx.y]) * n;
    out += blockIdx.y;
    ws += blockIdx.y * ws_stride;
    params += blockIdx.y;
  }
  __shared__ double scratch[32];
  __shared__ double sums[kPickBlocks + 1];
  const auto* keys = reinterpret_cast<const float*>(ws + (sorted_out ? l.keys_out : l.keys_in));
  const auto* idx = reinterpret_cast<const std::int32_t*>(ws + (sorted_out ? l.idx_out : l.idx_in));
  auto* segments = reinterpret_cast<double*>(ws + l.segments);
  const SampleParams p = *params;
  const int keep = p.top_k > 0 ? min(p.top_k, n) : n;
  const float top = keys[0];
  if (!isfinite(top)) {  // nothing has probability: the host falls back to the first candidate
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      out->id = idx[0];
      out->logit = x[idx[0]];
    }
    return;
  }
  const double dtop = static_cast<double>(top);
  const int seg = (keep + kPickBlocks - 1) / kPickBlocks;
  const int s0 = min(static_cast<int>(blockIdx.x) * seg, keep), s1 = min(s0 + seg, keep);
  double local = 0;
  for (int i = s0 + static_cast<int>(threadIdx.x); i < s1; i += blockDim.x)
    local += exp(static_cast<double>(keys[i]) - dtop);
  local = block_reduce(local, scratch, SumOp{});
  if (threadIdx.x == 0) segments[blockIdx.x] = local;
  if (!last_block(&reinterpret_cast<SampleTickets*>(ws + l.tickets)->pick)) return;
  {
    // The segments' prefix sums, loaded and scanned in parallel.
    static_assert(kPickBlocks < kSampleThreads);
    using Scan = cub::BlockScan<double, kSampleThreads>;
    __shared__ typename Scan::TempStorage scan_temp;
    const double mass = threadIdx.x < kPickBlocks ? __ldcg(&segments[threadIdx.x]) : 0.0;
    double before = 0;
    Scan(scan_temp).ExclusiveSum(mass, before);
    if (threadIdx.x <= kPickBlocks) sums[threadIdx.x] = before;
  }
  __syncthreads();
  int limit = keep;
  double total = sums[kPickBlocks];
  if (p.top_p < 1.0f) {
    const Crossing c = find_crossing(keys, dtop, sums, kPickBlocks, seg, keep,
                                     static_cast<double>(p.top_p) * total, true);
    limit = c.index + 1;
    total = c.cumulative;
  }
  if (p.min_p > 0.0f) {
    auto mass = [&](int i) { return exp(static_cast<double>(keys[i]) - dtop); };
    const int cut = min_p_cut(mass, limit, p.min_p);
    if (cut < limit) {
      // The kept mass: the segments wholly before the cut, then the rest up to it.
      limit = cut;
      const int s0 = min(limit / seg, kPickBlocks);
      double part = 0;
      for (int i = s0 * seg + static_cast<int>(threadIdx.x); i < limit; i += blockDim.x) part += mass(i);
      total = sums[s0] + block_reduce(part, scratch, SumOp{});
    }
  }
  const Crossing pick = find_crossing(keys, dtop, sums, kPickBlocks, seg, limit, p.u * total, false);
  if (threadIdx.x == 0) {
    out->id = idx[pick.index];
    out->logit = x[idx[pick.index]];
  }
}

// ---- sampling: select mode ----------------------------------------------------------------------

// Run by all 32 lanes of a warp: appends the words of the lanes with `hit` to dst (at most `cap`),
// counting them in *count.
__device__ __forceinline__ void append_words(bool hit, Word w, Word* dst, unsigned* count, unsigned cap) {
  const unsigned mask = __ballot_sync(0xffffffffu, hit);
  if (mask == 0) return;
  const int lane = threadIdx.x & 31, leader = __ffs(mask) - 1;
  unsigned at = 0;
  if (lane == leader) at = atomicAdd(count, static_cast<unsigned>(__popc(mask)));
  at = __shfl_sync(0xffffffffu, at, leader);
  if (hit) {
    const unsigned slot = at + static_cast<unsigned>(__popc(mask & ((1u << lane) - 1u)));
    if (slot < cap) dst[slot] = w;
  }
}

// The select kernel's last block uses its shared memory for one thing at a time.
using SelectScan = cub::BlockScan<double, kSelectThreads>;
union SelectShared {
  struct {
    unsigned hist[kDigitBins];
    typename BucketScan<kSelectThreads>::TempStorage scan;
  } refine;
  Word words[kSelectCap];  // the survivors, sorted in place (or ranked into the upper part)
};

// Every block gathers the words at or above the state's prefix into the workspace; the last block
// narrows them down to at most kSelectCap (more histograms, over the gathered words only), sorts
// those and picks among the first k.
__global__ void __launch_bounds__(kSelectThreads)
    sample_select_kernel(const float* __restrict__ x, int n, const SampleParams* __restrict__ params,
                         SampleOutput* __restrict__ out, std::byte* ws, SampleLayout l,
                         const std::int32_t* __restrict__ rows = nullptr, std::size_t ws_stride = 0) {
  if (rows) {  // as in sample_prep_kernel
    x += static_cast<std::int64_t>(rows[blockIdx.y]) * n;
    out += blockIdx.y;
    ws += blockIdx.y * ws_stride;
    params += blockIdx.y;
  }
  __shared__ SelectShared sh;
  __shared__ typename SelectScan::TempStorage scan_temp;
  __shared__ unsigned kept;
  auto* tickets = reinterpret_cast<SampleTickets*>(ws + l.tickets);
  auto* words = reinterpret_cast<Word*>(ws + l.words);  // n of them
  auto* survivors = reinterpret_cast<Word*>(ws + l.survivors);  // kSelectCap
  const SampleParams p = *params;
  const int bits = l.index_bits;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp_start = static_cast<int>(threadIdx.x) - lane;
  SelectState s = *reinterpret_cast<const SelectState*>(ws + l.state);
  for (int base = static_cast<int>(blockIdx.x) * kSelectThreads + warp_start; base < n;
       base += static_cast<int>(gridDim.x) * kSelectThreads) {
    const int i = base + lane;
    Word w = 0;
    if (i < n) w = make_word(sample_key(x[i], p.temperature), i, bits);
    append_words(i < n && (w >> s.shift) >= s.prefix, w, words, &tickets->gathered, static_cast<unsigned>(n));
  }
  if (!last_block(&tickets->select)) return;
  if (threadIdx.x == 0) kept = min(atomicExch(&tickets->gathered, 0u), static_cast<unsigned>(n));
  __syncthreads();
  int m = static_cast<int>(kept);  // == s.count
  const Word* list = words;
  if (s.count > kSelectCap) {
    // Too many in the k-th's bin (a narrow band of keys, or ties across the k-th): the next bits
    // of the gathered words in it, until few enough remain (at the last bits only the k-th itself).
    while (s.count > kSelectCap && s.shift > 0) {
      const int shift = max(0, s.shift - kDigitBits);
      const unsigned bins = 1u << (s.shift - shift), none = 0xffffffffu;
      for (unsigned b = threadIdx.x; b < bins; b += kSelectThreads) sh.refine.hist[b] = 0;
      __syncthreads();
      for (int base = warp_start; base < m; base += kSelectThreads) {
        const int j = base + lane;
        unsigned bin = none;
        if (j < m) {
          const Word w = __ldcg(&words[j]);
          if ((w >> s.shift) == s.prefix) bin = static_cast<unsigned>(w >> shift) & (bins - 1);
        }
        const unsigned peers = __match_any_sync(0xffffffffu, bin);  // ties land in one bin: one add
        if (bin != none && lane == __ffs(peers) - 1) atomicAdd(&sh.refine.hist[bin], static_cast<unsigned>(__popc(peers)));
      }
      __syncthreads();
      const Bucket b = find_bucket<kSelectThreads>(sh.refine.hist, static_cast<int>(bins), s.k - s.above, sh.refine.scan);
      s.prefix = (s.prefix << (s.shift - shift)) | static_cast<Word>(b.bin);
      s.shift = shift;
      s.above += b.above;
      s.count = s.above + b.count;
    }
    if (threadIdx.x == 0) kept = 0;
    __syncthreads();
    for (int base = warp_start; base < m; base += kSelectThreads) {
      const int j = base + lane;
      const Word w = j < m ? __ldcg(&words[j]) : 0;
      append_words(j < m && (w >> s.shift) >= s.prefix, w, survivors, &kept, static_cast<unsigned>(kSelectCap));
    }
    __syncthreads();
    m = min(static_cast<int>(kept), kSelectCap);  // == s.count
    list = survivors;
  }
  const int k = s.k;  // <= m

  // The first k of the m words in rank order. Padding words are 0, below every candidate (even
  // -inf's word is not 0).
  const Word* sorted = sh.words;
  if (m <= kSelectThreads) {
    // Few: each thread ranks one word by counting the larger ones, into the upper part.
    static_assert(kSelectThreads + kSampleSelectMaxK <= kSelectCap);
    const Word w = static_cast<int>(threadIdx.x) < m ? __ldcg(&list[threadIdx.x]) : 0;
    sh.words[threadIdx.x] = w;
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < m) {
      int rank = 0;
      for (int j = 0; j < m; ++j) rank += sh.words[j] > w;
      if (rank < k) sh.words[kSelectThreads + rank] = w;
    }
    sorted = sh.words + kSelectThreads;
  } else {
    // A bitonic sort (descending) of the words padded to a power of two.
    int size = 1;
    while (size < m) size <<= 1;
    for (int i = threadIdx.x; i < size; i += kSelectThreads) sh.words[i] = i < m ? __ldcg(&list[i]) : 0;
    __syncthreads();
    for (int run = 2; run <= size; run <<= 1) {
      for (int stride = run >> 1; stride > 0; stride >>= 1) {
        for (int t = threadIdx.x; t < size / 2; t += kSelectThreads) {
          const int i = 2 * t - (t & (stride - 1)), j = i + stride;
          const Word a = sh.words[i], b = sh.words[j];
          if ((i & run) == 0 ? a < b : a > b) {  // runs alternate down and up; the last is down
            sh.words[i] = b;
            sh.words[j] = a;
          }
        }
        __syncthreads();
      }
    }
  }
  __syncthreads();
  const float top = word_key(sorted[0], bits);
  if (!isfinite(top)) {  // nothing has probability: the host falls back to the first candidate
    if (threadIdx.x == 0) {
      const int id = word_index(sorted[0], bits);
      out->id = id;
      out->logit = x[id];
    }
    return;
  }
  const double dtop = static_cast<double>(top);
  auto mass = [&](int i) { return exp(static_cast<double>(word_key(sorted[i], bits)) - dtop); };
  const int per = (k + kSelectThreads - 1) / kSelectThreads;
  const int b0 = min(static_cast<int>(threadIdx.x) * per, k), b1 = min(b0 + per, k);
  double local = 0;
  for (int i = b0; i < b1; ++i) local += mass(i);
  double before = 0, total = 0;
  SelectScan(scan_temp).ExclusiveSum(local, before, total);
  int limit = k;
  if (p.top_p < 1.0f) {
    const Crossing c = first_crossing(mass, b0, b1, k, before, static_cast<double>(p.top_p) * total, true,
                                      Crossing{k - 1, total});
    limit = c.index + 1;
    total = c.cumulative;
  }
  if (p.min_p > 0.0f) {
    const int cut = min_p_cut(mass, limit, p.min_p);
    if (cut < limit) {
      limit = cut;
      __shared__ double reduce_scratch[32];
      double part = 0;
      for (int i = b0; i < min(b1, limit); ++i) part += mass(i);
      total = block_reduce(part, reduce_scratch, SumOp{});
    }
  }
  const Crossing pick = first_crossing(mass, b0, b1, limit, before, p.u * total, false, Crossing{limit - 1, total});
  if (threadIdx.x == 0) {
    const int id = word_index(sorted[pick.index], bits);
    out->id = id;
    out->logit = x[id];
  }
}


// ---- logprobs ----------------------------------------------------------------------------------

// One block per pick: row rows[y]'s log-sum-exp (float64, NaN as -inf; 0 when the largest is not
// finite, as the host's fill_logprobs) and its `top` likeliest (value desc, ties to the lower
// index): each thread keeps its own best `top` while it scans, then `top` rounds of a block-wide
// best over the threads' heads.
constexpr int kLogprobThreads = 512;
__global__ void __launch_bounds__(kLogprobThreads)
    logprob_rows_kernel(const float* __restrict__ logits, int n, const std::int32_t* __restrict__ rows, int top,
                        double* __restrict__ lse, std::int32_t* __restrict__ top_ids, float* __restrict__ top_values,
                        const std::int32_t* __restrict__ ids, float* __restrict__ id_values) {
  const float* x = logits + static_cast<std::int64_t>(rows[blockIdx.x]) * n;
  if (ids && threadIdx.x == 0 && ids[blockIdx.x] >= 0 && ids[blockIdx.x] < n) id_values[blockIdx.x] = x[ids[blockIdx.x]];
  __shared__ float fscratch[32];
  __shared__ double dscratch[32];
  __shared__ PrepPartial pscratch[32];
  float mine_v[kMaxLogprobTop];
  std::int32_t mine_i[kMaxLogprobTop];
  int held = 0;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = rank_value(x[i]);
    m = fmaxf(m, v);
    if (top > 0 && (held < top || greedy_before(v, i, mine_v[top - 1], mine_i[top - 1]))) {
      int at = held < top ? held++ : top - 1;  // insertion: the list stays ranked
      while (at > 0 && greedy_before(v, i, mine_v[at - 1], mine_i[at - 1])) {
        mine_v[at] = mine_v[at - 1];
        mine_i[at] = mine_i[at - 1];
        --at;
      }
      mine_v[at] = v;
      mine_i[at] = i;
    }
  }
  m = block_reduce(m, fscratch, MaxOp{});
  double sum = 0;
  if (isfinite(m))
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += exp(static_cast<double>(rank_value(x[i])) - m);
  sum = block_reduce(sum, dscratch, SumOp{});
  if (threadIdx.x == 0) lse[blockIdx.x] = isfinite(m) ? static_cast<double>(m) + log(sum) : 0.0;
  int head = 0;
  for (int r = 0; r < top; ++r) {
    PrepPartial mine{-INFINITY, INT_MAX, INT_MAX, 0};
    if (head < held) mine = PrepPartial{mine_v[head], mine_i[head], INT_MAX, 0};
    const PrepPartial best = block_combine(mine, pscratch);
    if (best.best_i == INT_MAX) break;  // fewer than `top` entries in the row
    if (head < held && mine_i[head] == best.best_i) ++head;
    if (threadIdx.x == 0) {
      top_ids[blockIdx.x * top + r] = best.best_i;
      top_values[blockIdx.x * top + r] = best.best_v;
    }
  }
}

void check_rows(std::int64_t rows, std::int64_t n, const char* what) {
  if (rows < 0 || n <= 0 || n > 0x7fffffff || rows > 0x7fffffff)
    throw std::invalid_argument(std::string(what) + ": bad shape");
}

template <class T>
void launch_argmax(const T* x, std::int64_t rows, std::int64_t n, std::int32_t* out, cudaStream_t stream) {
  check_rows(rows, n, "argmax_rows");
  if (rows == 0) return;
  argmax_kernel<T><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, n, out);
  ZOO_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_log_softmax(const T* x, float* out, std::int64_t rows, std::int64_t n, cudaStream_t stream) {
  check_rows(rows, n, "log_softmax_rows");
  if (rows == 0) return;
  log_softmax_kernel<T><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, out, n);
  ZOO_CUDA_CHECK_LAUNCH();
}

std::int64_t top_k_chunks(std::int64_t n) { return (n + kChunk - 1) / kChunk; }

template <class T>
void launch_top_k(const T* x, std::int64_t rows, std::int64_t n, int k, std::int32_t* indices, float* values,
                  void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  check_rows(rows, n, "top_k_rows");
  if (k < 1 || k > kMaxTopK || k > n)
    throw std::invalid_argument("top_k_rows: k=" + std::to_string(k) + " must be in [1, min(n, " +
                                std::to_string(kMaxTopK) + ")]");
  if (rows == 0) return;
  const std::int64_t chunks = top_k_chunks(n);
  if (chunks > 65535) throw std::invalid_argument("top_k_rows: row too long");
  if (chunks == 1) {
    // The chunk's candidates are the answer; values go to a scratch slot when not wanted.
    if (!values && workspace_bytes < top_k_workspace_bytes(rows, n, k))
      throw std::invalid_argument("top_k_rows: workspace too small");
    float* v = values ? values : static_cast<float*>(workspace);
    top_k_chunk_kernel<T><<<dim3(1, static_cast<unsigned>(rows)), kTopKThreads, 0, stream>>>(x, n, k, 1, v, indices);
    ZOO_CUDA_CHECK_LAUNCH();
    return;
  }
  if (workspace_bytes < top_k_workspace_bytes(rows, n, k)) throw std::invalid_argument("top_k_rows: workspace too small");
  const std::int64_t per_row = chunks * k;
  float* cand_v = static_cast<float*>(workspace);
  auto* cand_i = reinterpret_cast<std::int32_t*>(cand_v + rows * per_row);
  top_k_chunk_kernel<T><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows)), kTopKThreads, 0, stream>>>(
      x, n, k, chunks, cand_v, cand_i);
  ZOO_CUDA_CHECK_LAUNCH();
  top_k_merge_kernel<<<static_cast<unsigned>(rows), kTopKThreads, 0, stream>>>(cand_v, cand_i, per_row, k, values,
                                                                             indices);
  ZOO_CUDA_CHECK_LAUNCH();
}

// The first kernel of every mode (it checks the row; then the argmax, the histogram or the keys).
template <SampleMode Mode>
void launch_prep(const float* logits, int count, int blocks, const SampleParams* params, SampleOutput* out,
                 std::byte* ws, const SampleLayout& l, cudaStream_t stream) {
  sample_prep_kernel<Mode><<<blocks, kSampleThreads, 0, stream>>>(logits, count, params, out, ws, l);
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void argmax_rows(const float* x, std::int64_t rows, std::int64_t n, std::int32_t* out, cudaStream_t stream) {
  launch_argmax(x, rows, n, out, stream);
}
void argmax_rows(const Bf16* x, std::int64_t rows, std::int64_t n, std::int32_t* out, cudaStream_t stream) {
  launch_argmax(dev(x), rows, n, out, stream);
}
void log_softmax_rows(const float* x, float* out, std::int64_t rows, std::int64_t n, cudaStream_t stream) {
  launch_log_softmax(x, out, rows, n, stream);
}
void log_softmax_rows(const Bf16* x, float* out, std::int64_t rows, std::int64_t n, cudaStream_t stream) {
  launch_log_softmax(dev(x), out, rows, n, stream);
}

std::size_t top_k_workspace_bytes(std::int64_t rows, std::int64_t n, int k) {
  if (rows <= 0 || n <= 0 || k <= 0) return 0;
  return static_cast<std::size_t>(rows) * static_cast<std::size_t>(top_k_chunks(n)) * static_cast<std::size_t>(k) *
         (sizeof(float) + sizeof(std::int32_t));
}

void top_k_rows(const float* x, std::int64_t rows, std::int64_t n, int k, std::int32_t* indices, float* values,
                void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  launch_top_k(x, rows, n, k, indices, values, workspace, workspace_bytes, stream);
}
void top_k_rows(const Bf16* x, std::int64_t rows, std::int64_t n, int k, std::int32_t* indices, float* values,
                void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  launch_top_k(dev(x), rows, n, k, indices, values, workspace, workspace_bytes, stream);
}

void sample_rows_greedy(const float* logits, std::int64_t n, const std::int32_t* rows, std::int64_t count,
                        SampleOutput* out, void* workspace, std::size_t workspace_stride, cudaStream_t stream) {
  check_rows(1, n, "sample_rows_greedy");
  const SampleLayout l = sample_layout(n);
  if (workspace_stride < l.total) throw std::invalid_argument("sample_rows_greedy: workspace stride too small");
  if (count <= 0) return;
  if (count > 65535) throw std::invalid_argument("sample_rows_greedy: more than 65535 rows");
  const int prep_blocks =
      static_cast<int>(std::min<std::int64_t>(kPrepBlocksMax, (n + 4 * kSampleThreads - 1) / (4 * kSampleThreads)));
  sample_prep_kernel<SampleMode::greedy>
      <<<dim3(static_cast<unsigned>(prep_blocks), static_cast<unsigned>(count)), kSampleThreads, 0, stream>>>(
          logits, static_cast<int>(n), nullptr, out, static_cast<std::byte*>(workspace), l, rows, workspace_stride);
  ZOO_CUDA_CHECK_LAUNCH();
}

std::size_t sample_workspace_bytes(std::int64_t n) {
  check_rows(1, n, "sample_row");
  return sample_layout(n).total;
}

SampleMode sample_mode(float temperature, std::int32_t top_k) {
  if (temperature == 0.0f) return SampleMode::greedy;
  return top_k >= 1 && top_k <= kSampleSelectMaxK ? SampleMode::select : SampleMode::sort;
}

void sample_row(const float* logits, std::int64_t n, SampleMode mode, const SampleParams* params, SampleOutput* out,
                void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  check_rows(1, n, "sample_row");
  const SampleLayout l = sample_layout(n);
  if (workspace_bytes < l.total) throw std::invalid_argument("sample_row: workspace too small");
  auto* ws = static_cast<std::byte*>(workspace);
  const int count = static_cast<int>(n);
  const int prep_blocks =
      static_cast<int>(std::min<std::int64_t>(kPrepBlocksMax, (n + 4 * kSampleThreads - 1) / (4 * kSampleThreads)));
  switch (mode) {
    case SampleMode::greedy:
      launch_prep<SampleMode::greedy>(logits, count, prep_blocks, params, out, ws, l, stream);
      return;
    case SampleMode::select: {
      launch_prep<SampleMode::select>(logits, count, prep_blocks, params, out, ws, l, stream);
      const int blocks = static_cast<int>(
          std::min<std::int64_t>(kSelectBlocksMax, (n + 2 * kSelectThreads - 1) / (2 * kSelectThreads)));
      sample_select_kernel<<<blocks, kSelectThreads, 0, stream>>>(logits, count, params, out, ws, l);
      ZOO_CUDA_CHECK_LAUNCH();
      return;
    }
    case SampleMode::sort: {
      launch_prep<SampleMode::sort>(logits, count, prep_blocks, params, out, ws, l, stream);
      std::size_t sort_bytes = l.sort_bytes;
      ZOO_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
          ws + l.sort_temp, sort_bytes, reinterpret_cast<const float*>(ws + l.keys_in),
          reinterpret_cast<float*>(ws + l.keys_out), reinterpret_cast<const std::int32_t*>(ws + l.idx_in),
          reinterpret_cast<std::int32_t*>(ws + l.idx_out), count, 0, 32, stream));
      sample_pick_kernel<<<kPickBlocks, kSampleThreads, 0, stream>>>(logits, count, params, out, ws, l);
      ZOO_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  throw std::invalid_argument("sample_row: unknown mode");
}

namespace {
// The segmented sort's offsets (begin, end) at the head of `temp`, then cub's own storage.
std::size_t segmented_sort_bytes(std::int64_t count, int segment_items) {
  std::size_t bytes = 0;
  cub::DoubleBuffer<float> keys(nullptr, nullptr);
  cub::DoubleBuffer<std::int32_t> values(nullptr, nullptr);
  ZOO_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, bytes, keys, values, static_cast<int>(count) * segment_items, static_cast<int>(count),
      static_cast<const int*>(nullptr), static_cast<const int*>(nullptr)));
  return align256(2 * sizeof(int) * static_cast<std::size_t>(count)) + bytes;
}
__global__ void segment_offsets_kernel(int* begin, int* end, int count, int stride_items, int first, int items) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  begin[i] = i * stride_items + first;
  end[i] = begin[i] + items;
}
}  // namespace

std::size_t sample_rows_temp_bytes(std::int64_t n, std::int64_t count) {
  check_rows(count, n, "sample_rows");
  if (count == 0) return 0;
  return segmented_sort_bytes(count, static_cast<int>(n));
}

void sample_rows(const float* logits, std::int64_t n, SampleMode mode, const std::int32_t* rows, std::int64_t count,
                 const SampleParams* params, SampleOutput* out, void* workspace, std::size_t workspace_stride,
                 void* temp, std::size_t temp_bytes, cudaStream_t stream) {
  check_rows(count, n, "sample_rows");
  const SampleLayout l = sample_layout(n);
  if (workspace_stride < l.total || workspace_stride % 256 != 0)
    throw std::invalid_argument("sample_rows: workspace stride too small or not a multiple of 256");
  if (count == 0) return;
  if (count > 65535) throw std::invalid_argument("sample_rows: more than 65535 rows");
  if (mode == SampleMode::greedy) {
    sample_rows_greedy(logits, n, rows, count, out, workspace, workspace_stride, stream);
    return;
  }
  auto* ws = static_cast<std::byte*>(workspace);
  const int items = static_cast<int>(n);
  const auto y = static_cast<unsigned>(count);
  const int prep_blocks =
      static_cast<int>(std::min<std::int64_t>(kPrepBlocksMax, (n + 4 * kSampleThreads - 1) / (4 * kSampleThreads)));
  if (mode == SampleMode::select) {
    sample_prep_kernel<SampleMode::select><<<dim3(static_cast<unsigned>(prep_blocks), y), kSampleThreads, 0, stream>>>(
        logits, items, params, out, ws, l, rows, workspace_stride);
    ZOO_CUDA_CHECK_LAUNCH();
    const int blocks = static_cast<int>(
        std::min<std::int64_t>(kSelectBlocksMax, (n + 2 * kSelectThreads - 1) / (2 * kSelectThreads)));
    sample_select_kernel<<<dim3(static_cast<unsigned>(blocks), y), kSelectThreads, 0, stream>>>(
        logits, items, params, out, ws, l, rows, workspace_stride);
    ZOO_CUDA_CHECK_LAUNCH();
    return;
  }
  // sort: every row's keys and indices sorted in one segmented sort over the workspaces. The
  // segments are the rows' keys_in regions, counted in 4-byte items from the workspace's start;
  // the double buffers are the same regions shifted to keys_out, idx_in and idx_out.
  if (count * static_cast<std::int64_t>(workspace_stride) / 4 > INT_MAX)
    throw std::invalid_argument("sample_rows: workspaces too large for the segmented sort");
  const std::size_t need = segmented_sort_bytes(count, items);
  if (temp_bytes < need) throw std::invalid_argument("sample_rows: temp too small");
  sample_prep_kernel<SampleMode::sort><<<dim3(static_cast<unsigned>(prep_blocks), y), kSampleThreads, 0, stream>>>(
      logits, items, params, out, ws, l, rows, workspace_stride);
  ZOO_CUDA_CHECK_LAUNCH();
  auto* offsets = static_cast<int*>(temp);
  segment_offsets_kernel<<<static_cast<unsigned>((count + 255) / 256), 256, 0, stream>>>(
      offsets, offsets + count, static_cast<int>(count), static_cast<int>(workspace_stride / 4),
      static_cast<int>(l.keys_in / 4), items);
  ZOO_CUDA_CHECK_LAUNCH();
  const auto shifted = [&](std::size_t region) { return ws + region - l.keys_in; };
  cub::DoubleBuffer<float> keys(reinterpret_cast<float*>(shifted(l.keys_in)), reinterpret_cast<float*>(shifted(l.keys_out)));
  cub::DoubleBuffer<std::int32_t> values(reinterpret_cast<std::int32_t*>(shifted(l.idx_in)),
                                         reinterpret_cast<std::int32_t*>(shifted(l.idx_out)));
  std::size_t sort_bytes = need - align256(2 * sizeof(int) * static_cast<std::size_t>(count));
  ZOO_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      static_cast<std::byte*>(temp) + align256(2 * sizeof(int) * static_cast<std::size_t>(count)), sort_bytes, keys,
      values, static_cast<int>(count) * items, static_cast<int>(count), offsets, offsets + count, 0, 32, stream));
  sample_pick_kernel<<<dim3(kPickBlocks, y), kSampleThreads, 0, stream>>>(logits, items, params, out, ws, l,
                                                                         keys.selector == 1, rows, workspace_stride);
  ZOO_CUDA_CHECK_LAUNCH();
}

void logprob_rows(const float* logits, std::int64_t n, const std::int32_t* rows, std::int64_t count, int top,
                  double* lse, std::int32_t* top_ids, float* top_values, cudaStream_t stream, const std::int32_t* ids,
                  float* id_values) {
  check_rows(count, n, "logprob_rows");
  if (top < 0 || top > kMaxLogprobTop)
    throw std::invalid_argument("logprob_rows: top must be in [0, " + std::to_string(kMaxLogprobTop) + "]");
  if (count == 0) return;
  logprob_rows_kernel<<<static_cast<unsigned>(count), kLogprobThreads, 0, stream>>>(logits, static_cast<int>(n), rows,
                                                                                   top, lse, top_ids, top_values, ids,
                                                                                   id_values);
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
