#include "suggest.hpp"

#include <algorithm>
#include <limits>

namespace zoo::cli {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment distance over three rows.
  std::vector<std::size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.empty()) return std::nullopt;
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& c : candidates) {
    const auto d = edit_distance(word, c);
    if (d <= limit && d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  if (best) return best;
  std::vector<std::string> prefixed;
  for (const auto& c : candidates)
    if (c.starts_with(word)) prefixed.push_back(c);
  if (prefixed.size() == 1) return prefixed.front();
  return std::nullopt;
}

}  // namespace zoo::cli
