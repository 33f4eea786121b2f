#pragma once
// The one random stream of Zoo's samplers: SplitMix64 (Steele, Lea, Flood 2014). Tiny, and the same
// sequence on every platform and standard library, unlike std::uniform_real_distribution, so a seed
// reproduces a sampled run anywhere. Header-only: plugins use it without linking anything new.
#include <cstdint>

namespace zoo {

// Advances `state` and returns the next 64-bit output.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from the top 53 bits of the next output.
inline double uniform01(std::uint64_t& state) { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }

}  // namespace zoo
