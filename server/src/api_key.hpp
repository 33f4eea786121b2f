#pragma once
// The API key (ServerOptions::api_key): which keys can be used at all, and the comparison of what
// a client sends with it.
#include <string_view>

namespace zoo::server {

// A key a client can send: non-empty, no blanks at either end (HTTP trims a header value's, so such
// a key would never match), no control characters. InputError naming --api-key otherwise.
void check_api_key(std::string_view key);

// Whether an Authorization header value is "Bearer KEY", in time that depends on the key's length
// only (not on how much of it a guess got right).
bool api_key_matches(std::string_view authorization, std::string_view key);

}  // namespace zoo::server
