// Values as Python sees them: str(), repr(), json.dumps(), truthiness and == (JSON input: json.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "ast.hpp"

namespace zoo::jinja {

namespace {
int nested_depth(int child) {
  if (child + 1 > kMaxValueDepth)
    detail::failure(fmt::format("a list or dict nested more than {} levels deep", kMaxValueDepth));
  return child + 1;
}
}  // namespace

Value Value::make_list(List items, bool tuple) {
  Value v;
  int deepest = 0;
  std::uint64_t bytes = 0;
  for (const auto& item : items) {
    deepest = std::max(deepest, item.depth);
    bytes += detail::value_bytes(item);
  }
  // Builders that could outgrow the budget before they get here charge as they build; this counts
  // every list a render makes.
  detail::charge_bytes(bytes);
  v.depth = nested_depth(deepest);
  v.kind = tuple ? Kind::Tuple : Kind::List;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::make_dict(Dict items) {
  Value v;
  int deepest = 0;
  for (const auto& [k, item] : items.items) deepest = std::max(deepest, item.depth);
  v.depth = nested_depth(deepest);
  v.kind = Kind::Dict;
  v.dict = std::make_shared<Dict>(std::move(items));
  return v;
}
Value Value::make_dict() { return make_dict(Dict{}); }
Value Value::make_function(Function f) {
  Value v;
  v.kind = Kind::Function;
  v.function = std::make_shared<Function>(std::move(f));
  return v;
}

// Linear, as real dicts are a handful of keys: a big one's lookups are charged as work.
const Value* Dict::find(std::string_view key) const {
  detail::charge_steps(items.size() / 16);
  for (const auto& [k, v] : items)
    if (k.kind == Value::Kind::String && k.text == key) return &v;
  return nullptr;
}
Value* Dict::find(std::string_view key) {
  detail::charge_steps(items.size() / 16);
  for (auto& [k, v] : items)
    if (k.kind == Value::Kind::String && k.text == key) return &v;
  return nullptr;
}
const Value* Dict::find_key(const Value& key) const {
  if (key.kind == Value::Kind::String) return find(std::string_view(key.text));
  detail::charge_steps(items.size());
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}
void Dict::set(std::string key, Value value) {
  if (auto* v = find(std::string_view(key)))
    *v = std::move(value);
  else
    items.emplace_back(Value(std::move(key)), std::move(value));
}
void Dict::set(Value key, Value value) {
  if (const Value* v = find_key(key))
    *const_cast<Value*>(v) = std::move(value);
  else
    items.emplace_back(std::move(key), std::move(value));
}

std::optional<Value> CallArgs::get(std::string_view name, std::size_t index) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return v;
  if (index < positional.size()) return positional[index];
  return std::nullopt;
}

namespace detail {

std::string kind_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int:
    case Value::Kind::BigInt: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return "list";
    case Value::Kind::Tuple: return "tuple";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Function: return "function";
    case Value::Kind::Generator: return "generator";
  }
  return "object";
}

std::size_t code_point_size(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  return i + n > s.size() ? 1 : n;
}

std::size_t code_point_count(std::string_view s) {
  charge_scan(s.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); i += code_point_size(s, i)) ++n;
  return n;
}

std::u32string to_code_points(std::string_view s) {
  charge_scan(s.size());
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + static_cast<std::size_t>(n) > s.size()) n = 1;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out += cp;
    i += static_cast<std::size_t>(n);
  }
  return out;
}

std::string to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t cp : text) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

// Python's repr(float): the shortest digits that read back the same, positional for decimal
// exponents -4 <= e < 16 (with ".0" when integral), else scientific as "1e+16", "1.5e-05".
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string s(buf, r.ptr);  // [-]D[.DDD]e[+-]XX
  const auto epos = s.find('e');
  const bool neg = s[0] == '-';
  std::string digits;
  for (std::size_t k = neg ? 1 : 0; k < epos; ++k)
    if (s[k] != '.') digits += s[k];
  const int exp = std::stoi(s.substr(epos + 1));
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
    return out;
  }
  if (exp < 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-exp - 1), '0');
    return out + digits;
  }
  const auto int_len = static_cast<std::size_t>(exp) + 1;
  if (digits.size() <= int_len) {
    out += digits;
    out.append(int_len - digits.size(), '0');
    return out + ".0";
  }
  out.append(digits, 0, int_len);
  out += '.';
  out.append(digits, int_len);
  return out;
}

}  // namespace detail

namespace {

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char32_t cp : detail::to_code_points(s)) {
    if (cp == '\\') out += "\\\\";
    else if (cp == static_cast<char32_t>(quote)) out += std::string("\\") + quote;
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    else out += detail::to_utf8(std::u32string(1, cp));
  }
  return out + quote;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (const char32_t cp : detail::to_code_points(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp > 0x7e)) {
          if (cp >= 0x10000) {
            const auto v = cp - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          } else {
            out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
          }
        } else {
          out += detail::to_utf8(std::u32string(1, cp));
        }
    }
  }
  out += '"';
}

struct JsonStyle {
  bool ascii;
  std::optional<int> indent;
  bool sort;
  std::string item_sep, key_sep;
};

// A list may hold one list many times over: its text is capped as it grows, not after.
void json_value(std::string& out, const Value& v, const JsonStyle& style, int level) {
  if (level > kMaxValueDepth) throw InputError("tojson: the value is nested too deeply");
  detail::check_length(out.size());
  detail::charge_steps(1);
  const bool ascii = style.ascii;
  const auto newline = [&](int l) {
    if (!style.indent) return;
    const std::size_t pad =
        static_cast<std::size_t>(std::max(0, *style.indent)) * static_cast<std::size_t>(l);
    detail::check_length(out.size() + 1 + pad);
    out += '\n';
    out.append(pad, ' ');
  };
  const std::string& item_sep = style.item_sep;
  switch (v.kind) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.boolean ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.integer); return;
    case Value::Kind::BigInt: out += v.text; return;
    case Value::Kind::Float:
      out += std::isnan(v.real) ? "NaN" : std::isinf(v.real) ? (v.real < 0 ? "-Infinity" : "Infinity")
                                                             : detail::float_repr(v.real);
      return;
    case Value::Kind::String: json_string(out, v.text, ascii); return;
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        json_value(out, (*v.list)[k], style, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      // json.dumps writes non-string keys as their JSON text, as strings.
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, item] : v.dict->items)
        items.emplace_back(k.is_string() ? k.text : k.kind == Value::Kind::Float ? detail::float_repr(k.real) : to_json(k), &item);
      if (style.sort) std::stable_sort(items.begin(), items.end(), [](auto& a, auto& b) { return a.first < b.first; });
      out += '{';
      for (std::size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        json_string(out, items[k].first, ascii);
        out += style.key_sep;
        json_value(out, *items[k].second, style, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    default:
      throw InputError(fmt::format("Object of type {} is not JSON serializable", detail::kind_name(v)));
  }
}

void repr_into(std::string& out, const Value& v, int level) {
  if (level > detail::kMaxNesting * 4) throw InputError("the value is nested too deeply to print");
  detail::check_length(out.size());
  detail::charge_steps(1);
  switch (v.kind) {
    case Value::Kind::String: out += string_repr(v.text); return;
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      const bool tuple = v.kind == Value::Kind::Tuple;
      out += tuple ? '(' : '[';
      for (std::size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        repr_into(out, (*v.list)[k], level + 1);
      }
      if (tuple && v.list->size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      if (v.kind == Value::Kind::Namespace) out += "<Namespace ";
      out += '{';
      bool first = true;
      for (const auto& [k, item] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, level + 1);
        out += ": ";
        repr_into(out, item, level + 1);
      }
      out += '}';
      if (v.kind == Value::Kind::Namespace) out += '>';
      return;
    }
    default: out += to_str(v);
  }
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.boolean ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.integer);
    case Value::Kind::BigInt: return v.text;
    case Value::Kind::Float: return detail::float_repr(v.real);
    case Value::Kind::String: return v.text;
    case Value::Kind::Function: return "<function>";
    case Value::Kind::Generator: return "<generator object>";
    default: {
      std::string out;
      repr_into(out, v, 0);
      return out;
    }
  }
}

std::string to_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string to_json(const Value& v, const JsonOptions& options) {
  JsonStyle style{options.ensure_ascii, options.indent, options.sort_keys, options.indent ? "," : ", ", ": "};
  if (options.separators) {
    style.item_sep = options.separators->first;
    style.key_sep = options.separators->second;
  }
  std::string out;
  json_value(out, v, style, 0);
  return out;
}

std::string type_name(const Value& v) { return detail::kind_name(v); }

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.boolean;
    case Value::Kind::Int: return v.integer != 0;
    case Value::Kind::BigInt: return true;
    case Value::Kind::Float: return v.real != 0.0;
    case Value::Kind::String: return !v.text.empty();
    case Value::Kind::List:
    case Value::Kind::Tuple: return !v.list->empty();
    case Value::Kind::Dict: return !v.dict->items.empty();
    default: return true;
  }
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  const auto numeric = [](const Value& v) { return v.kind == K::Int || v.kind == K::Float || v.kind == K::Bool; };
  if (numeric(a) && numeric(b)) {
    if (a.kind != K::Float && b.kind != K::Float)
      return (a.kind == K::Bool ? a.boolean : a.integer) == (b.kind == K::Bool ? b.boolean : b.integer);
    const auto d = [](const Value& v) {
      return v.kind == K::Float ? v.real : static_cast<double>(v.kind == K::Bool ? v.boolean : v.integer);
    };
    return d(a) == d(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::Undefined:
    case K::None: return true;
    case K::String:
    case K::BigInt: return a.text == b.text;
    case K::List:
    case K::Tuple:
      if (a.list->size() != b.list->size()) return false;
      // Python compares the same list object as equal without a look at its items.
      if (a.list == b.list) return true;
      for (std::size_t k = 0; k < a.list->size(); ++k) {
        detail::charge_steps(1);
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case K::Dict:
    case K::Namespace:
      if (a.dict == b.dict) return true;
      if (a.kind == K::Namespace || a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        detail::charge_steps(1);
        const Value* other = b.dict->find_key(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    case K::Function: return a.function == b.function;
    case K::Generator: return a.list == b.list;
    default: return false;
  }
}

}  // namespace zoo::jinja
