#include "zoo/diagnostic_hook.hpp"

#include <cstddef>

namespace zoo {

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matcher with single-star backtracking: linear in practice and no recursion depth to
  // worry about for hostile patterns like "*a*a*a*a*b".
  std::size_t p = 0, t = 0;
  std::size_t star = std::string_view::npos, star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

PointSelection::PointSelection(std::vector<std::string> globs) : globs_(std::move(globs)) {}

PointSelection PointSelection::parse(std::string_view comma_separated) {
  std::vector<std::string> globs;
  constexpr std::string_view kSpace = " \t\r\n";
  while (true) {
    const auto comma = comma_separated.find(',');
    auto item = comma_separated.substr(0, comma);
    const auto first = item.find_first_not_of(kSpace);
    if (first != std::string_view::npos) {
      item = item.substr(first, item.find_last_not_of(kSpace) - first + 1);
      globs.emplace_back(item);
    }
    if (comma == std::string_view::npos) break;
    comma_separated.remove_prefix(comma + 1);
  }
  return PointSelection(std::move(globs));
}

bool PointSelection::matches(std::string_view name) const {
  for (const auto& glob : globs_)
    if (glob_match(glob, name)) return true;
  return false;
}

}  // namespace zoo
