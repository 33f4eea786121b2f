#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace zoo {

// "512 B", "41.0 KB", "2.5 MB", "16.38 GB": sizes for humans (powers of 1000).
std::string format_bytes(std::size_t bytes);

// Text from files (tensor names, metadata, paths, messages quoting them) made safe to print on a
// terminal: control characters (C0, DEL, and C1 encoded as UTF-8) become \n, \r, \t, \e or \xHH,
// so a crafted name can neither start a new line (a fake "result: PASS") nor send escape
// sequences. Everything else, UTF-8 included, is kept. The one escaping rule for all output.
// Text longer than `max_bytes` (a hostile name can be megabytes) is cut there, at a UTF-8
// character boundary, and "..." marks the cut.
std::string escape_text(std::string_view text, std::size_t max_bytes = std::string_view::npos);

}  // namespace zoo
