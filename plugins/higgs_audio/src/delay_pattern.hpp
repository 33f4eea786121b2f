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

// The inverse: delayed rows [L][K] back to frames [L-K+1][K], frame t codebook c = rows[t+c][c].
// Fewer than K rows hold no complete frame: the result is empty.
std::vector<std::vector<std::int64_t>> reverse_delay_pattern(const std::vector<std::vector<std::int64_t>>& rows,
                                                             std::int64_t num_codebooks);

}  // namespace zoo::higgs
