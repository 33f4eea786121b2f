// Causal grouped-query attention, one (query head, token) pair at a time:
//   s_j = (q . k_j) * scale for j <= position;  p = softmax(s) in float32;  out = sum_j p_j v_j
// like transformers' eager path (scores scaled after the dot product, softmax in float32). With a
// softcap c > 0 the scaled scores become c * tanh(s / c) (in that order); with a window
// W > 0 a query at position p sees only keys at p - W + 1 .. p (transformers' sliding mask).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "simd_cpu.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS {

// Arguments checked by the dispatcher (cpu_dispatch.cpp).
void attention_causal_gqa(const float* q, const float* k, const float* v, float* out, std::int64_t tokens,
                          std::int64_t start, std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim,
                          float scale, float softcap, std::int64_t window) {
  if (tokens <= 0 || head_dim <= 0) return;
  const std::int64_t group = q_heads / kv_heads;
  const std::int64_t context = start + tokens;
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
      const std::int64_t g = h / group;
      const std::int64_t length = start + t + 1;  // causal: keys at positions 0..start+t
      const std::int64_t first = window > 0 ? std::max<std::int64_t>(0, length - window) : 0;
      const float* qv = q + (t * q_heads + h) * head_dim;

      float max_score = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = first; j < length; ++j) {
        float s = detail::dot(qv, k + (j * kv_heads + g) * head_dim, head_dim) * scale;
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
        const float* vv = v + (j * kv_heads + g) * head_dim;
        for (std::int64_t d = 0; d < head_dim; ++d) acc[d] += p * vv[d];
      }
      std::copy(acc, acc + head_dim, out + (t * q_heads + h) * head_dim);
    }
  });
}

}  // namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS
