// Causal grouped-query attention, one (query head, token) pair at a time:
//   s_j = (q . k_j) * scale for j <= position;  p = softmax(s) in float32;  out = sum_j p_j v_j
// like transformers' eager path (scores scaled after the dot product, softmax in float32). With a
// softcap c > 0 the scaled scores become c * tanh(s / c) (in that order); with a window
// W > 0 a query at position p sees only keys at p - W + 1 .. p (transformers' sliding mask).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "cpu_isa_ops.hpp"

#include "simd_cpu.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS {

namespace {

// One query row against keys/values at positions first .. length - 1, whose rows (kv head 0) start
// at row(j): the contiguous and the paged kernels share it, so a paged cache gives the same bits.
template <class Row>
inline void attend_one(const float* qv, const float* k, const float* v, Row row, std::int64_t g, std::int64_t head_dim,
                       std::int64_t first, std::int64_t length, float scale, float softcap, float* scores, float* acc,
                       float* out) {
  float max_score = -std::numeric_limits<float>::infinity();
  for (std::int64_t j = first; j < length; ++j) {
    float s = detail::dot(qv, k + row(j) + g * head_dim, head_dim) * scale;
    if (softcap > 0.0f) s = std::tanh(s / softcap) * softcap;
    scores[j] = s;
    max_score = std::max(max_score, s);
  }
  // Subtracting the max keeps exp() in range however large the scores are.
  float sum = 0.0f;
  for (std::int64_t j = first; j < length; ++j) {
    const float e = std::exp(scores[j] - max_score);
    scores[j] = e;
    sum += e;
  }
  const float inv_sum = 1.0f / sum;

  std::fill(acc, acc + head_dim, 0.0f);
  for (std::int64_t j = first; j < length; ++j) {
    const float p = scores[j] * inv_sum;
    const float* vv = v + row(j) + g * head_dim;
    for (std::int64_t d = 0; d < head_dim; ++d) acc[d] += p * vv[d];
  }
  std::copy(acc, acc + head_dim, out);
}

}  // namespace

// Arguments checked by the dispatcher (cpu_dispatch.cpp).
void attention_causal_gqa(const float* q, const float* k, const float* v, float* out, std::int64_t tokens,
                          std::int64_t start, std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim,
                          float scale, float softcap, std::int64_t window) {
  if (tokens <= 0 || head_dim <= 0) return;
  const std::int64_t group = q_heads / kv_heads;
  const std::int64_t context = start + tokens;
  const std::int64_t row_stride = kv_heads * head_dim;
  const auto row = [row_stride](std::int64_t j) { return j * row_stride; };
  // Items are ordered head-major so that a chunk walks consecutive tokens of one head and reuses
  // that head's keys and values from cache.
  const std::int64_t items = q_heads * tokens;
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 15) / (context * head_dim));
  ThreadPool::global().parallel_for(items, grain, [&](std::int64_t begin, std::int64_t end) {
    thread_local detail::AlignedBuffer score_buffer, acc_buffer;
    float* scores = score_buffer.get(static_cast<std::size_t>(context));
    float* acc = acc_buffer.get(static_cast<std::size_t>(head_dim));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t h = item / tokens, t = item % tokens;
      const std::int64_t length = start + t + 1;  // causal: keys at positions 0..start+t
      const std::int64_t first = window > 0 ? std::max<std::int64_t>(0, length - window) : 0;
      attend_one(q + (t * q_heads + h) * head_dim, k, v, row, h / group, head_dim, first, length, scale, softcap,
                 scores, acc, out + (t * q_heads + h) * head_dim);
    }
  });
}

void attention_paged_gqa(const float* q, const float* k, const float* v, float* out, const PagedAttentionSlice* slices,
                         const std::int64_t* item_begin, std::int64_t count, std::int64_t context, std::int64_t q_heads,
                         std::int64_t kv_heads, std::int64_t head_dim, float scale, float softcap, std::int64_t window) {
  if (count <= 0 || head_dim <= 0) return;
  const std::int64_t group = q_heads / kv_heads;
  const std::int64_t row_stride = kv_heads * head_dim;
  const std::int64_t items = item_begin[count];
  if (items == 0) return;
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 15) / (context * head_dim));
  const std::int64_t* bounds = item_begin;
  ThreadPool::global().parallel_for(items, grain, [&](std::int64_t begin, std::int64_t end) {
    thread_local detail::AlignedBuffer score_buffer, acc_buffer;
    float* scores = score_buffer.get(static_cast<std::size_t>(context));
    float* acc = acc_buffer.get(static_cast<std::size_t>(head_dim));
    // The slice holding item `begin`: the last i with bounds[i] <= begin (a plain search, since
    // per-ISA code instantiates no library templates that the other ISA's copy could replace).
    std::int64_t lo = 0, hi = count;
    while (hi - lo > 1) {
      const std::int64_t mid = (lo + hi) / 2;
      (bounds[mid] <= begin ? lo : hi) = mid;
    }
    std::int64_t i = lo;
    for (std::int64_t item = begin; item < end; ++item) {
      while (item >= bounds[i + 1]) ++i;
      const PagedAttentionSlice& slice = slices[i];
      const std::int64_t local = item - bounds[i];
      const std::int64_t h = local / slice.tokens, t = local % slice.tokens;
      const std::int64_t length = slice.start + t + 1;
      const std::int64_t first = window > 0 ? std::max<std::int64_t>(0, length - window) : 0;
      const std::int32_t* pages = slice.pages;
      const auto row = [pages, row_stride](std::int64_t j) {
        return (static_cast<std::int64_t>(pages[j / kPagedAttentionPageTokens]) * kPagedAttentionPageTokens +
                j % kPagedAttentionPageTokens) *
               row_stride;
      };
      const std::int64_t r = slice.row + t;
      attend_one(q + (r * q_heads + h) * head_dim, k, v, row, h / group, head_dim, first, length, scale, softcap,
                 scores, acc, out + (r * q_heads + h) * head_dim);
    }
  });
}

}  // namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS
