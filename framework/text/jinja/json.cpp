// JSON input read as Python's json.loads reads it: key order as written, integers exact (past 64
// bits kept as their digits), floats as doubles; nested at most a given depth.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "ast.hpp"
#include "zoo/input_file.hpp"

namespace zoo::jinja {

namespace {

// Builds values from nlohmann's SAX events: the raw text of each number is at hand there, so an
// integer past 64 bits stays exact, as Python's json.loads keeps it.
class JsonBuilder {
 public:
  using number_integer_t = std::int64_t;
  using number_unsigned_t = std::uint64_t;
  using number_float_t = double;
  using string_t = std::string;
  using binary_t = nlohmann::json::binary_t;

  explicit JsonBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return add(Value::none()); }
  bool boolean(bool b) { return add(Value(b)); }
  bool number_integer(std::int64_t i) { return add(Value(i)); }
  bool number_unsigned(std::uint64_t u) {
    if (u <= static_cast<std::uint64_t>(INT64_MAX)) return add(Value(static_cast<std::int64_t>(u)));
    Value v;
    v.kind = Value::Kind::BigInt;
    v.text = std::to_string(u);
    return add(std::move(v));
  }
  bool number_float(double d, const std::string& text) {
    if (text.find_first_of(".eE") == std::string::npos) {  // an integer too large for 64 bits
      Value v;
      v.kind = Value::Kind::BigInt;
      v.text = text == "-0" ? "0" : text;
      return add(std::move(v));
    }
    return add(Value(d));
  }
  bool string(std::string& s) { return add(Value(std::move(s))); }
  bool binary(binary_t&) { return false; }
  bool start_object(std::size_t) { return push_container(Value::make_dict()); }
  bool key(std::string& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return pop_container(); }
  bool start_array(std::size_t) { return push_container(Value::make_list()); }
  bool end_array() { return pop_container(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_ = fmt::format("not valid JSON: {} (at byte {})", json_error_text(e), position);
    return false;
  }

  Value result;
  std::string error_;

 private:
  bool add(Value v) {
    if (stack_.empty()) {
      result = std::move(v);
      return true;
    }
    Value& top = stack_.back();
    if (top.kind == Value::Kind::List) {
      top.list->push_back(std::move(v));
      return true;
    }
    // A repeated key keeps its first place and takes the last value, as dict() does; the keys are
    // indexed while the object is open, so a big object is read in linear time.
    auto& index = key_index_.back();
    const auto [at, added] = index.try_emplace(key_, top.dict->items.size());
    if (added)
      top.dict->items.emplace_back(Value(std::move(key_)), std::move(v));
    else
      top.dict->items[at->second].second = std::move(v);
    return true;
  }
  bool push_container(Value v) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      error_ = fmt::format("JSON is nested more than {} levels deep", max_depth_);
      return false;
    }
    if (!stack_.empty()) pending_keys_.push_back(std::move(key_));
    key_index_.emplace_back();
    stack_.push_back(std::move(v));
    return true;
  }
  bool pop_container() {
    Value done = std::move(stack_.back());
    stack_.pop_back();
    key_index_.pop_back();
    int deepest = 0;
    if (done.list)
      for (const auto& item : *done.list) deepest = std::max(deepest, item.depth);
    else
      for (const auto& [k, item] : done.dict->items) deepest = std::max(deepest, item.depth);
    done.depth = deepest + 1;
    if (!stack_.empty()) {
      key_ = std::move(pending_keys_.back());
      pending_keys_.pop_back();
    }
    return add(std::move(done));
  }

  int max_depth_;
  std::vector<Value> stack_;
  std::vector<std::string> pending_keys_;
  std::vector<std::unordered_map<std::string, std::size_t>> key_index_;  // one per open container
  std::string key_;
};

template <typename Json>
Value from_nlohmann(const Json& j, int level) {
  if (level > 256) throw InputError("JSON value nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(INT64_MAX)) return Value(static_cast<std::int64_t>(u));
      Value v;
      v.kind = Value::Kind::BigInt;
      v.text = std::to_string(u);
      return v;
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(from_nlohmann(e, level + 1));
      return Value::make_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict d;  // nlohmann's keys are unique already
      for (const auto& [k, e] : j.items()) d.items.emplace_back(Value(k), from_nlohmann(e, level + 1));
      return Value::make_dict(std::move(d));
    }
    default: throw InputError("a JSON value of an unsupported type");
  }
}

}  // namespace

Value parse_json(std::string_view text, std::string_view label, int max_depth) {
  JsonBuilder builder(max_depth);
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &builder);
  if (!ok) throw InputError(fmt::format("{}: {}", label, builder.error_.empty() ? "not valid JSON" : builder.error_));
  return std::move(builder.result);
}

Value from_json(const nlohmann::ordered_json& j) { return from_nlohmann(j, 0); }
Value from_json(const nlohmann::json& j) { return from_nlohmann(j, 0); }

}  // namespace zoo::jinja
