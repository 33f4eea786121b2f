#include "yaml_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <system_error>

#include "zoo/error.hpp"

namespace zoo::yaml_checks {

std::string where(const std::string& label, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return label;
  return fmt::format("{}:{}:{}", label, mark.line + 1, mark.column + 1);
}

void fail(const std::string& label, const YAML::Mark& mark, const std::string& what) {
  throw InputError(fmt::format("{}: {}", where(label, mark), what));
}

YAML::Node load_file(const std::filesystem::path& file) {
  const std::string label = file.string();
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw InputError(label + ": is a directory, expected a YAML file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(label + (std::filesystem::exists(file, ec) ? ": cannot be read" : ": no such file"));
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    fail(label, e.mark, "invalid YAML: " + e.msg);
  }
}

std::string_view kind_name(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing (null)";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Undefined: break;
  }
  return "nothing";
}

std::vector<Entry> map_entries(const std::string& label, const YAML::Node& node, std::string_view what,
                               const std::vector<std::string_view>& allowed) {
  if (!node.IsMap()) fail(label, node, fmt::format("{} must be a map, got {}", what, kind_name(node)));
  std::vector<Entry> entries;
  for (const auto& item : node) {
    if (!item.first.IsScalar()) fail(label, item.first, fmt::format("keys of {} must be plain names", what));
    std::string key = item.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      fail(label, item.first,
           fmt::format("unknown key '{}' in {} (expected one of: {})", key, what, fmt::join(allowed, ", ")));
    for (const auto& seen : entries)
      if (seen.key == key)
        fail(label, item.first,
             fmt::format("duplicate key '{}' in {} (first at {})", key, what, where(label, seen.key_node.Mark())));
    entries.push_back({std::move(key), item.first, item.second});
  }
  return entries;
}

std::string as_string(const std::string& label, const YAML::Node& node, std::string_view what) {
  if (!node.IsScalar()) fail(label, node, fmt::format("{} must be a string, got {}", what, kind_name(node)));
  return node.Scalar();
}

double as_number(const std::string& label, const YAML::Node& node, std::string_view what) {
  if (node.IsScalar()) {
    double value = 0;
    if (YAML::convert<double>::decode(node, value) && !std::isnan(value)) return value;
    fail(label, node, fmt::format("{} must be a number, got '{}'", what, node.Scalar()));
  }
  fail(label, node, fmt::format("{} must be a number, got {}", what, kind_name(node)));
}

std::int64_t as_int(const std::string& label, const YAML::Node& node, std::string_view what) {
  if (node.IsScalar()) {
    std::int64_t value = 0;
    if (YAML::convert<std::int64_t>::decode(node, value)) return value;
    fail(label, node, fmt::format("{} must be an integer, got '{}'", what, node.Scalar()));
  }
  fail(label, node, fmt::format("{} must be an integer, got {}", what, kind_name(node)));
}

bool as_bool(const std::string& label, const YAML::Node& node, std::string_view what) {
  if (node.IsScalar()) {
    bool value = false;
    if (YAML::convert<bool>::decode(node, value)) return value;
    fail(label, node, fmt::format("{} must be true or false, got '{}'", what, node.Scalar()));
  }
  fail(label, node, fmt::format("{} must be true or false, got {}", what, kind_name(node)));
}

}  // namespace zoo::yaml_checks
