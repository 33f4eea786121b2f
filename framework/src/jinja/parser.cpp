// Tokens to a syntax tree: statements by recursive descent over the tags, expressions with
// jinja2's precedence (conditional, or, and, not, comparisons, + -, ~, * / // %, **, unary, then
// filters and tests on the postfixed primary). Nesting is bounded: a template nested deeper than
// kMaxNesting is an error, never a stack overflow.
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "ast.hpp"

namespace zoo::jinja::detail {

namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& label) : t_(std::move(tokens)), label_(label) {}

  std::unique_ptr<Program> run() {
    auto program = std::make_unique<Program>();
    std::string end;
    program->body = body({}, end);
    if (!end.empty()) fail(fmt::format("unexpected '{}'", end));
    return program;
  }

 private:
  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.fail(fmt::format("nested more than {} levels deep", kMaxNesting));
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}:{}: syntax error: {}", label_, peek().line, what));
  }
  const Token& peek(std::size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (i_ < t_.size() - 1) ++i_;
    return t;
  }
  bool is_op(std::string_view op, std::size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Op && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, std::size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Name && peek(ahead).text == name;
  }
  bool accept_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(peek())));
  }
  void expect_name(std::string_view name) {
    if (!accept_name(name)) fail(fmt::format("expected '{}', got {}", name, describe(peek())));
  }
  std::string name() {
    if (peek().kind != Tok::Name) fail(fmt::format("expected a name, got {}", describe(peek())));
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != Tok::BlockEnd) fail(fmt::format("expected the end of the tag, got {}", describe(peek())));
    next();
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::BlockEnd: return "'%}'";
      case Tok::VarEnd: return "'}}'";
      case Tok::End: return "the end of the template";
      case Tok::String: return "a string";
      default: return "'" + t.text + "'";
    }
  }

  // Statements up to one of the `ends` tags (its name is left in `end`, the tag's name consumed).
  Body body(std::initializer_list<std::string_view> ends, std::string& end) {
    Depth d(*this);
    Body out;
    while (true) {
      const Token& t = peek();
      if (t.kind == Tok::End) {
        if (ends.size()) fail(fmt::format("the template ends inside a block (missing '{{% {} %}}')", *(ends.end() - 1)));
        return out;
      }
      if (t.kind == Tok::Text) {
        auto s = stmt(Stmt::Kind::Text, t.line);
        s->text = next().text;
        out.push_back(std::move(s));
      } else if (t.kind == Tok::VarBegin) {
        next();
        auto s = stmt(Stmt::Kind::Output, t.line);
        s->expr = expression();
        if (peek().kind != Tok::VarEnd) fail(fmt::format("expected '}}}}', got {}", describe(peek())));
        next();
        out.push_back(std::move(s));
      } else if (t.kind == Tok::BlockBegin) {
        next();
        const Token& kw = peek();
        if (kw.kind != Tok::Name) fail("expected a statement name after '{%'");
        for (auto e : ends)
          if (kw.text == e) {
            end = next().text;
            return out;
          }
        out.push_back(statement());
      } else {
        fail(fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  static std::unique_ptr<Stmt> stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  std::unique_ptr<Stmt> statement() {
    const Token& kw = next();
    const int line = kw.line;
    const std::string word = kw.text;
    std::string end;
    if (word == "if") {
      auto s = stmt(Stmt::Kind::If, line);
      s->conditions.push_back(expression());
      expect_block_end();
      while (true) {
        s->bodies.push_back(body({"elif", "else", "endif"}, end));
        if (end == "elif") {
          s->conditions.push_back(expression());
          expect_block_end();
        } else if (end == "else") {
          expect_block_end();
          s->bodies.push_back(body({"endif"}, end));
          break;
        } else {
          break;
        }
      }
      expect_block_end();
      return s;
    }
    if (word == "for") {
      auto s = stmt(Stmt::Kind::For, line);
      const bool paren = accept_op("(");
      s->targets.push_back(name());
      while (accept_op(",")) s->targets.push_back(name());
      if (paren) expect_op(")");
      expect_name("in");
      s->expr = expression(false);
      if (accept_name("if")) s->filter = expression(false);
      if (accept_name("recursive")) fail("recursive for loops are not supported");
      expect_block_end();
      s->body = body({"else", "endfor"}, end);
      if (end == "else") {
        expect_block_end();
        s->else_body = body({"endfor"}, end);
      }
      expect_block_end();
      return s;
    }
    if (word == "set") {
      auto s = stmt(Stmt::Kind::Set, line);
      s->targets.push_back(name());
      if (accept_op(".")) s->attribute = name();
      while (accept_op(",")) s->targets.push_back(name());
      if (peek().kind == Tok::BlockEnd) {
        if (s->targets.size() != 1 || !s->attribute.empty()) fail("a {% set %} block assigns one name");
        next();
        s->kind = Stmt::Kind::SetBlock;
        s->body = body({"endset"}, end);
        expect_block_end();
        return s;
      }
      expect_op("=");
      s->expr = expression();
      expect_block_end();
      return s;
    }
    if (word == "macro") {
      auto s = stmt(Stmt::Kind::Macro, line);
      s->targets.push_back(name());
      expect_op("(");
      while (!is_op(")")) {
        std::string param = name();
        ExprPtr def;
        if (accept_op("=")) def = expression();
        s->params.emplace_back(std::move(param), std::move(def));
        if (!accept_op(",")) break;
      }
      expect_op(")");
      expect_block_end();
      s->body = body({"endmacro"}, end);
      if (peek().kind == Tok::Name && peek().text == s->targets[0]) next();
      expect_block_end();
      return s;
    }
    if (word == "break" || word == "continue") {
      auto s = stmt(word == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line);
      expect_block_end();
      return s;
    }
    if (word == "filter") {
      auto s = stmt(Stmt::Kind::FilterBlock, line);
      auto f = make(Expr::Kind::Filter, line);
      f->name = name();
      f->args.push_back(literal(Value(std::string()), line));
      if (accept_op("(")) call_args(*f);
      s->expr = std::move(f);
      expect_block_end();
      s->body = body({"endfilter"}, end);
      expect_block_end();
      return s;
    }
    if (word == "generation") {  // transformers' assistant-mask tag: renders its body
      auto s = stmt(Stmt::Kind::Block, line);
      expect_block_end();
      s->body = body({"endgeneration"}, end);
      expect_block_end();
      return s;
    }
    fail(fmt::format("unknown statement '{}'", word));
  }

  static ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // with_cond: whether `x if c else y` is allowed at the top (not in a for's iterable or filter).
  ExprPtr expression(bool with_cond = true) {
    Depth d(*this);
    ExprPtr e = or_expr();
    while (with_cond && is_name("if")) {
      const int line = next().line;
      auto c = make(Expr::Kind::Cond, line);
      c->args.push_back(std::move(e));
      c->args.push_back(or_expr());
      c->args.push_back(accept_name("else") ? expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b, int line) {
    auto e = make(Expr::Kind::Binary, line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      const int line = next().line;
      e = binary("or", std::move(e), and_expr(), line);
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      const int line = next().line;
      e = binary("and", std::move(e), not_expr(), line);
    }
    return e;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      Depth d(*this);
      const int line = next().line;
      auto e = make(Expr::Kind::Unary, line);
      e->name = "not";
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr first = math1();
    ExprPtr e;
    while (true) {
      std::string op;
      if (peek().kind == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                     peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = peek().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      if (!e) {
        e = make(Expr::Kind::Compare, first->line);
        e->args.push_back(std::move(first));
      }
      e->ops.push_back(op);
      e->args.push_back(math1());
    }
    return e ? std::move(e) : std::move(first);
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), concat(), t.line);
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) {
      const int line = next().line;
      e = binary("~", std::move(e), math2(), line);
    }
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), pow(), t.line);
    }
    return e;
  }
  ExprPtr pow() {
    ExprPtr e = unary(true);
    while (is_op("**")) {
      const int line = next().line;
      e = binary("**", std::move(e), unary(true), line);
    }
    return e;
  }
  ExprPtr unary(bool with_filter) {
    Depth d(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = make(Expr::Kind::Unary, t.line);
      e->name = t.text;
      e->args.push_back(unary(false));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filters_and_tests(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = peek();
    if (t.kind == Tok::Name) {
      next();
      if (t.text == "true" || t.text == "True") return literal(Value(true), t.line);
      if (t.text == "false" || t.text == "False") return literal(Value(false), t.line);
      if (t.text == "none" || t.text == "None") return literal(Value::none(), t.line);
      auto e = make(Expr::Kind::Name, t.line);
      e->name = t.text;
      return e;
    }
    if (t.kind == Tok::String) {
      std::string s = next().text;
      while (peek().kind == Tok::String) s += next().text;  // adjacent literals concatenate
      return literal(Value(std::move(s)), t.line);
    }
    if (t.kind == Tok::Int) {
      next();
      std::int64_t v = 0;
      const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (r.ec != std::errc()) fail("an integer literal too large");
      return literal(Value(v), t.line);
    }
    if (t.kind == Tok::Float) {
      next();
      return literal(Value(std::strtod(t.text.c_str(), nullptr)), t.line);
    }
    if (accept_op("(")) {
      if (accept_op(")")) return make(Expr::Kind::TupleLit, t.line);
      ExprPtr e = expression();
      if (!is_op(",")) {
        expect_op(")");
        return e;
      }
      auto tuple = make(Expr::Kind::TupleLit, t.line);
      tuple->args.push_back(std::move(e));
      while (accept_op(",") && !is_op(")")) tuple->args.push_back(expression());
      expect_op(")");
      return tuple;
    }
    if (accept_op("[")) {
      auto e = make(Expr::Kind::ListLit, t.line);
      while (!is_op("]")) {
        e->args.push_back(expression());
        if (!accept_op(",")) break;
      }
      expect_op("]");
      return e;
    }
    if (accept_op("{")) {
      auto e = make(Expr::Kind::DictLit, t.line);
      while (!is_op("}")) {
        e->args.push_back(expression());
        expect_op(":");
        e->args.push_back(expression());
        if (!accept_op(",")) break;
      }
      expect_op("}");
      return e;
    }
    fail(fmt::format("unexpected {}", describe(t)));
  }

  static ExprPtr literal(Value v, int line) {
    auto e = make(Expr::Kind::Literal, line);
    e->value = std::move(v);
    return e;
  }

  // (args, name=value, ...) after the '(' was consumed; into e->args (after what is there) and keyword.
  void call_args(Expr& e) {
    while (!is_op(")")) {
      if (peek().kind == Tok::Name && is_op("=", 1)) {
        std::string key = next().text;
        next();
        e.keyword.emplace_back(std::move(key), expression());
      } else {
        if (!e.keyword.empty()) fail("a positional argument after a keyword argument");
        e.args.push_back(expression());
      }
      if (!accept_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr postfix(ExprPtr e) {
    int chain = 0;
    while (true) {
      if (++chain > kMaxNesting) fail(fmt::format("more than {} attribute, index or call steps", kMaxNesting));
      const int line = peek().line;
      if (accept_op(".")) {
        if (peek().kind == Tok::Int) {
          auto item = make(Expr::Kind::Item, line);
          item->args.push_back(std::move(e));
          item->args.push_back(literal(Value(std::int64_t{std::strtoll(next().text.c_str(), nullptr, 10)}), line));
          e = std::move(item);
          continue;
        }
        auto attr = make(Expr::Kind::Attr, line);
        attr->name = name();
        attr->args.push_back(std::move(e));
        e = std::move(attr);
      } else if (accept_op("[")) {
        Depth d(*this);
        ExprPtr parts[3];
        int colons = 0;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) parts[k] = expression();
          if (k < 2 && accept_op(":")) {
            ++colons;
            continue;
          }
          break;
        }
        expect_op("]");
        auto item = make(colons ? Expr::Kind::Slice : Expr::Kind::Item, line);
        item->args.push_back(std::move(e));
        if (!colons && !parts[0]) fail("an empty subscript []");
        for (auto& p : parts) item->args.push_back(std::move(p));
        if (!colons) item->args.resize(2);
        e = std::move(item);
      } else if (accept_op("(")) {
        Depth d(*this);
        auto call = make(Expr::Kind::Call, line);
        call->args.push_back(std::move(e));
        call_args(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr filters_and_tests(ExprPtr e) {
    int chain = 0;
    while (true) {
      if (++chain > kMaxNesting) fail(fmt::format("more than {} filters or tests in a row", kMaxNesting));
      const int line = peek().line;
      if (accept_op("|")) {
        auto f = make(Expr::Kind::Filter, line);
        f->name = name();
        f->args.push_back(std::move(e));
        if (accept_op("(")) {
          Depth d(*this);
          call_args(*f);
        }
        e = std::move(f);
      } else if (accept_name("is")) {
        auto t = make(Expr::Kind::Test, line);
        t->negated = accept_name("not");
        t->name = name();
        t->args.push_back(std::move(e));
        if (accept_op("(")) {
          Depth d(*this);
          call_args(*t);
        } else if ((peek().kind == Tok::Name || peek().kind == Tok::String || peek().kind == Tok::Int ||
                    peek().kind == Tok::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") && !is_name("in") &&
                   !is_name("not") && !is_name("is")) {
          Depth d(*this);
          t->args.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
  const std::string& label_;
  int depth_ = 0;
};

}  // namespace

std::unique_ptr<Program> parse(std::vector<Token> tokens, const std::string& label) {
  return Parser(std::move(tokens), label).run();
}

}  // namespace zoo::jinja::detail
