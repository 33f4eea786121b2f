#include "zoo/request.hpp"

#include <fmt/format.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>

#include "zoo/error.hpp"

namespace zoo {

namespace {

// nlohmann messages start with "[json.exception.parse_error.101] "; users need only the rest.
std::string strip_json_prefix(std::string what) {
  if (what.starts_with("[json.exception.")) {
    const auto close = what.find("] ");
    if (close != std::string::npos) what.erase(0, close + 2);
  }
  return what;
}

std::string type_of(const nlohmann::json& value) {
  if (value.is_number_float()) return "a number with a fraction or exponent";
  return std::string("a JSON ") + value.type_name();
}

}  // namespace

Request parse_request(const std::string& text, const std::filesystem::path& label) {
  const std::string where = label.string();
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", where, strip_json_prefix(e.what())));
  }
  if (!root.is_object())
    throw InputError(fmt::format("{}: a request must be a JSON object with \"input_ids\", got {}", where, type_of(root)));

  Request request;
  request.file = label;
  auto ids = root.find("input_ids");
  if (ids == root.end()) throw InputError(fmt::format("{}: missing required field \"input_ids\"", where));
  if (!ids->is_array())
    throw InputError(fmt::format("{}: input_ids must be an array of integers, got {}", where, type_of(*ids)));
  if (ids->empty()) throw InputError(fmt::format("{}: input_ids is empty (a prompt needs at least one token)", where));

  request.input_ids.reserve(ids->size());
  for (std::size_t i = 0; i < ids->size(); ++i) {
    const auto& value = (*ids)[i];
    if (value.is_number_unsigned()) {
      const auto u = value.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw InputError(fmt::format("{}: input_ids[{}] = {} is outside the int64 range", where, i, u));
      request.input_ids.push_back(static_cast<std::int64_t>(u));
    } else if (value.is_number_integer()) {
      request.input_ids.push_back(value.get<std::int64_t>());
    } else {
      // Scalars are quoted back; a nested value is only named (dumping it could be huge or deep).
      throw InputError(fmt::format("{}: input_ids[{}] is not an integer ({}{})", where, i, type_of(value),
                                   value.is_primitive() ? ": " + value.dump() : std::string()));
    }
  }
  root.erase(ids);
  request.fields = std::move(root);
  return request;
}

Request load_request(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw InputError(fmt::format("{}: is a directory, expected a request JSON file", file.string()));
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    const bool exists = std::filesystem::exists(file, ec);
    throw InputError(fmt::format("{}: {}", file.string(), exists ? "cannot be read" : "no such file"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("{}: read error", file.string()));
  return parse_request(text.str(), file);
}

}  // namespace zoo
