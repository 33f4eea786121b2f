// Embedding gather, RMSNorm (plain and fused with the residual add), and the fused per-head
// q/k RMSNorm + RoPE + KV-cache write.
#include <stdexcept>
#include <string>

#include "device_utils.cuh"
#include "launch.cuh"
#include "vec.cuh"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {
namespace {
using namespace detail;

int row_threads(std::int64_t elements) {
  const std::int64_t t = ((elements + 31) / 32) * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 1024 ? 1024 : t));
}

// ---- embedding ---------------------------------------------------------------------------------
template <int VEC>
__global__ void embedding_kernel(const bf16* __restrict__ table, std::int64_t vocab, int hidden,
                                 const std::int32_t* __restrict__ ids, bf16* __restrict__ out) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t id = ids[t];
  const bool valid = id >= 0 && id < vocab;
  const bf16* src = table + (valid ? id : 0) * hidden;
  bf16* dst = out + t * hidden;
  for (int i = threadIdx.x * VEC; i < hidden; i += blockDim.x * VEC) {
    float v[VEC];
    if (valid) {
      load_f32<VEC>(src + i, v);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = 0.0f;
    }
    store_bf16<VEC>(dst + i, v);
  }
}

__global__ void scatter_rows_kernel(const std::int32_t* __restrict__ positions, const float* __restrict__ rows,
                                    int hidden, bf16* __restrict__ out) {
  const std::int64_t r = blockIdx.x;
  const std::int64_t pos = positions[r];
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[pos * hidden + i] = to_bf16(rows[r * hidden + i]);
}

// ---- RMSNorm -----------------------------------------------------------------------------------
// One block per row. Pass 1 (ADD: h = bf16(h + x), written back) accumulates the sum of squares
// in float32; pass 2 re-reads the same elements (each thread its own, so in-place is safe). Rows
// are x_stride / y_stride elements apart (h shares x's layout). ONE_PLUS: y = bf16(x * inv * (1 +
// w)) in float32, rounded once (the 1 + w norms); else y = bf16(w * bf16(x * inv)). Without a weight
// (w null, ADD only) y = h: the residual stream itself (norms after the sublayers only).
// One normed value: x * inv * (1 + w) rounded once (ONE_PLUS), else w * bf16(x * inv). Shared by
// the kernels below so the fused norm_add_rms_norm rounds exactly as rms_norm and add_rms_norm do.
template <bool ONE_PLUS>
__device__ __forceinline__ float weighted_norm(float x, float inv, float w) {
  return ONE_PLUS ? x * inv * (1.0f + w) : w * round_bf16(x * inv);
}

template <int VEC, bool ADD, bool ONE_PLUS, bool HAS_W>
__global__ void rms_norm_kernel(const bf16* x, bf16* h, const bf16* __restrict__ w, bf16* y, int dim, float eps,
                                std::int64_t x_stride, std::int64_t y_stride) {
  __shared__ float scratch[32];
  // A PDL link of the decode chain (launch.cuh): everything here depends on the previous kernel.
  allow_dependent_launch();
  grid_dependency_wait();
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * x_stride;
  const std::int64_t out_base = static_cast<std::int64_t>(blockIdx.x) * y_stride;
  const bf16* src = ADD ? h + base : x + base;
  float ss = 0.0f;
  for (int i = threadIdx.x * VEC; i < dim; i += blockDim.x * VEC) {
    float v[VEC];
    load_f32<VEC>(src + i, v);
    if constexpr (ADD) {
      float a[VEC];
      load_f32<VEC>(x + base + i, a);
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = round_bf16(v[j] + a[j]);
      store_bf16<VEC>(h + base + i, v);
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) ss += v[j] * v[j];
  }
  ss = block_reduce(ss, scratch, SumOp{});
  const float inv = rsqrtf(ss / static_cast<float>(dim) + eps);
  for (int i = threadIdx.x * VEC; i < dim; i += blockDim.x * VEC) {
    float v[VEC], g[VEC];
    load_f32<VEC>(src + i, v);
    if constexpr (HAS_W) {
      load_f32<VEC>(w + i, g);
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = weighted_norm<ONE_PLUS>(v[j], inv, g[j]);
    }
    store_bf16<VEC>(y + out_base + i, v);
  }
}

// norm_add_rms_norm (ops.hpp): three passes over the row, each thread its own elements: x's sum of
// squares; n = bf16(norm(x, w_out)), h = bf16(h + n) and h's sum of squares; y = norm(h, w_next).
template <int VEC, bool ONE_PLUS, bool HAS_W>
__global__ void norm_add_rms_norm_kernel(const bf16* x, const bf16* __restrict__ w_out, bf16* h,
                                         const bf16* __restrict__ w_next, bf16* y, int dim, float eps) {
  __shared__ float scratch[32];
  allow_dependent_launch();
  grid_dependency_wait();
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int i = threadIdx.x * VEC; i < dim; i += blockDim.x * VEC) {
    float v[VEC];
    load_f32<VEC>(x + base + i, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) ss += v[j] * v[j];
  }
  ss = block_reduce(ss, scratch, SumOp{});
  const float inv_out = rsqrtf(ss / static_cast<float>(dim) + eps);
  float ss2 = 0.0f;
  for (int i = threadIdx.x * VEC; i < dim; i += blockDim.x * VEC) {
    float v[VEC], g[VEC], r[VEC];
    load_f32<VEC>(x + base + i, v);
    load_f32<VEC>(w_out + i, g);
    load_f32<VEC>(h + base + i, r);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      r[j] = round_bf16(r[j] + round_bf16(weighted_norm<ONE_PLUS>(v[j], inv_out, g[j])));
      ss2 += r[j] * r[j];
    }
    store_bf16<VEC>(h + base + i, r);
  }
  ss2 = block_reduce(ss2, scratch, SumOp{});
  const float inv = rsqrtf(ss2 / static_cast<float>(dim) + eps);
  for (int i = threadIdx.x * VEC; i < dim; i += blockDim.x * VEC) {
    float v[VEC], g[VEC];
    load_f32<VEC>(h + base + i, v);
    if constexpr (HAS_W) {
      load_f32<VEC>(w_next + i, g);
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = weighted_norm<ONE_PLUS>(v[j], inv, g[j]);
    }
    store_bf16<VEC>(y + base + i, v);
  }
}

template <int VEC, bool ONE_PLUS>
void launch_norm_add_norm(const Bf16* x, const Bf16* w_out, Bf16* h, const Bf16* w_next, Bf16* y, unsigned rows,
                          int dim, float eps, cudaStream_t stream) {
  const int threads = row_threads(dim / VEC);
  if (w_next)
    launch_pdl(norm_add_rms_norm_kernel<VEC, ONE_PLUS, true>, rows, threads, 0, stream, dev(x), dev(w_out), dev(h),
               dev(w_next), dev(y), dim, eps);
  else
    launch_pdl(norm_add_rms_norm_kernel<VEC, ONE_PLUS, false>, rows, threads, 0, stream, dev(x), dev(w_out), dev(h),
               static_cast<const bf16*>(nullptr), dev(y), dim, eps);
}

template <bool ADD, bool ONE_PLUS>
void launch_rms_norm(const Bf16* x, Bf16* h, const Bf16* w, Bf16* y, std::int64_t rows, std::int64_t dim, float eps,
                     std::int64_t x_stride, std::int64_t y_stride, cudaStream_t stream) {
  if (rows < 0 || dim <= 0 || x_stride < dim || y_stride < dim) throw std::invalid_argument("rms_norm: bad shape");
  if (!w && !ADD) throw std::invalid_argument("rms_norm: no weight");
  if (rows == 0) return;
  const bool vec = dim % 8 == 0 && x_stride % 8 == 0 && y_stride % 8 == 0 && aligned16(x) && aligned16(h) &&
                   (!w || aligned16(w)) && aligned16(y);
  const int d = static_cast<int>(dim);
  const unsigned blocks = static_cast<unsigned>(rows);
  const auto* wd = w ? dev(w) : nullptr;
  if (!w) {  // ADD only: y = h, the residual stream itself
    if (vec) launch_pdl(rms_norm_kernel<8, ADD, false, false>, blocks, row_threads(dim / 8), 0, stream, dev(x), dev(h),
                        wd, dev(y), d, eps, x_stride, y_stride);
    else launch_pdl(rms_norm_kernel<1, ADD, false, false>, blocks, row_threads(dim), 0, stream, dev(x), dev(h), wd,
                    dev(y), d, eps, x_stride, y_stride);
  } else if (vec) {
    launch_pdl(rms_norm_kernel<8, ADD, ONE_PLUS, true>, blocks, row_threads(dim / 8), 0, stream, dev(x), dev(h), wd,
               dev(y), d, eps, x_stride, y_stride);
  } else {
    launch_pdl(rms_norm_kernel<1, ADD, ONE_PLUS, true>, blocks, row_threads(dim), 0, stream, dev(x), dev(h), wd,
               dev(y), d, eps, x_stride, y_stride);
  }
  ZOO_CUDA_CHECK_LAUNCH();
}

// ---- RMSNorm over a row split across ranks ---------------------------------------------------
__global__ void row_sum_squares_kernel(const bf16* x, float* sums, int dim, std::int64_t x_stride) {
  __shared__ float scratch[32];
  const bf16* row = x + static_cast<std::int64_t>(blockIdx.x) * x_stride;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = to_f32(row[i]);
    ss += v * v;
  }
  ss = block_reduce(ss, scratch, SumOp{});
  if (threadIdx.x == 0) sums[blockIdx.x] = ss;
}

template <bool ONE_PLUS>
__global__ void rms_norm_split_kernel(const bf16* x, const bf16* __restrict__ w, bf16* y, int dim,
                                      std::int64_t x_stride, std::int64_t y_stride, const float* pieces,
                                      int parts, std::int64_t rows, float divide_by, float whole_dim,
                                      float eps) {
  float ss = 0.0f;
  for (int p = 0; p < parts; ++p) ss += pieces[p * rows + blockIdx.x];
  const float inv = rsqrtf(ss / divide_by / whole_dim + eps);
  const bf16* src = x + static_cast<std::int64_t>(blockIdx.x) * x_stride;
  bf16* dst = y + static_cast<std::int64_t>(blockIdx.x) * y_stride;
  for (int i = threadIdx.x; i < dim; i += blockDim.x)
    dst[i] = to_bf16(weighted_norm<ONE_PLUS>(to_f32(src[i]), inv, to_f32(w[i])));
}

// ---- q/k norm + RoPE ---------------------------------------------------------------------------
struct QkParams {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  std::int64_t q_stride, k_stride, v_stride;
  const bf16* qw;
  const bf16* kw;
  const float* inv_freq;
  bf16* q_out;
  bf16* k_cache;
  bf16* v_cache;
  bf16* q_normed;
  bf16* k_normed;
  const std::int32_t* positions;
  const std::int32_t* cache_rows;
  std::int64_t start, tokens;
  int q_heads, kv_heads, head_dim, rotary_dim;
  bool one_plus;
  float eps, theta, attention_scaling;
};

constexpr int kQkWarps = 8;

// One warp per (token, head slot); slots are q heads, then k heads, then v heads. Lane j handles
// the rotation pairs (p, p + D/2) for p = j, j + 32, ...
// GENERAL: partial rotary or 1 + w norms; off, the path every model had before them.
template <bool GENERAL>
__global__ void __launch_bounds__(kQkWarps * 32) qk_norm_rope_kernel(QkParams a) {
  allow_dependent_launch();
  grid_dependency_wait();  // a PDL link (launch.cuh): q/k/v come from the previous kernel
  const int lane = threadIdx.x & 31;
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * kQkWarps + (threadIdx.x >> 5);
  const int slots = a.q_heads + 2 * a.kv_heads;
  const std::int64_t t = item / slots;
  const int slot = static_cast<int>(item % slots);
  if (t >= a.tokens) return;
  const std::int64_t pos = a.positions ? static_cast<std::int64_t>(a.positions[t]) : a.start + t;
  const std::int64_t row = a.cache_rows ? static_cast<std::int64_t>(a.cache_rows[t]) : pos;  // where k, v go
  const int D = a.head_dim, half = a.rotary_dim / 2;

  if (slot >= a.q_heads + a.kv_heads) {
    const int g = slot - a.q_heads - a.kv_heads;
    const bf16* src = a.v + t * a.v_stride + static_cast<std::int64_t>(g) * D;
    bf16* dst = a.v_cache + (row * a.kv_heads + g) * D;
    for (int i = lane; i < D; i += 32) dst[i] = src[i];
    return;
  }
  const bool is_q = slot < a.q_heads;
  const int head = is_q ? slot : slot - a.q_heads;
  const bf16* src = is_q ? a.q + t * a.q_stride + static_cast<std::int64_t>(head) * D
                         : a.k + t * a.k_stride + static_cast<std::int64_t>(head) * D;
  const bf16* w = is_q ? a.qw : a.kw;  // null: no per-head norm
  bf16* dst = is_q ? a.q_out + (t * a.q_heads + head) * D : a.k_cache + (row * a.kv_heads + head) * D;
  bf16* normed = is_q ? (a.q_normed ? a.q_normed + (t * a.q_heads + head) * D : nullptr)
                      : (a.k_normed ? a.k_normed + (t * a.kv_heads + head) * D : nullptr);

  float inv = 1.0f;
  if (w) {
    // Summed in pairs (i, i + D/2) whatever the rotary part: the order every head_dim has used.
    float ss = 0.0f;
    for (int i = lane; i < D / 2; i += 32) {
      const float x1 = to_f32(src[i]), x2 = to_f32(src[i + D / 2]);
      ss += x1 * x1 + x2 * x2;
    }
    ss = warp_sum(ss);
    inv = rsqrtf(ss / static_cast<float>(D) + a.eps);
  }
  // The normed value of element i (transformers' q/k norm module, in bf16).
  auto normed_at = [&](int i) {
    const float x = to_f32(src[i]);
    if (!w) return x;
    if constexpr (GENERAL)
      if (a.one_plus) return round_bf16(x * inv * (1.0f + to_f32(w[i])));
    return round_bf16(to_f32(w[i]) * round_bf16(x * inv));
  };
  if constexpr (GENERAL) {
    // Partial rotary: elements past rotary_dim pass through (normed, not rotated).
    for (int i = a.rotary_dim + lane; i < D; i += 32) {
      const float n = normed_at(i);
      if (normed) normed[i] = to_bf16(n);
      dst[i] = to_bf16(n);
    }
  }
  const float fpos = static_cast<float>(pos);
  for (int p = lane; p < half; p += 32) {
    const float n1 = normed_at(p), n2 = normed_at(p + half);
    if (normed) {
      normed[p] = to_bf16(n1);
      normed[p + half] = to_bf16(n2);
    }
    // transformers: inv_freq = 1 / theta ** (arange(0, R, 2).float() / R), freqs = inv_freq * pos,
    // all float32; cos/sin in float32 then cast to the activation dtype. The power is taken in
    // float64 and rounded: the correctly rounded float32 value that torch's CPU pow (where the
    // buffer is made) and the CPU reference get; powf's 2-ulp error would shift large angles.
    float inv_freq;
    if (a.inv_freq) {
      inv_freq = a.inv_freq[p];
    } else {
      const float exponent = static_cast<float>(2 * p) / static_cast<float>(a.rotary_dim);
      inv_freq = 1.0f / static_cast<float>(pow(static_cast<double>(a.theta), static_cast<double>(exponent)));
    }
    const float freq = inv_freq * fpos;
    const float c = round_bf16(cosf(freq) * a.attention_scaling), s = round_bf16(sinf(freq) * a.attention_scaling);
    const float o1 = round_bf16(n1 * c) + round_bf16(-n2 * s);
    const float o2 = round_bf16(n2 * c) + round_bf16(n1 * s);
    dst[p] = to_bf16(o1);
    dst[p + half] = to_bf16(o2);
  }
}

}  // namespace

void embedding_gather(const Bf16* table, std::int64_t vocab, std::int64_t hidden, const std::int32_t* ids,
                      std::int64_t tokens, Bf16* out, cudaStream_t stream) {
  if (tokens < 0 || hidden <= 0 || vocab <= 0) throw std::invalid_argument("embedding_gather: bad shape");
  if (tokens == 0) return;
  const int h = static_cast<int>(hidden);
  if (hidden % 8 == 0 && aligned16(table) && aligned16(out)) {
    embedding_kernel<8><<<static_cast<unsigned>(tokens), row_threads(hidden / 8), 0, stream>>>(dev(table), vocab, h,
                                                                                             ids, dev(out));
  } else {
    embedding_kernel<1><<<static_cast<unsigned>(tokens), row_threads(hidden), 0, stream>>>(dev(table), vocab, h, ids,
                                                                                          dev(out));
  }
  ZOO_CUDA_CHECK_LAUNCH();
}

void scatter_rows_f32(const std::int32_t* positions, const float* rows, std::int64_t count, std::int64_t hidden,
                      Bf16* out, cudaStream_t stream) {
  if (count < 0 || hidden <= 0) throw std::invalid_argument("scatter_rows_f32: bad shape");
  if (count == 0) return;
  scatter_rows_kernel<<<static_cast<unsigned>(count), row_threads(hidden), 0, stream>>>(positions, rows,
                                                                                       static_cast<int>(hidden), dev(out));
  ZOO_CUDA_CHECK_LAUNCH();
}

void row_sum_squares(const Bf16* x, float* sums, std::int64_t rows, std::int64_t dim, std::int64_t x_stride,
                     cudaStream_t stream) {
  if (rows < 0 || dim <= 0 || dim > (std::int64_t{1} << 30) || x_stride < dim)
    throw std::invalid_argument("row_sum_squares: bad shape");
  if (rows == 0) return;
  row_sum_squares_kernel<<<static_cast<unsigned>(rows), row_threads(dim), 0, stream>>>(
      dev(x), sums, static_cast<int>(dim), x_stride);
  ZOO_CUDA_CHECK_LAUNCH();
}

void rms_norm_split(const Bf16* x, const Bf16* w, Bf16* y, std::int64_t rows, std::int64_t dim,
                    std::int64_t x_stride, std::int64_t y_stride, const float* pieces, int parts,
                    float divide_by, float whole_dim, float eps, cudaStream_t stream, NormWeight kind) {
  if (rows < 0 || dim <= 0 || dim > (std::int64_t{1} << 30) || x_stride < dim || y_stride < dim ||
      parts < 1 || !(divide_by > 0.0f) || !(whole_dim > 0.0f) || !w || !pieces)
    throw std::invalid_argument("rms_norm_split: bad shape or arguments");
  if (rows == 0) return;
  const auto blocks = static_cast<unsigned>(rows);
  const int threads = row_threads(dim);
  if (kind == NormWeight::one_plus)
    rms_norm_split_kernel<true><<<blocks, threads, 0, stream>>>(dev(x), dev(w), dev(y), static_cast<int>(dim),
                                                                x_stride, y_stride, pieces, parts, rows,
                                                                divide_by, whole_dim, eps);
  else
    rms_norm_split_kernel<false>
        <<<blocks, threads, 0, stream>>>(dev(x), dev(w), dev(y), static_cast<int>(dim), x_stride, y_stride,
                                         pieces, parts, rows, divide_by, whole_dim, eps);
  ZOO_CUDA_CHECK_LAUNCH();
}

void rms_norm(const Bf16* x, const Bf16* w, Bf16* y, std::int64_t rows, std::int64_t dim, float eps,
              cudaStream_t stream, NormWeight kind, std::int64_t x_stride, std::int64_t y_stride) {
  // h is unused without ADD; pass x so the alignment check sees a real pointer.
  auto* h = const_cast<Bf16*>(x);
  const std::int64_t xs = x_stride ? x_stride : dim, ys = y_stride ? y_stride : dim;
  if (kind == NormWeight::one_plus) launch_rms_norm<false, true>(x, h, w, y, rows, dim, eps, xs, ys, stream);
  else launch_rms_norm<false, false>(x, h, w, y, rows, dim, eps, xs, ys, stream);
}

void add_rms_norm(Bf16* h, const Bf16* x, const Bf16* w, Bf16* y, std::int64_t rows, std::int64_t dim, float eps,
                  cudaStream_t stream, NormWeight kind) {
  if (kind == NormWeight::one_plus) launch_rms_norm<true, true>(x, h, w, y, rows, dim, eps, dim, dim, stream);
  else launch_rms_norm<true, false>(x, h, w, y, rows, dim, eps, dim, dim, stream);
}

void qk_norm_rope_cache(const QkNormRopeArgs& args, cudaStream_t stream) {
  const int rotary = args.rotary_dim ? args.rotary_dim : args.head_dim;
  if (args.tokens < 0 || args.q_heads <= 0 || args.kv_heads <= 0 || args.head_dim <= 0 || rotary % 2 != 0 ||
      rotary <= 0 || rotary > args.head_dim)
    throw std::invalid_argument("qk_norm_rope_cache: bad shape (rotary_dim even and <= head_dim, heads positive)");
  if (!args.q || !args.k || !args.v || !args.q_out || !args.k_cache || !args.v_cache ||
      (args.q_norm_weight == nullptr) != (args.k_norm_weight == nullptr))
    throw std::invalid_argument("qk_norm_rope_cache: missing pointer");
  if (args.tokens == 0) return;
  const std::int64_t D = args.head_dim;
  QkParams p{dev(args.q),
             dev(args.k),
             dev(args.v),
             args.q_stride ? args.q_stride : args.q_heads * D,
             args.k_stride ? args.k_stride : args.kv_heads * D,
             args.v_stride ? args.v_stride : args.kv_heads * D,
             args.q_norm_weight ? dev(args.q_norm_weight) : nullptr,
             args.k_norm_weight ? dev(args.k_norm_weight) : nullptr,
             args.inv_freq,
             dev(args.q_out),
             dev(args.k_cache),
             dev(args.v_cache),
             args.q_normed ? dev(args.q_normed) : nullptr,
             args.k_normed ? dev(args.k_normed) : nullptr,
             args.positions,
             args.cache_rows,
             args.start,
             args.tokens,
             args.q_heads,
             args.kv_heads,
             args.head_dim,
             rotary,
             args.one_plus,
             args.eps,
             args.theta,
             args.attention_scaling};
  const std::int64_t items = args.tokens * (args.q_heads + 2 * args.kv_heads);
  const std::int64_t blocks = (items + kQkWarps - 1) / kQkWarps;
  if (rotary != args.head_dim || args.one_plus)
    launch_pdl(qk_norm_rope_kernel<true>, static_cast<unsigned>(blocks), kQkWarps * 32, 0, stream, p);
  else
    launch_pdl(qk_norm_rope_kernel<false>, static_cast<unsigned>(blocks), kQkWarps * 32, 0, stream, p);
  ZOO_CUDA_CHECK_LAUNCH();
}

void norm_add_rms_norm(const Bf16* x, const Bf16* w_out, Bf16* h, const Bf16* w_next, Bf16* y, std::int64_t rows,
                       std::int64_t dim, float eps, cudaStream_t stream, NormWeight kind) {
  if (rows < 0 || dim <= 0 || dim > (std::int64_t{1} << 30)) throw std::invalid_argument("norm_add_rms_norm: bad shape");
  if (!w_out) throw std::invalid_argument("norm_add_rms_norm: no output-norm weight");
  if (rows == 0) return;
  const bool vec = dim % 8 == 0 && aligned16(x) && aligned16(w_out) && aligned16(h) && (!w_next || aligned16(w_next)) &&
                   aligned16(y);
  const auto r = static_cast<unsigned>(rows);
  const int d = static_cast<int>(dim);
  const bool one_plus = kind == NormWeight::one_plus;
  if (vec && one_plus) launch_norm_add_norm<8, true>(x, w_out, h, w_next, y, r, d, eps, stream);
  else if (vec) launch_norm_add_norm<8, false>(x, w_out, h, w_next, y, r, d, eps, stream);
  else if (one_plus) launch_norm_add_norm<1, true>(x, w_out, h, w_next, y, r, d, eps, stream);
  else launch_norm_add_norm<1, false>(x, w_out, h, w_next, y, r, d, eps, stream);
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
