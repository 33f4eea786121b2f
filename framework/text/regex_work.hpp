#pragma once
#include <string_view>

namespace zoo::tokenizer_detail {

// PCRE2's match limit counts backtracking points, not characters scanned, so a scan that is thrown
// away without leaving any (a possessive repeat, an atomic group, a repeat inside a look-around, a
// verb that discards backtracking) costs its length at every start position and nothing on the
// encode budget: quadratic time on one long line whatever the limit. Such constructs are refused
// when the file loads; every other construct's work is either consumed by the match (linear) or
// given back one counted step at a time.
// Returns "" when `pattern` (PCRE2 syntax) has none, else what it found, for the message.
std::string_view uncounted_construct(std::string_view pattern);

}  // namespace zoo::tokenizer_detail
