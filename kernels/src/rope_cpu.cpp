// Rotary position embedding, half-split layout, following transformers' float32 recipe:
//   inv_freq = the model's frequency table (default: 1.0 / theta ** (arange(0, D, 2).float() / D))
//   freqs    = position.float() * inv_freq                         (float32 product)
//   cos, sin = cos(freqs) * scaling, sin(freqs) * scaling          (float32)
//   x'       = x * cos + rotate_half(x) * sin,  rotate_half(x) = cat(-x2, x1)
// Computing the angle in float32 matters at large positions: it differs from the exact angle by
// up to position * inv_freq * 2^-24, and the model was trained with the float32 one.
#include <cmath>
#include <cstdint>
#include <vector>

#include "simd_cpu.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS {

// rotary_dim is checked to be even and at most head_dim by the dispatcher (cpu_dispatch.cpp). The
// rotated part is the first rotary_dim values of each head, split in halves; the rest pass
// through (partial rotary, as transformers' cat([rotated, pass])).
void rope_half_split(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                     std::int64_t rotary_dim, const std::int64_t* positions, const float* inv_freq,
                     float attention_scaling) {
  if (tokens <= 0 || heads <= 0 || head_dim <= 0 || rotary_dim <= 0) return;
  const std::int64_t half = rotary_dim / 2;
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 14) / (heads * head_dim));
  ThreadPool::global().parallel_for(tokens, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> cos_t(static_cast<std::size_t>(half)), sin_t(static_cast<std::size_t>(half));
    for (std::int64_t t = begin; t < end; ++t) {
      const float pos = static_cast<float>(positions[t]);
      for (std::int64_t i = 0; i < half; ++i) {
        const float angle = pos * inv_freq[i];
        cos_t[i] = std::cos(angle) * attention_scaling;
        sin_t[i] = std::sin(angle) * attention_scaling;
      }
      for (std::int64_t h = 0; h < heads; ++h) {
        float* x1 = x + (t * heads + h) * head_dim;
        float* x2 = x1 + half;
        for (std::int64_t i = 0; i < half; ++i) {
          const float a = x1[i], b = x2[i];
          x1[i] = a * cos_t[i] - b * sin_t[i];
          x2[i] = b * cos_t[i] + a * sin_t[i];
        }
      }
    }
  });
}

}  // namespace zoo::kernels::cpu::ZOO_CPU_ISA_NS
