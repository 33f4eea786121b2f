#include "zoo/utf8_stream.hpp"

#include <cstdint>

namespace zoo {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// The length of the sequence a lead byte starts and the allowed range of its second byte (the
// Unicode table of well-formed byte sequences); 0 when the byte cannot start one.
struct Lead {
  int length;
  std::uint8_t lo, hi;
};

Lead lead_of(std::uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing past U+10FFFF
  return {0, 0, 0};
}

enum class Scan { Complete, Invalid, Truncated };

// Looks at the sequence starting at text[i]: complete (its length in `used`), invalid (the maximal
// ill-formed subpart's length in `used`), or truncated by the end of `text`.
Scan scan(std::string_view text, std::size_t i, std::size_t& used) {
  const auto b = static_cast<std::uint8_t>(text[i]);
  const Lead lead = lead_of(b);
  if (lead.length == 0) {
    used = 1;
    return Scan::Invalid;
  }
  for (int k = 1; k < lead.length; ++k) {
    if (i + static_cast<std::size_t>(k) >= text.size()) return Scan::Truncated;
    const auto c = static_cast<std::uint8_t>(text[i + static_cast<std::size_t>(k)]);
    const bool ok = k == 1 ? (c >= lead.lo && c <= lead.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) {
      used = static_cast<std::size_t>(k);
      return Scan::Invalid;
    }
  }
  used = static_cast<std::size_t>(lead.length);
  return Scan::Complete;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  out.reserve(pending_.size());
  std::size_t i = 0;
  while (i < pending_.size()) {
    std::size_t used = 0;
    const Scan s = scan(pending_, i, used);
    if (s == Scan::Truncated) break;
    if (s == Scan::Complete)
      out.append(pending_, i, used);
    else
      out.append(kReplacement);
    i += used;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = push({});
  // What is left is one truncated sequence: its valid prefix is one maximal ill-formed subpart.
  if (!pending_.empty()) out.append(kReplacement);
  pending_.clear();
  return out;
}

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t used = 0;
    if (scan(text, i, used) != Scan::Complete) return false;
    i += used;
  }
  return true;
}

}  // namespace zoo
