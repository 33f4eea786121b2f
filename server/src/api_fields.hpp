#pragma once
// What every endpoint shares (openai_server.cpp, speech_endpoint.cpp): OpenAI-shaped errors and
// checked request fields.
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

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

inline std::string dump(const ojson& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

inline std::string error_body(const std::string& message, const std::string& type, const std::string& param,
                       const std::string& code) {
  ojson error{{"message", message}, {"type", type}, {"param", param.empty() ? ojson() : ojson(param)},
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
  try {
    body = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ApiError(400, fmt::format("the body is not valid JSON: {}", e.what()), "", "invalid_json");
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
inline std::int64_t int_field(const json& body, const char* name, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer()) throw ApiError(400, fmt::format("'{}' must be an integer", name), name, "invalid_type");
  const auto x = v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)
                     ? hi + 1
                     : v->get<std::int64_t>();
  if (x < lo || x > hi) throw ApiError(400, fmt::format("'{}' is {}, must be in [{}, {}]", name, x, lo, hi), name);
  return x;
}
inline bool bool_field(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw ApiError(400, fmt::format("'{}' must be true or false", name), name, "invalid_type");
  return v->get<bool>();
}

}  // namespace zoo::server
