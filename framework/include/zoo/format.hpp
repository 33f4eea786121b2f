#pragma once
#include <cstddef>
#include <string>

namespace zoo {

// "512 B", "41.0 KB", "2.5 MB", "16.38 GB": sizes for humans (powers of 1000).
std::string format_bytes(std::size_t bytes);

}  // namespace zoo
