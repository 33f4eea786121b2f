#include "delay_pattern.hpp"

#include <stdexcept>
#include <string>

namespace zoo::higgs {

std::vector<std::vector<std::int64_t>> apply_delay_pattern(const std::vector<std::vector<std::int64_t>>& codes,
                                                           std::int64_t num_codebooks, std::int64_t boc,
                                                           std::int64_t eoc) {
  if (num_codebooks <= 0) throw std::invalid_argument("delay pattern: num_codebooks must be positive");
  const auto T = static_cast<std::int64_t>(codes.size());
  for (const auto& row : codes)
    if (static_cast<std::int64_t>(row.size()) != num_codebooks)
      throw std::invalid_argument("delay pattern: every row needs " + std::to_string(num_codebooks) + " codes");
  if (T == 0) return {};
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(T + num_codebooks - 1),
                                             std::vector<std::int64_t>(static_cast<std::size_t>(num_codebooks)));
  for (std::int64_t t = 0; t < T + num_codebooks - 1; ++t)
    for (std::int64_t c = 0; c < num_codebooks; ++c)
      out[t][c] = t < c ? boc : (t < c + T ? codes[t - c][c] : eoc);
  return out;
}

std::vector<std::vector<std::int64_t>> reverse_delay_pattern(const std::vector<std::vector<std::int64_t>>& rows,
                                                             std::int64_t num_codebooks) {
  if (num_codebooks <= 0) throw std::invalid_argument("reverse delay pattern: num_codebooks must be positive");
  for (const auto& row : rows)
    if (static_cast<std::int64_t>(row.size()) != num_codebooks)
      throw std::invalid_argument("reverse delay pattern: every row needs " + std::to_string(num_codebooks) + " codes");
  const auto L = static_cast<std::int64_t>(rows.size());
  if (L < num_codebooks) return {};
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(L - num_codebooks + 1),
                                             std::vector<std::int64_t>(static_cast<std::size_t>(num_codebooks)));
  for (std::int64_t t = 0; t < L - num_codebooks + 1; ++t)
    for (std::int64_t c = 0; c < num_codebooks; ++c) out[t][c] = rows[t + c][c];
  return out;
}

}  // namespace zoo::higgs
