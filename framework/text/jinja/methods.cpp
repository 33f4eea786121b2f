// The methods of Python's str that chat templates call (startswith, split, strip, replace, ...),
// with Python's rules: Unicode whitespace and case (through utf8proc), code-point indexes.
#include <fmt/format.h>

#include <algorithm>

#include <utf8proc.h>

#include "ast.hpp"

namespace zoo::jinja::detail {

namespace {

using K = Value::Kind;

bool is_ws(char32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x85 || c == 0xa0 || c == 0x3000 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x1680 || c == 0x202f || c == 0x205f || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x1f; }

std::string arg_string(const CallArgs& a, std::string_view name, std::size_t index, const char* method) {
  const auto v = a.get(name, index);
  if (!v || !v->is_string())
    failure(fmt::format("{}() argument must be str, not {}", method, v ? kind_name(*v) : "nothing"));
  return v->text;
}

// strip/lstrip/rstrip: `chars` (None: whitespace) off either end.
std::string strip(const std::string& s, const std::optional<Value>& chars, bool left, bool right) {
  const std::u32string cps = to_code_points(s);
  std::u32string set;
  const bool ws = !chars || chars->is_none();
  if (!ws) {
    if (!chars->is_string()) failure("strip arg must be None or str");
    set = to_code_points(chars->text);
  }
  const auto strip_it = [&](char32_t c) { return ws ? is_ws(c) : set.find(c) != std::u32string::npos; };
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return to_utf8(std::u32string_view(cps).substr(b, e - b));
}

// Unicode case mapping through utf8proc (the tokenizer's Unicode library): its simple mappings, the
// ones Python applies but for the few one-to-many special cases (sharp s, below).
char32_t to_upper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t to_lower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
char32_t to_title(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }
// Python's "cased" characters: upper-, lower- and title-case letters.
bool is_cased(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
bool is_alpha(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}

// Python's upper() writes sharp s as "SS".
std::u32string upper_of(char32_t c) { return c == 0xdf ? std::u32string(U"SS") : std::u32string(1, to_upper(c)); }

std::string map_case(const std::string& s, bool upper) {
  std::u32string out;
  for (const char32_t c : to_code_points(s)) {
    if (upper) out += upper_of(c);
    else if (c == 0x130) out += U"i\u0307";  // Python's full lowercase of dotted capital I
    else out += to_lower(c);
  }
  return to_utf8(out);
}

Value split(const std::string& s, const CallArgs& a, bool from_right) {
  const auto sep = a.get("sep", 0);
  const auto max = a.get("maxsplit", 1);
  std::int64_t maxsplit = max && max->kind == K::Int ? max->integer : -1;
  List parts;
  if (!sep || sep->is_none()) {
    const std::u32string cps = to_code_points(s);
    std::vector<std::pair<std::size_t, std::size_t>> words;
    std::size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && is_ws(cps[i])) ++i;
      if (i >= cps.size()) break;
      std::size_t j = i;
      while (j < cps.size() && !is_ws(cps[j])) ++j;
      charge_bytes(sizeof(Value) + (j - i));
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && static_cast<std::size_t>(maxsplit) < words.size()) {
      if (from_right) {
        const std::size_t keep = words.size() - static_cast<std::size_t>(maxsplit);
        std::size_t end = words[keep - 1].second;
        parts.emplace_back(to_utf8(std::u32string_view(cps).substr(words[0].first, end - words[0].first)));
        for (std::size_t k = keep; k < words.size(); ++k)
          parts.emplace_back(to_utf8(std::u32string_view(cps).substr(words[k].first, words[k].second - words[k].first)));
        return Value::make_list(std::move(parts));
      }
      for (std::size_t k = 0; k < static_cast<std::size_t>(maxsplit); ++k)
        parts.emplace_back(to_utf8(std::u32string_view(cps).substr(words[k].first, words[k].second - words[k].first)));
      std::size_t rest = words[static_cast<std::size_t>(maxsplit)].first;
      // The remainder keeps its trailing whitespace, as Python's split(None, n) leaves it.
      parts.emplace_back(to_utf8(std::u32string_view(cps).substr(rest)));
      return Value::make_list(std::move(parts));
    }
    for (const auto& [b, e] : words) parts.emplace_back(to_utf8(std::u32string_view(cps).substr(b, e - b)));
    return Value::make_list(std::move(parts));
  }
  if (!sep->is_string()) failure("must be str or None");
  const std::string& d = sep->text;
  if (d.empty()) failure("empty separator");
  std::vector<std::string> all;
  std::size_t at = 0;
  while (true) {
    const std::size_t f = find_text(s, d, at);
    if (f == std::string::npos) break;
    charge_bytes(sizeof(Value) + (f - at));
    all.push_back(s.substr(at, f - at));
    at = f + d.size();
  }
  all.push_back(s.substr(at));
  if (maxsplit >= 0 && static_cast<std::size_t>(maxsplit) + 1 < all.size()) {
    const auto m = static_cast<std::size_t>(maxsplit);
    std::vector<std::string> merged;
    if (from_right) {
      std::string head = all[0];
      for (std::size_t k = 1; k < all.size() - m; ++k) head += d + all[k];
      merged.push_back(head);
      for (std::size_t k = all.size() - m; k < all.size(); ++k) merged.push_back(all[k]);
    } else {
      for (std::size_t k = 0; k < m; ++k) merged.push_back(all[k]);
      std::string tail = all[m];
      for (std::size_t k = m + 1; k < all.size(); ++k) tail += d + all[k];
      merged.push_back(tail);
    }
    all = std::move(merged);
  }
  for (auto& p : all) parts.emplace_back(std::move(p));
  return Value::make_list(std::move(parts));
}

bool affix(const std::string& s, const Value& what, bool prefix) {
  const auto one = [&](const Value& p) {
    if (!p.is_string()) failure("startswith/endswith takes a str or a tuple of str");
    if (p.text.size() > s.size()) return false;
    return prefix ? s.compare(0, p.text.size(), p.text) == 0 : s.compare(s.size() - p.text.size(), p.text.size(), p.text) == 0;
  };
  if (what.is_sequence()) return std::any_of(what.list->begin(), what.list->end(), one);
  return one(what);
}

std::string title(const std::string& s) {
  std::u32string cps = to_code_points(s);
  bool prev_cased = false;
  std::u32string out;
  for (const char32_t c : cps) {
    if (prev_cased) out += to_lower(c);
    else out += c == 0xdf ? std::u32string(U"Ss") : std::u32string(1, to_title(c));
    prev_cased = is_cased(c);
  }
  return to_utf8(out);
}

}  // namespace

std::optional<Value> string_method(const std::string& s, const std::string& name) {
  auto m = [](auto f) { return Value::make_function(std::move(f)); };
  if (name == "startswith" || name == "endswith")
    return m([s, prefix = name == "startswith"](CallArgs& a) -> Value {
      if (a.positional.empty()) failure("startswith/endswith takes one argument");
      return Value(affix(s, a.positional[0], prefix));
    });
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return m([s, name](CallArgs& a) -> Value {
      return Value(strip(s, a.get("chars", 0), name != "rstrip", name != "lstrip"));
    });
  if (name == "split" || name == "rsplit") return m([s, name](CallArgs& a) { return split(s, a, name == "rsplit"); });
  if (name == "upper" || name == "lower") return m([s, name](CallArgs&) { return Value(map_case(s, name == "upper")); });
  if (name == "title") return m([s](CallArgs&) { return Value(title(s)); });
  if (name == "capitalize")
    return m([s](CallArgs&) {
      std::u32string out;
      const std::u32string cps = to_code_points(s);
      for (std::size_t k = 0; k < cps.size(); ++k) {
        if (k) out += to_lower(cps[k]);
        else out += cps[k] == 0xdf ? std::u32string(U"Ss") : std::u32string(1, to_title(cps[k]));
      }
      return Value(to_utf8(out));
    });
  if (name == "replace")
    return m([s](CallArgs& a) -> Value {
      const std::string from = arg_string(a, "old", 0, "replace"), to = arg_string(a, "new", 1, "replace");
      const auto count = a.get("count", 2);
      std::int64_t left = count && count->kind == K::Int ? count->integer : -1;
      // The result is capped and charged as it grows: `to` may be far longer than `from`.
      std::string out;
      const auto grow = [&out](std::size_t n) {
        check_length(out.size() + n);
        charge_bytes(n);
      };
      if (from.empty()) {  // Python inserts `to` between every character
        const std::u32string cps = to_code_points(s);
        for (std::size_t k = 0; k <= cps.size(); ++k) {
          if (left != 0) {
            grow(to.size());
            out += to;
            --left;
          }
          if (k < cps.size()) {
            grow(4);
            out += to_utf8(std::u32string(1, cps[k]));
          }
        }
        return Value(std::move(out));
      }
      std::size_t at = 0;
      while (left != 0) {
        const std::size_t f = find_text(s, from, at);
        if (f == std::string::npos) break;
        grow(f - at + to.size());
        out.append(s, at, f - at);
        out += to;
        at = f + from.size();
        --left;
      }
      grow(s.size() - at);
      out.append(s, at);
      return Value(std::move(out));
    });
  if (name == "find" || name == "rfind" || name == "count" || name == "index")
    return m([s, name](CallArgs& a) -> Value {
      const std::string sub = arg_string(a, "sub", 0, name.c_str());
      if (name == "count") {
        if (sub.empty()) return Value(static_cast<std::int64_t>(to_code_points(s).size() + 1));
        std::int64_t n = 0;
        for (std::size_t at = find_text(s, sub); at != std::string::npos;
             at = find_text(s, sub, at + sub.size()))
          ++n;
        return Value(n);
      }
      const std::size_t f = name == "rfind" ? rfind_text(s, sub) : find_text(s, sub);
      if (f == std::string::npos) {
        if (name == "index") failure("substring not found");
        return Value(std::int64_t{-1});
      }
      return Value(static_cast<std::int64_t>(to_code_points(s.substr(0, f)).size()));
    });
  if (name == "join")
    return m([s](CallArgs& a) -> Value {
      if (a.positional.empty()) failure("join() takes one argument");
      std::string out;
      bool first = true;
      for (const auto& v : iterate(a.positional[0])) {
        if (!v.is_string()) failure(fmt::format("sequence item: expected str instance, {} found", kind_name(v)));
        const std::size_t add = (first ? 0 : s.size()) + v.text.size();
        check_length(out.size() + add);
        charge_bytes(add);
        if (!first) out += s;
        first = false;
        out += v.text;
      }
      return Value(std::move(out));
    });
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper")
    return m([s, name](CallArgs&) -> Value {
      const std::u32string cps = to_code_points(s);
      if (cps.empty()) return Value(false);
      bool cased = false;
      for (const char32_t c : cps) {
        const bool digit = c >= '0' && c <= '9', alpha = is_alpha(c);
        const bool upper = to_lower(c) != c, lower = to_upper(c) != c || c == 0xdf;
        if (name == "isdigit" && !digit) return Value(false);
        if (name == "isalpha" && !alpha) return Value(false);
        if (name == "isalnum" && !digit && !alpha) return Value(false);
        if (name == "isspace" && !is_ws(c)) return Value(false);
        if (name == "islower" && upper) return Value(false);
        if (name == "isupper" && lower) return Value(false);
        cased = cased || upper || lower;
      }
      return Value(name == "islower" || name == "isupper" ? cased : true);
    });
  if (name == "splitlines")
    return m([s](CallArgs&) {
      // Python's line boundaries: \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029.
      const std::u32string cps = to_code_points(s);
      List parts;
      std::u32string line;
      for (std::size_t k = 0; k < cps.size(); ++k) {
        const char32_t c = cps[k];
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 ||
            c == 0x2029) {
          if (c == '\r' && k + 1 < cps.size() && cps[k + 1] == '\n') ++k;
          charge_bytes(sizeof(Value) + line.size());
          parts.emplace_back(to_utf8(line));
          line.clear();
        } else {
          line += c;
        }
      }
      if (!line.empty()) parts.emplace_back(to_utf8(line));
      return Value::make_list(std::move(parts));
    });
  return std::nullopt;
}

}  // namespace zoo::jinja::detail
