#pragma once
#include <cstdint>
#include <vector>

namespace zoo::higgs {

// The delay pattern of multi-codebook audio: codebook c is shifted c steps later, with BOC before
// its first code and EOC after its last. For reference codes [T][K] the result has T+K-1 rows:
// row t, codebook c = BOC if t < c, codes[t-c][c] if c <= t < c+T, else EOC.
std::vector<std::vector<std::int64_t>> apply_delay_pattern(const std::vector<std::vector<std::int64_t>>& codes,
                                                           std::int64_t num_codebooks, std::int64_t boc,
                                                           std::int64_t eoc);

}  // namespace zoo::higgs
