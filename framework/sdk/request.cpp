#include "zoo/request.hpp"

#include <fmt/format.h>

#include <limits>

#include "zoo/error.hpp"
#include "zoo/input_file.hpp"

namespace zoo {

namespace {

std::string type_of(const nlohmann::json& value) {
  if (value.is_number_float()) return "a number with a fraction or exponent";
  return std::string("a JSON ") + value.type_name();
}

}  // namespace

Request parse_request(const std::string& text, const std::filesystem::path& label) {
  const std::string where = label.string();
  nlohmann::json root = parse_json_text(text, where);
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
  return parse_request(read_text_file(file, "a request JSON file", kMaxJsonFileBytes), file);
}

}  // namespace zoo
