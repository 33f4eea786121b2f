#pragma once
// What every endpoint shares (the *_request.cpp and *_endpoint.cpp files): OpenAI-shaped errors and
// checked request fields.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/format.hpp"
#include "zoo/server/http_server.hpp"

namespace zoo::server {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// An answer other than 200, as OpenAI shapes it.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status_, std::string message, std::string param_ = {}, std::string code_ = "invalid_value",
           std::string type_ = "invalid_request_error")
      : std::runtime_error(std::move(message)), status(status_), type(std::move(type_)), param(std::move(param_)),
        code(std::move(code_)) {}
};

// Request text an error message or the log quotes (a name, a field): control characters escaped
// (no forged log lines, no terminal escapes) and at most 64 bytes of it, whatever the client sent.
inline std::string shown(std::string_view text) { return escape_text(text, 64); }

inline std::string dump(const ojson& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

inline std::string error_body(const std::string& message, const std::string& type, const std::string& param,
                       const std::string& code) {
  ojson error{{"message", message}, {"type", type}, {"param", param.empty() ? ojson() : ojson(shown(param))},
              {"code", code.empty() ? ojson() : ojson(code)}};
  return dump(ojson{{"error", error}});
}

inline void reply_error(Responder& r, const ApiError& e) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (e.status == 429) headers.emplace_back("Retry-After", "1");
  r.reply(e.status, "application/json", error_body(e.what(), e.type, e.param, e.code), headers);
}

// A request body that must be a JSON object.
inline json parse_json_body(const std::string& text) {
  json body;
  // In our words: the library's messages quote the client's bytes.
  try {
    body = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ApiError(400, fmt::format("the body is not valid JSON (at byte {} of {})", e.byte, text.size()), "",
                   "invalid_json");
  } catch (const json::out_of_range&) {
    throw ApiError(400, "the body holds a number past the range of a double (about 1.8e308)", "", "invalid_json");
  } catch (const json::exception&) {
    throw ApiError(400, "the body is not valid JSON", "", "invalid_json");
  }
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object", "", "invalid_json");
  return body;
}

// ---- request fields ----------------------------------------------------------------------------

inline const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}
inline double number_field(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) throw ApiError(400, fmt::format("'{}' must be a number", name), name, "invalid_type");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) throw ApiError(400, fmt::format("'{}' is {}, must be in [{}, {}]", name, x, lo, hi), name);
  return x;
}
// An integer as the request wrote it; nullopt for one past 64 bits (the JSON library holds those as
// unsigned, or as doubles when past 2^64) and for what is no integer at all (`integral` says which).
inline std::optional<std::int64_t> int64_of(const json& v, bool& integral) {
  integral = v.is_number_integer();
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  if (integral) return v.get<std::int64_t>();
  if (v.is_number_float()) {  // a whole number too long for 64 bits is out of range, not "not an integer"
    const double x = v.get<double>();
    integral = std::isfinite(x) && x == std::floor(x) && std::fabs(x) >= 9.2e18;
  }
  return std::nullopt;
}
inline std::int64_t int_field(const json& body, const char* name, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  bool integral = false;
  const auto x = int64_of(*v, integral);
  if (!integral) throw ApiError(400, fmt::format("'{}' must be an integer", name), name, "invalid_type");
  if (!x || *x < lo || *x > hi)  // the number as sent: one past 64 bits is not shown as another
    throw ApiError(400, fmt::format("'{}' is {}, must be in [{}, {}]", name, shown(v->dump()), lo, hi), name);
  return *x;
}
inline bool bool_field(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw ApiError(400, fmt::format("'{}' must be true or false", name), name, "invalid_type");
  return v->get<bool>();
}

}  // namespace zoo::server
