// jinja2's built-in filters and tests as chat templates use them, with transformers' `tojson`
// (json.dumps with ensure_ascii=False, not jinja2's HTML-safe one).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <unordered_set>

#include "ast.hpp"

namespace zoo::jinja::detail {

namespace {

using K = Value::Kind;

Value generator(List items) {
  Value v = Value::make_list(std::move(items));
  v.kind = K::Generator;
  return v;
}

Value call_method(const Value& obj, const std::string& name, CallArgs args = {}) {
  const Value m = get_attr(obj, name);
  if (m.kind != K::Function) failure(fmt::format("'{}' has no method {}", kind_name(obj), name));
  return (*m.function)(args);
}

bool arg_bool(const CallArgs& a, std::string_view name, std::size_t index, bool def) {
  const auto v = a.get(name, index);
  return v ? truthy(*v) : def;
}

// An attribute path as jinja2's make_attrgetter reads it: "a.b", with digit parts as indexes.
Value attribute(const Value& item, const std::string& path) {
  Value v = item;
  std::size_t at = 0;
  while (true) {
    const std::size_t dot = path.find('.', at);
    const std::string part = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, digits ? Value(std::int64_t{std::strtoll(part.c_str(), nullptr, 10)}) : Value(part));
    if (dot == std::string::npos) return v;
    at = dot + 1;
  }
}

std::string attribute_arg(const CallArgs& a, std::size_t index) {
  const auto v = a.get("attribute", index);
  if (!v || !v->is_string()) failure("the attribute argument must be a string");
  return v->text;
}

// select/reject/selectattr/rejectattr: the test named by the first argument (truthiness when none).
Value select(const Value& seq, const CallArgs& a, bool by_attribute, bool keep) {
  std::size_t next = 0;
  std::string attr;
  if (by_attribute) attr = attribute_arg(a, next++);
  std::optional<std::string> test;
  if (next < a.positional.size()) {
    if (!a.positional[next].is_string()) failure("the test name must be a string");
    test = a.positional[next++].text;
  }
  CallArgs test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(std::min(next, a.positional.size())),
                              a.positional.end());
  List out;
  if (!truthy(seq)) return generator({});  // jinja2 iterates only a truthy sequence (none is empty)
  for (const auto& item : iterate(seq)) {
    charge_steps(1);
    const Value v = by_attribute ? attribute(item, attr) : item;
    const bool pass = test ? apply_test(*test, v, test_args) : truthy(v);
    if (pass == keep) out.push_back(item);
  }
  return generator(std::move(out));
}

std::string indent(std::string s, const CallArgs& a) {
  const auto w = a.get("width", 0);
  const std::int64_t width = w && !w->is_string() ? std::max<std::int64_t>(0, w->integer) : 4;
  check_length(static_cast<std::uint64_t>(width));
  std::string pad = w && w->is_string() ? w->text : std::string(static_cast<std::size_t>(width), ' ');
  const bool first = arg_bool(a, "first", 1, false), blank = arg_bool(a, "blank", 2, false);
  s += "\n";  // jinja2 adds one so that splitlines() sees the last line
  std::vector<std::string> lines;
  std::size_t at = 0;
  while (at < s.size()) {
    std::size_t e = s.find('\n', at);
    if (e == std::string::npos) e = s.size();
    lines.push_back(s.substr(at, e - at));
    at = e + 1;
  }
  // Every line but the first grows by the pad: the length is known before anything is built.
  std::size_t size = s.size() - 1 + (first ? pad.size() : 0);
  for (std::size_t k = 1; k < lines.size(); ++k)
    if (blank || !lines[k].empty()) size += pad.size();
  check_length(size);
  charge_bytes(size);
  std::string rv;
  rv.reserve(size);
  if (first) rv += pad;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (k) {
      rv += '\n';
      if (blank || !lines[k].empty()) rv += pad;
    }
    rv += lines[k];
  }
  return rv;
}

Value to_int(const Value& v, const CallArgs& a) {
  if (v.is_undefined()) failure(v.text);  // int(Undefined) raises in jinja2
  const Value def = a.get("default", 0).value_or(Value(std::int64_t{0}));
  switch (v.kind) {
    case K::Int: return v;
    case K::Bool: return Value(std::int64_t{v.boolean});
    case K::Float:
      if (!std::isfinite(v.real) || std::abs(v.real) > 9.2e18) return def;
      return Value(static_cast<std::int64_t>(v.real));
    case K::String: {
      // int(s), else int(float(s)): surrounding whitespace allowed, no hex (base 10).
      std::string_view s = v.text;
      while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
      while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
      if (!s.empty() && s.front() == '+') s.remove_prefix(1);
      std::int64_t i = 0;
      if (auto r = std::from_chars(s.data(), s.data() + s.size(), i); r.ec == std::errc() && r.ptr == s.data() + s.size())
        return Value(i);
      double d = 0;
      if (auto r = std::from_chars(s.data(), s.data() + s.size(), d); r.ec == std::errc() && r.ptr == s.data() + s.size() &&
                                                                       std::isfinite(d) && std::abs(d) < 9.2e18)
        return Value(static_cast<std::int64_t>(d));
      return def;
    }
    default: return def;
  }
}

Value sort(const Value& seq, const CallArgs& a) {
  const bool reverse = arg_bool(a, "reverse", 0, false), case_sensitive = arg_bool(a, "case_sensitive", 1, false);
  const auto attr = a.get("attribute", 2);
  const std::vector<Value> items = iterate(seq);
  // The keys once each, then one step a comparison: n log n steps, not n log n key copies.
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const auto& v : items) {
    Value k = attr && attr->is_string() ? attribute(v, attr->text) : v;
    if (!case_sensitive && k.is_string())
      for (auto& c : k.text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    charge_bytes(value_bytes(k));
    keys.push_back(std::move(k));
  }
  std::vector<std::size_t> order(items.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    charge_steps(1);
    return reverse ? less(keys[y], keys[x]) : less(keys[x], keys[y]);
  });
  List out;
  out.reserve(items.size());
  for (const std::size_t k : order) out.push_back(items[k]);
  return Value::make_list(std::move(out));
}

// A text equal for the values that Python's hash and == make equal (1, 1.0 and True; a string
// lower-cased unless case_sensitive), for jinja2's set of the items unique has seen.
void unique_key(std::string& out, const Value& v, bool fold) {
  charge_steps(1);
  switch (v.kind) {
    case K::Undefined:
      out += 'u';
      return;
    case K::None:
      out += 'n';
      return;
    case K::Bool:
    case K::Int:
      out += 'i' + std::to_string(v.kind == K::Bool ? v.boolean : v.integer) + ';';
      return;
    case K::BigInt:
      out += 'i' + v.text + ';';
      return;
    case K::Float:
      if (std::isfinite(v.real) && v.real == std::floor(v.real))
        out += v.real == 0 ? std::string("i0;") : fmt::format("i{:.0f};", v.real);
      else
        out += 'f' + float_repr(v.real) + ';';
      return;
    case K::String: {
      std::string text = v.text;
      if (fold)
        for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out += fmt::format("s{}:", text.size());
      out += text;
      return;
    }
    case K::Tuple:
      out += fmt::format("t{}(", v.list->size());
      for (const auto& item : *v.list) unique_key(out, item, false);
      out += ')';
      return;
    case K::List:
    case K::Dict:
      failure(fmt::format("unhashable type: '{}'", kind_name(v)));
    default:  // namespaces, generators and functions hash by identity
      out += fmt::format("p{};",
                         static_cast<const void*>(v.list   ? static_cast<const void*>(v.list.get())
                                                  : v.dict ? static_cast<const void*>(v.dict.get())
                                                           : static_cast<const void*>(v.function.get())));
  }
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, const CallArgs& a) {
  if (name == "tojson") {
    const auto indent_arg = a.get("indent", 1);
    std::optional<int> indent;
    if (indent_arg && !indent_arg->is_none()) indent = static_cast<int>(indent_arg->integer);
    JsonOptions options;
    options.ensure_ascii = arg_bool(a, "ensure_ascii", 0, false);
    options.indent = indent;
    options.sort_keys = arg_bool(a, "sort_keys", 3, false);
    if (const auto sep = a.get("separators", 2); sep && !sep->is_none()) {
      if (!sep->is_sequence() || sep->list->size() != 2 || !(*sep->list)[0].is_string() || !(*sep->list)[1].is_string())
        failure("tojson: separators must be a pair of strings");
      options.separators = std::pair{(*sep->list)[0].text, (*sep->list)[1].text};
    }
    try {
      return Value(to_json(v, options));
    } catch (const InputError& e) {
      failure(e.what());
    }
  }
  if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
    if (name == "safe" || (v.is_string() && v.safe && name != "forceescape")) {
      Value s(to_str(v));
      s.safe = true;
      return s;
    }
    std::string out;
    for (const char c : to_str(v)) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    Value escaped(std::move(out));
    escaped.safe = true;
    return escaped;
  }
  if (name == "default" || name == "d") {
    const Value def = a.get("default_value", 0).value_or(Value(std::string()));
    const bool boolean = arg_bool(a, "boolean", 1, false);
    if (v.is_undefined() || (boolean && !truthy(v))) return def;
    return v;
  }
  if (name == "length" || name == "count") return Value(length(v));
  if (name == "string") return Value(to_str(v));
  if (name == "list") return Value::make_list(iterate(v));
  if (name == "trim") {
    CallArgs m;
    if (auto c = a.get("chars", 0)) m.positional.push_back(*c);
    return call_method(Value(to_str(v)), "strip", m);
  }
  if (name == "upper" || name == "lower" || name == "capitalize") return call_method(Value(to_str(v)), name);
  if (name == "title") {
    // jinja2's title: words split at whitespace, dashes and opening brackets, each written as its
    // first letter upper-cased and the rest lower-cased.
    const std::u32string cps = to_code_points(to_str(v));
    std::string out;
    std::u32string word;
    const auto flush = [&] {
      if (word.empty()) return;
      out += call_method(Value(to_utf8(word.substr(0, 1))), "upper").text;
      out += call_method(Value(to_utf8(word.substr(1))), "lower").text;
      word.clear();
    };
    for (const char32_t c : cps) {
      const bool sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '-' ||
                       c == '(' || c == '{' || c == '[' || c == '<';
      if (sep) {
        flush();
        out += to_utf8(std::u32string(1, c));
      } else {
        word += c;
      }
    }
    flush();
    return Value(std::move(out));
  }
  if (name == "replace") {
    CallArgs m;
    for (const char* k : {"old", "new", "count"})
      if (auto x = a.get(k, m.positional.size())) m.positional.push_back(*x);
    return call_method(Value(to_str(v)), "replace", m);
  }
  if (name == "items") {
    if (v.is_undefined()) return generator({});
    if (!v.is_mapping()) failure(fmt::format("Can only get item pairs from a mapping, not {}", kind_name(v)));
    List out;
    for (const auto& [k, item] : v.dict->items) out.push_back(Value::make_list({k, item}, true));
    return generator(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_mapping()) failure("dictsort expects a mapping");
    List out;
    for (const auto& [k, item] : v.dict->items) out.push_back(Value::make_list({k, item}, true));
    const auto folded = [](Value k) {
      if (k.is_string())
        for (auto& c : k.text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return k;
    };
    std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
      charge_steps(1);
      return less(folded((*x.list)[0]), folded((*y.list)[0]));
    });
    return Value::make_list(std::move(out));
  }
  if (name == "join") {
    const auto sep = a.get("d", 0);
    const auto attr = a.get("attribute", 1);
    const std::string between = sep ? to_str(*sep) : std::string();
    std::string out;
    bool first = true;
    for (const auto& item : iterate(v)) {
      const std::string text = to_str(attr && attr->is_string() ? attribute(item, attr->text) : item);
      const std::size_t add = (first ? 0 : between.size()) + text.size();
      check_length(out.size() + add);
      charge_bytes(add);
      if (!first) out += between;
      first = false;
      out += text;
    }
    return Value(std::move(out));
  }
  if (name == "first") {
    if (v.list)
      return v.list->empty() ? Value::undefined("No first item, sequence was empty.") : v.list->front();
    const auto items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  }
  if (name == "last") {
    if (v.kind == K::Generator) failure("'generator' object is not reversible");
    if (v.list)
      return v.list->empty() ? Value::undefined("No last item, sequence was empty.") : v.list->back();
    const auto items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string cps = to_code_points(v.text);
      std::reverse(cps.begin(), cps.end());
      return Value(to_utf8(cps));
    }
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "int") return to_int(v, a);
  if (name == "float") {
    if (v.is_undefined()) failure(v.text);
    if (v.kind == K::Float) return v;
    if (v.kind == K::Int || v.kind == K::Bool) return Value(static_cast<double>(v.kind == K::Bool ? v.boolean : v.integer));
    if (v.is_string()) {
      char* end = nullptr;
      const double d = std::strtod(v.text.c_str(), &end);
      if (end != v.text.c_str() && *end == '\0') return Value(d);
    }
    return a.get("default", 0).value_or(Value(0.0));
  }
  if (name == "abs") {
    if (v.kind == K::Int) return Value(v.integer < 0 ? -v.integer : v.integer);
    if (v.kind == K::Float) return Value(std::fabs(v.real));
    failure(fmt::format("bad operand type for abs(): '{}'", kind_name(v)));
  }
  if (name == "round") {
    const auto p = a.get("precision", 0);
    const auto method = a.get("method", 1);
    const double scale = std::pow(10.0, p ? static_cast<double>(p->integer) : 0.0);
    const double x = (v.kind == K::Float ? v.real : static_cast<double>(v.integer)) * scale;
    const std::string m = method && method->is_string() ? method->text : "common";
    // round(int, n) is the int itself in Python; floor and ceil go through floats.
    if (m == "common" && (v.kind == K::Int || v.kind == K::Bool) && (!p || p->integer >= 0))
      return Value(std::int64_t{v.kind == K::Bool ? v.boolean : v.integer});
    // Python's round(): halves to even.
    const double r = m == "floor" ? std::floor(x) : m == "ceil" ? std::ceil(x) : std::nearbyint(x);
    return Value(r / scale);
  }
  if (name == "select" || name == "reject") return select(v, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select(v, a, true, name == "selectattr");
  if (name == "map") {
    List out;
    if (!truthy(v)) return generator({});  // as select: a falsy sequence maps to nothing
    const auto attr = a.get("attribute", 99);
    if (attr) {
      const auto def = a.get("default", 99);
      for (const auto& item : iterate(v)) {
        charge_steps(1);
        Value x = attribute(item, attr->text);
        out.push_back(x.is_undefined() && def ? *def : x);
      }
      return generator(std::move(out));
    }
    if (a.positional.empty() || !a.positional[0].is_string()) failure("map() needs a filter name or attribute=");
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keyword = a.keyword;
    for (const auto& item : iterate(v)) {
      charge_steps(1);
      Value x = apply_filter(a.positional[0].text, item, rest);
      charge_bytes(value_bytes(x));
      out.push_back(std::move(x));
    }
    return generator(std::move(out));
  }
  if (name == "unique") {
    // jinja2 keeps a set of the keys seen: linear, where comparing with every kept item was quadratic.
    List out;
    const bool case_sensitive = arg_bool(a, "case_sensitive", 0, false);
    const auto attr = a.get("attribute", 1);
    std::unordered_set<std::string> seen;
    for (const auto& item : iterate(v)) {
      std::string key;
      unique_key(key, attr && attr->is_string() ? attribute(item, attr->text) : item, !case_sensitive);
      if (seen.insert(key).second) {
        charge_bytes(key.size() + 64);
        out.push_back(item);
      }
    }
    return generator(std::move(out));
  }
  if (name == "sort") return sort(v, a);
  if (name == "sum") {
    const auto attr = a.get("attribute", 0);
    Value total = a.get("start", 1).value_or(Value(std::int64_t{0}));
    for (const auto& item : iterate(v)) {
      charge_steps(1);
      const Value x = attr && attr->is_string() ? attribute(item, attr->text) : item;
      if (total.kind == K::Int && x.kind == K::Int) {
        if (__builtin_add_overflow(total.integer, x.integer, &total.integer)) failure("integer overflow in sum");
      } else if ((total.kind == K::Int || total.kind == K::Float) && (x.kind == K::Int || x.kind == K::Float)) {
        total = Value((total.kind == K::Float ? total.real : static_cast<double>(total.integer)) +
                      (x.kind == K::Float ? x.real : static_cast<double>(x.integer)));
      } else {
        failure(fmt::format("unsupported operand type(s) for +: '{}' and '{}'", kind_name(total), kind_name(x)));
      }
    }
    return total;
  }
  if (name == "min" || name == "max") {
    const auto items = iterate(v);
    if (items.empty()) return Value::undefined(fmt::format("No aggregated item, sequence was empty."));
    const auto attr = a.get("attribute", 1);
    const bool case_sensitive = arg_bool(a, "case_sensitive", 0, false);
    const auto key = [&](const Value& x) {
      Value k = attr && attr->is_string() ? attribute(x, attr->text) : x;
      if (!case_sensitive && k.is_string()) k = call_method(k, "lower");
      return k;
    };
    Value best = items[0];
    for (const auto& x : items) {
      charge_steps(1);
      if (name == "min" ? less(key(x), key(best)) : less(key(best), key(x))) best = x;
    }
    return best;
  }
  if (name == "indent") return Value(indent(to_str(v), a));
  if (name == "wordcount") return Value(static_cast<std::int64_t>(call_method(Value(to_str(v)), "split").list->size()));
  if (name == "center") {
    const std::int64_t width = a.get("width", 0).value_or(Value(std::int64_t{80})).integer;
    const std::string s = to_str(v);
    const auto n = static_cast<std::int64_t>(to_code_points(s).size());
    if (width <= n) return Value(s);
    check_length(s.size() + static_cast<std::uint64_t>(width - n));
    const std::int64_t total = width - n, left = total / 2 + (total & width & 1);
    return Value(std::string(static_cast<std::size_t>(left), ' ') + s + std::string(static_cast<std::size_t>(total - left), ' '));
  }
  failure(fmt::format("no filter named '{}'", name));
}

bool has_test(const std::string& name) {
  static constexpr std::string_view names[] = {
      "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "mapping", "iterable",
      "sequence", "callable", "true", "false", "equalto", "eq", "==", "ne", "!=", "sameas", "in", "even", "odd",
      "divisibleby", "lower", "upper", "gt", "greaterthan", "ge", "lt", "lessthan", "le", "escaped"};
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& a) {
  const auto arg = [&]() -> const Value& {
    if (a.positional.empty()) failure(fmt::format("the test '{}' needs an argument", name));
    return a.positional[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.kind == K::Int || v.kind == K::Float || v.kind == K::BigInt || v.kind == K::Bool;
  if (name == "integer") return v.kind == K::Int || v.kind == K::BigInt;
  if (name == "float") return v.kind == K::Float;
  if (name == "boolean") return v.kind == K::Bool;
  if (name == "mapping") return v.kind == K::Dict;
  if (name == "iterable") return v.is_sequence() || v.is_string() || v.kind == K::Dict || v.is_undefined();
  if (name == "sequence") return v.is_sequence() || v.is_string() || v.kind == K::Dict || v.is_undefined();
  if (name == "callable") return v.kind == K::Function;
  if (name == "true") return v.kind == K::Bool && v.boolean;
  if (name == "false") return v.kind == K::Bool && !v.boolean;
  if (name == "equalto" || name == "eq" || name == "==") return equal(v, arg());
  if (name == "ne" || name == "!=") return !equal(v, arg());
  if (name == "sameas") {
    const Value& o = arg();
    if (v.kind != o.kind) return false;
    if (v.kind == K::None || v.kind == K::Bool) return v.kind == K::None || v.boolean == o.boolean;
    if (v.list || v.dict) return v.list == o.list && v.dict == o.dict;
    return false;
  }
  if (name == "in") return contains(arg(), v);
  if (name == "even" || name == "odd") {
    if (v.kind != K::Int) failure("even/odd needs an integer");
    return (v.integer % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    if (v.kind != K::Int || arg().kind != K::Int || arg().integer == 0) failure("divisibleby needs non-zero integers");
    return v.integer % arg().integer == 0;
  }
  if (name == "lower" || name == "upper") {
    const std::string s = to_str(v);
    return truthy(call_method(Value(s), name == "lower" ? "islower" : "isupper"));
  }
  if (name == "gt" || name == "greaterthan") return less(arg(), v);
  if (name == "ge") return !less(v, arg());
  if (name == "lt" || name == "lessthan") return less(v, arg());
  if (name == "le") return !less(arg(), v);
  if (name == "escaped") return false;
  failure(fmt::format("no test named '{}'", name));
}

}  // namespace zoo::jinja::detail
