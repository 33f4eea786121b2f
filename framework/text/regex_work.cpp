#include "regex_work.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace zoo::tokenizer_detail {

namespace {

// A repeat this long inside a look-around is scanned again from every start position; real
// tokenizers look ahead one character (\s+(?!\S)).
constexpr unsigned long kMaxLookaroundRepeat = 64;

bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The end of a character class that opens at p[i] == '[' (one past its ']').
size_t class_end(std::string_view p, size_t i) {
  ++i;
  if (i < p.size() && p[i] == '^') ++i;
  if (i < p.size() && p[i] == ']') ++i;  // a leading ] is literal
  while (i < p.size() && p[i] != ']') {
    if (p[i] == '\\') {
      i += 2;
    } else if (p[i] == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // [:alpha:]
      const size_t close = p.find(":]", i + 2);
      i = close == std::string_view::npos ? p.size() : close + 2;
    } else {
      ++i;
    }
  }
  return i + 1;
}

// A {n}, {n,} or {n,m} quantifier at p[i] == '{': its length (0 when the brace is a literal) and
// its upper bound (0 for none).
size_t brace_quantifier(std::string_view p, size_t i, unsigned long& max, bool& bounded) {
  size_t j = i + 1;
  while (j < p.size() && digit(p[j])) ++j;
  if (j == i + 1) return 0;
  bounded = true;
  max = std::stoul(std::string(p.substr(i + 1, std::min<size_t>(j - i - 1, 18))));
  if (j < p.size() && p[j] == ',') {
    const size_t from = ++j;
    while (j < p.size() && digit(p[j])) ++j;
    bounded = j > from;
    if (bounded) max = std::stoul(std::string(p.substr(from, std::min<size_t>(j - from, 18))));
  }
  if (j >= p.size() || p[j] != '}') return 0;
  return j + 1 - i;
}

// (?1), (?+1), (?-1): a call of a numbered group (rest follows the '(').
bool numbered_call(std::string_view rest) {
  size_t j = 1;
  if (rest.size() <= j || rest[0] != '?') return false;
  if (rest[j] == '+' || rest[j] == '-') ++j;
  const size_t digits = j;
  while (j < rest.size() && digit(rest[j])) ++j;
  return j > digits && j < rest.size() && rest[j] == ')';
}

}  // namespace

std::string_view uncounted_construct(std::string_view p) {
  std::vector<bool> groups;  // per open group: is it a look-around
  int lookarounds = 0;
  bool quantifiable = false;  // the previous item can take a quantifier
  for (size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) break;
      const char e = p[i + 1];
      if (e == 'Q') {  // \Q...\E is literal
        const size_t end = p.find("\\E", i + 2);
        i = end == std::string_view::npos ? p.size() : end + 2;
      } else if (e == 'g' && i + 2 < p.size() && (p[i + 2] == '<' || p[i + 2] == '\'')) {
        return "a subroutine call (\\g<...>)";
      } else if ((e == 'p' || e == 'P' || e == 'x' || e == 'o' || e == 'N' || e == 'g' || e == 'k') &&
                 i + 2 < p.size() && p[i + 2] == '{') {
        const size_t close = p.find('}', i + 3);
        i = close == std::string_view::npos ? p.size() : close + 1;
      } else {
        i += 2;
      }
      quantifiable = true;
      continue;
    }
    if (c == '[') {
      i = class_end(p, i);
      quantifiable = true;
      continue;
    }
    if (c == '(') {
      const std::string_view rest = p.substr(i + 1);
      if (rest.starts_with("*")) return "a (*...) verb or assertion";
      if (rest.starts_with("?#")) {  // a comment
        const size_t close = p.find(')', i);
        i = close == std::string_view::npos ? p.size() : close + 1;
        continue;
      }
      if (rest.starts_with("?>")) return "an atomic group (?>...)";
      if (rest.starts_with("?R") || rest.starts_with("?&") || rest.starts_with("?P>") || numbered_call(rest))
        return "recursion or a subroutine call";
      if (rest.starts_with("?*") || rest.starts_with("?<*")) return "a non-atomic look-around (?*...)";
      if (rest.size() > 1 && rest[0] == '?') {
        // Inline options: extended mode would let "a* +" be a possessive repeat the scan cannot see.
        size_t j = 1;
        while (j < rest.size() && (std::isalpha(static_cast<unsigned char>(rest[j])) || rest[j] == '-' || rest[j] == '^')) {
          if (rest[j] == 'x') return "extended mode (?x)";
          ++j;
        }
      }
      const bool look = rest.starts_with("?=") || rest.starts_with("?!") || rest.starts_with("?<=") ||
                        rest.starts_with("?<!");
      groups.push_back(look);
      lookarounds += look;
      i += 1;
      quantifiable = false;
      continue;
    }
    if (c == ')') {
      if (!groups.empty()) {
        lookarounds -= groups.back();
        groups.pop_back();
      }
      ++i;
      quantifiable = true;
      continue;
    }
    bool quantifier = false, bounded = true;
    unsigned long max = 1;
    size_t len = 1;
    if (c == '*' || c == '+') {
      quantifier = quantifiable;
      bounded = false;
    } else if (c == '?') {
      quantifier = quantifiable;
    } else if (c == '{') {
      len = brace_quantifier(p, i, max, bounded);
      quantifier = quantifiable && len > 0;
      if (len == 0) len = 1;
    }
    if (!quantifier) {
      // '(' followed by '?' was handled above; a '?' here after nothing is PCRE2's error to report.
      i += len;
      quantifiable = c != '|' && c != '^' && c != '$';
      continue;
    }
    i += len;
    if (i < p.size() && p[i] == '+') return "a possessive repeat (*+, ++, ?+, {n,m}+)";
    if (i < p.size() && p[i] == '?') ++i;  // lazy
    if (lookarounds > 0 && (!bounded || max > kMaxLookaroundRepeat))
      return "an unbounded repeat inside a look-around";
    quantifiable = false;
  }
  return {};
}

}  // namespace zoo::tokenizer_detail
