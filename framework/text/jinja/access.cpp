// Attribute and item access, slicing, iteration, ordering and membership, with the methods of
// Python's str, dict and list that chat templates call (the immutable sandbox's set: nothing that
// modifies a value).
#include <fmt/format.h>

#include <algorithm>

#include "ast.hpp"

namespace zoo::jinja::detail {

namespace {

using K = Value::Kind;

std::optional<Value> dict_method(const Value& d, const std::string& name) {
  auto m = [](auto f) { return Value::make_function(std::move(f)); };
  if (name == "items")
    return m([d](CallArgs&) {
      List out;
      for (const auto& [k, v] : d.dict->items) out.push_back(Value::make_list({k, v}, true));
      return Value::make_list(std::move(out));
    });
  if (name == "keys" || name == "values")
    return m([d, keys = name == "keys"](CallArgs&) {
      List out;
      for (const auto& [k, v] : d.dict->items) out.push_back(keys ? k : v);
      return Value::make_list(std::move(out));
    });
  if (name == "get")
    return m([d](CallArgs& a) -> Value {
      if (a.positional.empty()) failure("get expected at least 1 argument");
      const Value* v = d.dict->find_key(a.positional[0]);
      if (v) return *v;
      return a.positional.size() > 1 ? a.positional[1] : Value::none();
    });
  return std::nullopt;
}

std::optional<Value> list_method(const Value& l, const std::string& name) {
  if (name == "index" || name == "count")
    return Value::make_function([l, name](CallArgs& a) -> Value {
      if (a.positional.empty()) failure(fmt::format("{}() takes one argument", name));
      std::int64_t n = 0;
      for (std::size_t k = 0; k < l.list->size(); ++k) {
        charge_steps(1);
        if (equal((*l.list)[k], a.positional[0])) {
          if (name == "index") return Value(static_cast<std::int64_t>(k));
          ++n;
        }
      }
      if (name == "index") failure("x not in list");
      return Value(n);
    });
  static constexpr std::string_view mutating[] = {"append", "extend", "insert", "pop", "remove", "clear",
                                                  "sort", "reverse", "update", "setdefault", "popitem"};
  for (auto m : mutating)
    if (name == m) failure(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, kind_name(l)));
  return std::nullopt;
}

std::string object_name(const Value& v) {
  return v.kind == K::None ? "None" : kind_name(v) + " object";
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) failure(obj.text);
  std::optional<Value> m;
  if (obj.kind == K::Dict) {
    static constexpr std::string_view mutating[] = {"pop", "update", "setdefault", "popitem", "clear"};
    for (auto mu : mutating)
      if (name == mu) failure(fmt::format("access to attribute '{}' of 'dict' object is unsafe.", name));
    m = dict_method(obj, name);
    if (!m)
      if (const Value* v = obj.dict->find(name)) return *v;
  } else if (obj.kind == K::Namespace) {
    if (const Value* v = obj.dict->find(name)) return *v;
  } else if (obj.is_string()) {
    m = string_method(obj.text, name);
  } else if (obj.is_sequence()) {
    m = list_method(obj, name);
  }
  if (m) return *m;
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_name(obj), name));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) failure(obj.text);
  const bool int_key = key.kind == K::Int || key.kind == K::Bool;
  const std::int64_t index = key.kind == K::Bool ? key.boolean : key.integer;
  if (obj.is_mapping()) {
    if (const Value* v = obj.dict->find_key(key)) return *v;
  } else if (obj.is_sequence() && int_key) {
    const auto n = static_cast<std::int64_t>(obj.list->size());
    const std::int64_t k = index < 0 ? index + n : index;
    if (k >= 0 && k < n) return (*obj.list)[static_cast<std::size_t>(k)];
  } else if (obj.is_string() && int_key) {
    // Walked to, not decoded whole: s[i] in a loop is linear in i, not in the string.
    const std::string_view s = obj.text;
    const std::int64_t k = index < 0 ? index + static_cast<std::int64_t>(code_point_count(s)) : index;
    std::size_t at = 0;
    for (std::int64_t j = 0; j < k && at < s.size(); ++j) at += code_point_size(s, at);
    charge_scan(at);
    if (k >= 0 && at < s.size()) return Value(to_utf8(to_code_points(s.substr(at, code_point_size(s, at)))));
  }
  if (key.is_string()) {
    Value attr = get_attr(obj, key.text);
    if (!attr.is_undefined()) return attr;
  }
  // jinja2's wording: an attribute for a name, an element for anything else.
  if (key.is_string()) return Value::undefined(fmt::format("'{}' has no attribute {}", object_name(obj), to_repr(key)));
  return Value::undefined(fmt::format("{} has no element {}", object_name(obj), to_repr(key)));
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  if (obj.is_undefined()) failure(obj.text);
  const auto opt = [](const Value& v) -> std::optional<std::int64_t> {
    if (v.is_none()) return std::nullopt;
    if (v.kind != K::Int && v.kind != K::Bool) failure("slice indices must be integers or None");
    return v.kind == K::Bool ? v.boolean : v.integer;
  };
  const auto step = opt(step_v).value_or(1);
  if (step == 0) failure("slice step cannot be zero");
  std::u32string cps;
  std::int64_t n = 0;
  if (obj.is_string()) {
    cps = to_code_points(obj.text);
    n = static_cast<std::int64_t>(cps.size());
  } else if (obj.is_sequence()) {
    n = static_cast<std::int64_t>(obj.list->size());
  } else {
    failure(fmt::format("'{}' object is not subscriptable", kind_name(obj)));
  }
  // Python's PySlice_AdjustIndices.
  const auto adjust = [&](std::optional<std::int64_t> v, std::int64_t def) {
    if (!v) return def;
    std::int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  const std::int64_t b = adjust(opt(start), step < 0 ? n - 1 : 0), e = adjust(opt(stop), step < 0 ? -1 : n);
  std::vector<std::size_t> picks;
  charge_steps(static_cast<std::uint64_t>(n));
  for (std::int64_t k = b; step > 0 ? k < e : k > e; k += step) picks.push_back(static_cast<std::size_t>(k));
  if (obj.is_string()) {
    std::u32string out;
    for (auto k : picks) out += cps[k];
    return Value(to_utf8(out));
  }
  List out;
  for (auto k : picks) out.push_back((*obj.list)[k]);
  return Value::make_list(std::move(out), obj.kind == K::Tuple);
}

// The copy is charged before it is made: a 16 MiB string is 16 million values.
std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case K::Undefined: return {};
    case K::List:
    case K::Tuple:
    case K::Generator: {
      std::uint64_t bytes = 0;
      for (const auto& item : *v.list) bytes += value_bytes(item);
      charge_bytes(bytes);
      return *v.list;
    }
    case K::Dict:
    case K::Namespace: {
      std::vector<Value> keys;
      for (const auto& [k, item] : v.dict->items) {
        charge_bytes(value_bytes(k));
        keys.push_back(k);
      }
      return keys;
    }
    case K::String: {
      const std::u32string cps = to_code_points(v.text);
      charge_bytes(cps.size() * (sizeof(Value) + 4));
      std::vector<Value> chars;
      chars.reserve(cps.size());
      for (const char32_t c : cps) chars.emplace_back(to_utf8(std::u32string(1, c)));
      return chars;
    }
    default: failure(fmt::format("'{}' object is not iterable", kind_name(v)));
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_undefined()) failure(a.text);
  if (b.is_undefined()) failure(b.text);
  const auto num = [](const Value& v) { return v.kind == K::Int || v.kind == K::Float || v.kind == K::Bool; };
  if (num(a) && num(b)) {
    if (a.kind != K::Float && b.kind != K::Float)
      return (a.kind == K::Bool ? a.boolean : a.integer) < (b.kind == K::Bool ? b.boolean : b.integer);
    const auto d = [](const Value& v) {
      return v.kind == K::Float ? v.real : static_cast<double>(v.kind == K::Bool ? v.boolean : v.integer);
    };
    return d(a) < d(b);
  }
  if (a.is_string() && b.is_string()) return a.text < b.text;
  if (a.kind == K::BigInt || b.kind == K::BigInt) failure("comparing an integer past 64 bits is not supported");
  if (a.is_sequence() && a.kind == b.kind) {
    const auto& x = *a.list;
    const auto& y = *b.list;
    for (std::size_t k = 0; k < std::min(x.size(), y.size()); ++k) {
      charge_steps(1);
      if (equal(x[k], y[k])) continue;
      return less(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  failure(fmt::format("'<' not supported between instances of '{}' and '{}'", kind_name(a), kind_name(b)));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case K::Undefined: return false;
    case K::String:
      if (!item.is_string())
        failure(fmt::format("'in <string>' requires string as left operand, not {}", kind_name(item)));
      return find_text(container.text, item.text) != std::string::npos;
    case K::List:
    case K::Tuple:
    case K::Generator:
      return std::any_of(container.list->begin(), container.list->end(), [&](const Value& v) {
        charge_steps(1);
        return equal(v, item);
      });
    case K::Dict:
      return container.dict->find_key(item) != nullptr;
    default: failure(fmt::format("argument of type '{}' is not iterable", kind_name(container)));
  }
}

std::int64_t length(const Value& v) {
  switch (v.kind) {
    case K::Undefined: return 0;
    case K::String:
      return static_cast<std::int64_t>(code_point_count(v.text));
    case K::List:
    case K::Tuple: return static_cast<std::int64_t>(v.list->size());
    case K::Dict:
    case K::Namespace: return static_cast<std::int64_t>(v.dict->items.size());
    default: failure(fmt::format("object of type '{}' has no len()", kind_name(v)));
  }
}

}  // namespace zoo::jinja::detail
