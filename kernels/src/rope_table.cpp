// The default RoPE frequency table (outside the per-ISA sources: computed once per model).
#include <cmath>
#include <cstdint>
#include <vector>

#include "zoo/kernels/cpu_ops.hpp"

namespace zoo::kernels::cpu {

std::vector<float> rope_default_inv_freq(std::int64_t head_dim, double theta) {
  // torch takes this power in float32 on the CPU, correctly rounded: so does a float64 power
  // rounded once. (powf may be an ulp off, which shifts the angle at large positions.)
  std::vector<float> inv_freq(static_cast<std::size_t>(head_dim / 2));
  for (std::int64_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[static_cast<std::size_t>(i)] =
        1.0f / static_cast<float>(std::pow(static_cast<double>(static_cast<float>(theta)), static_cast<double>(exponent)));
  }
  return inv_freq;
}

}  // namespace zoo::kernels::cpu
