// The arithmetic, concatenation and repetition operators with Python's rules: int stays int
// (overflow is an error, not a wrap), / is true division, // and % floor, + joins strings and
// lists, * repeats them; a str added to Markup is escaped.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ast.hpp"

namespace zoo::jinja::detail {

namespace {

bool is_int(const Value& v) { return v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool; }
std::int64_t as_int(const Value& v) { return v.kind == Value::Kind::Bool ? v.boolean : v.integer; }
double as_double(const Value& v) { return v.kind == Value::Kind::Float ? v.real : static_cast<double>(as_int(v)); }
bool is_num(const Value& v) { return is_int(v) || v.kind == Value::Kind::Float; }

// An integer result: an Int when it fits 64 bits, else its digits (Python's ints have no bound;
// arithmetic on such a BigInt is then refused).
Value integer(__int128 v) {
  if (v >= INT64_MIN && v <= INT64_MAX) return Value(static_cast<std::int64_t>(v));
  const bool neg = v < 0;
  unsigned __int128 u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string digits;
  while (u) {
    digits += static_cast<char>('0' + static_cast<int>(u % 10));
    u /= 10;
  }
  if (neg) digits += '-';
  std::reverse(digits.begin(), digits.end());
  Value big;
  big.kind = Value::Kind::BigInt;
  big.text = std::move(digits);
  return big;
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    const std::string x = to_str(a), y = to_str(b);
    check_length(x.size() + y.size());
    charge_bytes(x.size() + y.size());
    std::string s;
    s.reserve(x.size() + y.size());
    s += x;
    s += y;
    return Value(std::move(s));
  }
  if (a.is_undefined()) failure(a.text);
  if (b.is_undefined()) failure(b.text);
  if (a.kind == Value::Kind::BigInt || b.kind == Value::Kind::BigInt)
    failure(fmt::format("{}: arithmetic on an integer past 64 bits is not supported", op));
  const auto unsupported = [&]() -> Value {
    failure(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, detail::kind_name(a),
                        detail::kind_name(b)));
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_length(a.text.size() + b.text.size());
      charge_bytes(a.text.size() + b.text.size());
      if (a.safe == b.safe) {
        Value r(a.text + b.text);
        r.safe = a.safe;
        return r;
      }
      // Markup + str escapes the str (markupsafe's __add__ and __radd__).
      const auto escaped = [](const Value& v) { return v.safe ? v : detail::apply_filter("escape", v, {}); };
      Value r(escaped(a).text + escaped(b).text);
      r.safe = true;
      return r;
    }
    if (a.kind == b.kind && a.is_sequence()) {
      for (const auto* l : {a.list.get(), b.list.get()})
        for (const auto& item : *l) charge_bytes(value_bytes(item));
      List items;
      items.reserve(a.list->size() + b.list->size());
      items.insert(items.end(), a.list->begin(), a.list->end());
      items.insert(items.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(items), a.kind == Value::Kind::Tuple);
    }
  }
  if (op == "*") {
    const bool seq_a = a.is_string() || a.is_sequence(), seq_b = b.is_string() || b.is_sequence();
    if ((seq_a && is_int(b)) || (seq_b && is_int(a))) {
      const Value& s = seq_a ? a : b;
      const std::int64_t n = std::max<std::int64_t>(0, as_int(seq_a ? b : a));
      const std::size_t unit = s.is_string() ? s.text.size() : s.list->size();
      if (unit && static_cast<std::uint64_t>(n) > string_cap() / unit)
        failure("a repetition longer than the output cap");
      const auto times = static_cast<std::size_t>(n);
      if (s.is_string()) {
        charge_bytes(unit * times);
        std::string out;
        out.reserve(unit * times);
        for (std::int64_t k = 0; k < n; ++k) out += s.text;
        return Value(std::move(out));
      }
      std::uint64_t one = 0;
      for (const auto& item : *s.list) one += value_bytes(item);
      charge_bytes(one * times);
      List items;
      items.reserve(unit * times);
      for (std::int64_t k = 0; k < n; ++k) items.insert(items.end(), s.list->begin(), s.list->end());
      return Value::make_list(std::move(items), s.kind == Value::Kind::Tuple);
    }
  }
  if (op == "%" && a.is_string()) failure("printf-style string formatting (%) is not supported");
  if (!is_num(a) || !is_num(b)) return unsupported();
  if (is_int(a) && is_int(b) && op != "/") {
    const std::int64_t x = as_int(a), y = as_int(b);
    if (op == "+") return integer(static_cast<__int128>(x) + y);
    if (op == "-") return integer(static_cast<__int128>(x) - y);
    if (op == "*") return integer(static_cast<__int128>(x) * y);
    if (op == "//" || op == "%") {
      if (y == 0) failure("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) failure("integer overflow");
      std::int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value(op == "//" ? q : m);
    }
    if (op == "**" && y >= 0) {
      if (x == 0 || x == 1) return Value(y == 0 ? std::int64_t{1} : x);
      if (x == -1) return Value(std::int64_t{y % 2 ? -1 : 1});
      __int128 p = 1;
      for (std::int64_t k = 0; k < y; ++k) {
        if (__builtin_mul_overflow(p, static_cast<__int128>(x), &p)) failure("an integer of more than 38 digits from **");
        charge_steps(1);
      }
      return integer(p);
    }
  }
  const double x = as_double(a), y = as_double(b);
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "/") {
    if (y == 0) failure("division by zero");
    return Value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) failure("float divmod()");
    const double m = std::fmod(x, y);
    const double mod = (m != 0 && ((m < 0) != (y < 0))) ? m + y : m;
    return Value(op == "%" ? mod : std::floor(x / y));
  }
  if (op == "**") return Value(std::pow(x, y));
  return unsupported();
}

}  // namespace zoo::jinja::detail
