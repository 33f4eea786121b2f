#include "api_key.hpp"

#include <fmt/format.h>

#include <cstddef>

#include "zoo/error.hpp"

namespace zoo::server {

void check_api_key(std::string_view key) {
  if (key.empty())
    throw InputError("--api-key is empty (an unset variable?): give the key, or leave the option out to serve "
                     "without one");
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  if (blank(key.front()) || blank(key.back()))
    throw InputError("--api-key begins or ends with a blank, which no client can send (HTTP trims header values)");
  for (const char c : key)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw InputError("--api-key holds a control character, which no client can send in a header");
}

bool api_key_matches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view scheme = "Bearer ";
  const bool has_scheme = authorization.starts_with(scheme);
  const std::string_view given = has_scheme ? authorization.substr(scheme.size()) : std::string_view();
  // Every byte of the key is looked at whatever the guess: the time says nothing of the key's bytes.
  unsigned diff = has_scheme && given.size() == key.size() ? 0u : 1u;
  for (std::size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(key[i]) ^ static_cast<unsigned char>(i < given.size() ? given[i] : 0);
  return diff == 0;
}

}  // namespace zoo::server
