#include "yaml_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <system_error>

#include "zoo/error.hpp"
#include "zoo/input_file.hpp"

#include <yaml-cpp/eventhandler.h>

namespace zoo::yaml_checks {

std::string where(const std::string& label, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return label;
  return fmt::format("{}:{}:{}", label, mark.line + 1, mark.column + 1);
}

void fail(const std::string& label, const YAML::Mark& mark, const std::string& what) {
  throw InputError(fmt::format("{}: {}", where(label, mark), what));
}

namespace {

// Walks a document's parse events before the node tree is built, to bound what the tree and every
// later walk of it can cost: nesting depth (yaml-cpp's parser and our readers recurse per level)
// and expanded size. An alias is a reference that costs nothing to parse, but each use of it is
// visited and copied as if written out, so "a: &x <1 MB>" plus 20k "*x" would cost 20 GB.
class Prescan final : public YAML::EventHandler {
 public:
  explicit Prescan(const std::string& label) : label_(label) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor, 1); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    for (const auto& o : stack_)
      if (o.anchor == anchor) fail(label_, mark, "an alias inside the node it refers to makes a cycle");
    auto it = sizes_.find(anchor);
    add(mark, it == sizes_.end() ? 1 : it->second);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string& value) override {
    leaf(mark, anchor, 1 + value.size());
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    begin_node(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    begin_node(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    std::uint64_t size;
  };

  void add(const YAML::Mark& mark, std::uint64_t size) {
    total_ += size;
    if (total_ > kMaxYamlExpandedBytes)
      fail(label_, mark,
           fmt::format("aliases expand the document to more than {} MiB (alias bomb?)", kMaxYamlExpandedBytes >> 20));
    if (!stack_.empty()) stack_.back().size += size;
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor, std::uint64_t size) {
    add(mark, size);
    if (anchor != YAML::NullAnchor) sizes_[anchor] = size;
  }
  void begin_node(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (stack_.size() >= static_cast<std::size_t>(kMaxYamlDepth))
      fail(label_, mark, fmt::format("YAML is nested more than {} levels deep", kMaxYamlDepth));
    add(mark, 1);
    stack_.push_back({anchor, 1});
  }
  void close() {
    const Open done = stack_.back();
    stack_.pop_back();
    // The parent already counted this node's parts one by one; only the anchor needs the sum.
    if (done.anchor != YAML::NullAnchor) sizes_[done.anchor] = done.size;
    if (!stack_.empty()) stack_.back().size += done.size - 1;
  }

  const std::string& label_;
  std::vector<Open> stack_;
  std::map<YAML::anchor_t, std::uint64_t> sizes_;
  std::uint64_t total_ = 0;
};

}  // namespace

YAML::Node parse_text(const std::string& text, const std::string& label) {
  try {
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      Prescan prescan(label);
      parser.HandleNextDocument(prescan);  // YAML::Load reads the first document only, too
    }
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(label, e.mark, "invalid YAML: " + e.msg);
  }
}

YAML::Node load_file(const std::filesystem::path& file) {
  return parse_text(read_text_file(file, "a YAML file", kMaxYamlFileBytes), file.string());
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
