#include "zoo/format.hpp"

#include <fmt/format.h>

namespace zoo {

std::string format_bytes(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1000) return fmt::format("{} B", bytes);
  if (b < 1e6) return fmt::format("{:.1f} KB", b / 1e3);
  if (b < 1e9) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.2f} GB", b / 1e9);
}

std::string escape_text(std::string_view text, std::size_t max_bytes) {
  bool cut = false;
  if (text.size() > max_bytes) {
    std::size_t end = max_bytes;
    // Back off over UTF-8 continuation bytes so the cut never splits a character.
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    text = text.substr(0, end);
    cut = true;
  }
  std::string out;
  out.reserve(text.size() + (cut ? 3 : 0));
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    // U+0080..U+009F (C1 controls, e.g. CSI) are 0xC2 0x80..0x9F in UTF-8.
    if (u == 0xC2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9F) {
        out += fmt::format("\\u{:04x}", next);
        ++i;
        continue;
      }
    }
    if (u >= 0x20 && u != 0x7f) {
      out += text[i];
      continue;
    }
    switch (u) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case 0x1b: out += "\\e"; break;
      default: out += fmt::format("\\x{:02x}", u); break;
    }
  }
  if (cut) out += "...";
  return out;
}

}  // namespace zoo
