#pragma once
// Internal helpers for strict YAML reading (model configs, gates): every error names the file, line
// and column of the offending node, and unknown or duplicate keys are errors instead of silently
// ignored typos.
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace zoo::yaml_checks {

// "label:LINE:COL" (1-based), or just "label" when the node carries no position.
std::string where(const std::string& label, const YAML::Mark& mark);

[[noreturn]] void fail(const std::string& label, const YAML::Mark& mark, const std::string& what);
[[noreturn]] inline void fail(const std::string& label, const YAML::Node& node, const std::string& what) {
  fail(label, node.Mark(), what);
}

// Limits for every YAML document: nesting depth, and the size of the document with every alias
// written out (scalar bytes plus one per node), which bounds any walk of the tree.
inline constexpr int kMaxYamlDepth = 64;
inline constexpr std::uint64_t kMaxYamlExpandedBytes = std::uint64_t{16} << 20;

// Reads (through read_text_file: regular files only, size cap) and parses a YAML file;
// InputError "FILE: ..." / "FILE:LINE:COL: invalid YAML: ..." / depth and alias-expansion limits.
YAML::Node load_file(const std::filesystem::path& file);
// The same for text already in memory; `label` names it in messages.
YAML::Node parse_text(const std::string& text, const std::string& label);

// A map's entries with their key nodes (for positions). Fails on a non-map, a non-scalar key, a
// duplicate key, or a key not in `allowed` (listed in the message).
struct Entry {
  std::string key;
  YAML::Node key_node;
  YAML::Node value;
};
std::vector<Entry> map_entries(const std::string& label, const YAML::Node& node, std::string_view what,
                               const std::vector<std::string_view>& allowed);

// Typed scalars; `what` names the setting in messages ("model.device").
std::string as_string(const std::string& label, const YAML::Node& node, std::string_view what);
double as_number(const std::string& label, const YAML::Node& node, std::string_view what);
std::int64_t as_int(const std::string& label, const YAML::Node& node, std::string_view what);
bool as_bool(const std::string& label, const YAML::Node& node, std::string_view what);

std::string_view kind_name(const YAML::Node& node);

}  // namespace zoo::yaml_checks
