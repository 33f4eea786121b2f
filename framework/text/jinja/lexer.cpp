// Template source to tokens. Whitespace control is applied here, to the text between tags, in the
// order jinja2's lexer applies it: `-` on either side strips all whitespace, else trim_blocks drops
// the one newline after a block or comment tag and lstrip_blocks drops the spaces and tabs before
// one that starts its line (`+` turns either off for that tag).
#include <fmt/format.h>

#include <cctype>
#include <cstdint>

#include "ast.hpp"

namespace zoo::jinja::detail {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(std::string& out, std::uint32_t cp) { out += to_utf8(std::u32string(1, static_cast<char32_t>(cp))); }

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& label) : label_(label) {
    // jinja2 normalises newlines, and drops one trailing newline (keep_trailing_newline=False).
    src_.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    bool strip_next = false, trim_next = false;
    while (pos_ <= src_.size()) {
      const std::size_t at = next_tag(pos_);
      std::string text = src_.substr(pos_, at - pos_);
      bool line_start = pos_ == 0 || src_[pos_ - 1] == '\n';
      if (strip_next) {
        std::size_t k = 0;
        while (k < text.size() && is_space(text[k])) ++k;
        text.erase(0, k);
      } else if (trim_next && !text.empty() && text[0] == '\n') {
        text.erase(0, 1);
        line_start = true;
      }
      strip_next = trim_next = false;
      if (at == src_.size()) {
        emit_text(std::move(text));
        break;
      }
      const char type = src_[at + 1];  // '{', '%' or '#'
      const char sign = at + 2 < src_.size() ? src_[at + 2] : '\0';
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (sign != '+' && type != '{') {
        const std::size_t nl = text.rfind('\n');
        const std::size_t from = nl == std::string::npos ? 0 : nl + 1;
        if (nl != std::string::npos || line_start) {
          bool blank = true;
          for (std::size_t k = from; k < text.size(); ++k) blank = blank && is_space(text[k]);
          if (blank) text.erase(from);
        }
      }
      emit_text(std::move(text));
      line_ = line_at(at);
      pos_ = at + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (type == '#') {
        const std::size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) fail("the comment is not closed with #}");
        strip_next = end > pos_ && src_[end - 1] == '-';
        trim_next = !strip_next && !(end > pos_ && src_[end - 1] == '+');
        pos_ = end + 2;
        continue;
      }
      const std::size_t tag_start = out_.size();
      out_.push_back({type == '{' ? Tok::VarBegin : Tok::BlockBegin, {}, line_});
      const char end_sign = lex_tag(type == '{' ? '}' : '%');
      out_.push_back({type == '{' ? Tok::VarEnd : Tok::BlockEnd, {}, line_});
      strip_next = end_sign == '-';
      trim_next = type == '%' && end_sign == '\0';
      if (type == '%' && out_.size() == tag_start + 3 && out_[tag_start + 1].kind == Tok::Name &&
          out_[tag_start + 1].text == "raw") {
        out_.resize(tag_start);
        lex_raw(strip_next, trim_next);
        strip_next = trim_next = false;
      }
    }
    out_.push_back({Tok::End, {}, line_});
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}:{}: syntax error: {}", label_, line_, what));
  }

  int line_at(std::size_t at) {
    for (; counted_ < at && counted_ < src_.size(); ++counted_)
      if (src_[counted_] == '\n') ++counted_line_;
    return counted_line_;
  }

  std::size_t next_tag(std::size_t from) const {
    for (std::size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  void emit_text(std::string text) {
    if (!text.empty()) out_.push_back({Tok::Text, std::move(text), line_});
  }

  // {% raw %} ... {% endraw %}: the text between, untouched.
  void lex_raw(bool strip_start, bool trim_start) {
    std::size_t search = pos_;
    while (true) {
      const std::size_t at = src_.find("{%", search);
      if (at == std::string::npos) fail("{% raw %} is not closed with {% endraw %}");
      std::size_t k = at + 2;
      const bool strip_before = k < src_.size() && src_[k] == '-';
      if (strip_before || (k < src_.size() && src_[k] == '+')) ++k;
      while (k < src_.size() && is_space(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0) {
        search = at + 2;
        continue;
      }
      k += 6;
      while (k < src_.size() && is_space(src_[k])) ++k;
      const bool strip_after = k < src_.size() && src_[k] == '-';
      if (strip_after) ++k;
      if (src_.compare(k, 2, "%}") != 0) fail("malformed {% endraw %}");
      std::string text = src_.substr(pos_, at - pos_);
      if (strip_start) {
        std::size_t s = 0;
        while (s < text.size() && is_space(text[s])) ++s;
        text.erase(0, s);
      } else if (trim_start && !text.empty() && text[0] == '\n') {
        text.erase(0, 1);
      }
      if (strip_before)
        while (!text.empty() && is_space(text.back())) text.pop_back();
      emit_text(std::move(text));
      pos_ = k + 2;
      if (strip_after) {
        while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      } else if (pos_ < src_.size() && src_[pos_] == '\n') {
        ++pos_;
      }
      return;
    }
  }

  // The tokens inside a tag up to its end ("}}" or "%}" outside brackets); returns the end's sign.
  char lex_tag(char closer) {
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) fail(closer == '}' ? "the tag is not closed with }}" : "the tag is not closed with %}");
      const char c = src_[pos_];
      if (depth == 0) {
        for (const char sign : {'-', '+', '\0'}) {
          const std::size_t k = pos_ + (sign ? 1 : 0);
          if ((sign == '\0' || c == sign) && src_.compare(k, 2, std::string{closer, '}'}) == 0) {
            if (sign == '+' && closer == '}') break;
            pos_ = k + 2;
            return sign;
          }
        }
      }
      if (is_name_start(c)) {
        std::size_t e = pos_;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        push(Tok::Name, src_.substr(pos_, e - pos_));
        pos_ = e;
      } else if (is_digit(c)) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static constexpr std::string_view two[] = {"**", "//", "==", "!=", ">=", "<="};
        std::string op(1, c);
        for (auto t : two)
          if (src_.compare(pos_, 2, t) == 0) op = std::string(t);
        if (op.size() == 1 && std::string_view("+-*/%~<>()[]{},.:|=").find(c) == std::string_view::npos)
          fail(fmt::format("unexpected character '{}' in a tag", c));
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        push(Tok::Op, op);
        pos_ += op.size();
      }
    }
  }

  void push(Tok kind, std::string text) { out_.push_back({kind, std::move(text), line_}); }

  void lex_number() {
    std::size_t e = pos_;
    auto digits = [&] {
      while (e < src_.size() && (is_digit(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() && is_digit(src_[e + 1]))))
        ++e;
    };
    digits();
    // After `x.` a number is an index (x.0), never a float.
    const bool after_dot = !out_.empty() && out_.back().kind == Tok::Op && out_.back().text == ".";
    bool is_float = false;
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      ++e;
      digits();
      is_float = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      std::size_t k = e + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && is_digit(src_[k])) {
        e = k;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (std::size_t k = pos_; k < e; ++k)
      if (src_[k] != '_') text += src_[k];
    push(is_float ? Tok::Float : Tok::Int, std::move(text));
    pos_ = e;
  }

  // A quoted string with Python's escapes (\n, \t, \xNN, \uNNNN, ...; an unknown escape stays as
  // written, backslash included).
  void lex_string(char quote) {
    std::string value;
    std::size_t i = pos_ + 1;
    const int start_line = line_;
    auto hex = [&](std::size_t n) -> std::uint32_t {
      if (i + n > src_.size()) fail("a truncated \\x or \\u escape in a string");
      std::uint32_t v = 0;
      for (std::size_t k = 0; k < n; ++k) {
        const char h = src_[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) fail("a malformed \\x or \\u escape in a string");
        v = v * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                                                            : (std::tolower(h) - 'a' + 10));
      }
      i += n;
      return v;
    };
    while (true) {
      if (i >= src_.size()) {
        line_ = start_line;
        fail("a string is not closed");
      }
      const char c = src_[i];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || i + 1 >= src_.size()) {
        value += c;
        ++i;
        continue;
      }
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '0': value += '\0'; break;
        case '\n': ++line_; break;  // a line continuation
        case 'x': append_utf8(value, hex(2)); break;
        case 'u': append_utf8(value, hex(4)); break;
        case 'U': append_utf8(value, hex(8)); break;
        default:
          value += '\\';
          value += e;
      }
    }
    out_.push_back({Tok::String, std::move(value), start_line});
    pos_ = i + 1;
  }

  std::string src_;
  const std::string& label_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::size_t counted_ = 0;
  int counted_line_ = 1;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const std::string& label) { return Lexer(source, label).run(); }

}  // namespace zoo::jinja::detail
