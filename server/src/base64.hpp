#pragma once
// Base64 for audio in requests (references) and in answers (streamed chunks).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace zoo::server {

// Base64 (RFC 4648, padding optional when decoding); decoding returns nullopt on anything else.
std::string base64_encode(const void* data, std::size_t size);
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace zoo::server
