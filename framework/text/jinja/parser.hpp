#pragma once
// The parser's class, shared by parser.cpp (statements) and parse_expr.cpp (expressions).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ast.hpp"

namespace zoo::jinja::detail {

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
  Body body(std::initializer_list<std::string_view> ends, std::string& end);

  static std::unique_ptr<Stmt> stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  std::unique_ptr<Stmt> statement();

  static ExprPtr make(Expr::Kind kind, int line);
  // The node's height from its operands' (built before it): a syntax error past kMaxExprHeight, so
  // that a chain such as `1+1+...` (600 KB of it) is refused here, not deep in the renderer.
  ExprPtr sealed(ExprPtr e) const;
  // with_cond: whether `x if c else y` is allowed at the top (not in a for's iterable or filter).
  ExprPtr expression(bool with_cond = true);
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b, int line);
  ExprPtr or_expr();
  ExprPtr and_expr();
  ExprPtr not_expr();
  ExprPtr compare();
  ExprPtr math1();
  ExprPtr concat();
  ExprPtr math2();
  ExprPtr pow();
  ExprPtr unary(bool with_filter);
  ExprPtr primary();
  static ExprPtr literal(Value v, int line);
  // (args, name=value, ...) after the '(' was consumed; into e->args (after what is there) and keyword.
  void call_args(Expr& e);
  ExprPtr postfix(ExprPtr e);
  ExprPtr filters_and_tests(ExprPtr e);

  std::vector<Token> t_;
  std::size_t i_ = 0;
  const std::string& label_;
  int depth_ = 0;
};

}  // namespace zoo::jinja::detail
