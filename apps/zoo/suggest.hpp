#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zoo::cli {

// Edit distance with adjacent transpositions ("genrate" -> "generate" is 1, "tpo" -> "top" is 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word` when it is near enough to be a typo (a third of its length, at
// least 2 edits, or a prefix of exactly one candidate); ties go to the first listed.
std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace zoo::cli
