// Expressions with jinja2's precedence: conditional, or, and, not, comparisons, + -, ~, * / // %,
// **, unary, then filters and tests on the postfixed primary. Nesting is bounded (kMaxNesting).
#include <charconv>
#include <cstdlib>

#include "parser.hpp"

namespace zoo::jinja::detail {

ExprPtr Parser::make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr Parser::sealed(ExprPtr e) const {
  int h = 0;
  for (const auto& a : e->args)
    if (a) h = std::max(h, a->height);
  for (const auto& [k, a] : e->keyword)
    if (a) h = std::max(h, a->height);
  e->height = h + 1;
  if (e->height > kMaxExprHeight)
    fail(fmt::format("an expression nested more than {} levels deep", kMaxExprHeight));
  return e;
}

// with_cond: whether `x if c else y` is allowed at the top (not in a for's iterable or filter).
ExprPtr Parser::expression(bool with_cond) {
  Depth d(*this);
  ExprPtr e = or_expr();
  while (with_cond && is_name("if")) {
    const int line = next().line;
    auto c = make(Expr::Kind::Cond, line);
    c->args.push_back(std::move(e));
    c->args.push_back(or_expr());
    c->args.push_back(accept_name("else") ? expression() : nullptr);
    e = sealed(std::move(c));
  }
  return e;
}

ExprPtr Parser::binary(std::string op, ExprPtr a, ExprPtr b, int line) {
  auto e = make(Expr::Kind::Binary, line);
  e->name = std::move(op);
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return sealed(std::move(e));
}

ExprPtr Parser::or_expr() {
  ExprPtr e = and_expr();
  while (is_name("or")) {
    const int line = next().line;
    e = binary("or", std::move(e), and_expr(), line);
  }
  return e;
}

ExprPtr Parser::and_expr() {
  ExprPtr e = not_expr();
  while (is_name("and")) {
    const int line = next().line;
    e = binary("and", std::move(e), not_expr(), line);
  }
  return e;
}

ExprPtr Parser::not_expr() {
  if (is_name("not")) {
    Depth d(*this);
    const int line = next().line;
    auto e = make(Expr::Kind::Unary, line);
    e->name = "not";
    e->args.push_back(not_expr());
    return sealed(std::move(e));
  }
  return compare();
}

ExprPtr Parser::compare() {
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
  return e ? sealed(std::move(e)) : std::move(first);
}

ExprPtr Parser::math1() {
  ExprPtr e = concat();
  while (is_op("+") || is_op("-")) {
    const Token& t = next();
    e = binary(t.text, std::move(e), concat(), t.line);
  }
  return e;
}

ExprPtr Parser::concat() {
  ExprPtr e = math2();
  while (is_op("~")) {
    const int line = next().line;
    e = binary("~", std::move(e), math2(), line);
  }
  return e;
}

ExprPtr Parser::math2() {
  ExprPtr e = pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& t = next();
    e = binary(t.text, std::move(e), pow(), t.line);
  }
  return e;
}

ExprPtr Parser::pow() {
  ExprPtr e = unary(true);
  while (is_op("**")) {
    const int line = next().line;
    e = binary("**", std::move(e), unary(true), line);
  }
  return e;
}

ExprPtr Parser::unary(bool with_filter) {
  Depth d(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const Token& t = next();
    e = make(Expr::Kind::Unary, t.line);
    e->name = t.text;
    e->args.push_back(unary(false));
    e = sealed(std::move(e));
  } else {
    e = primary();
  }
  e = postfix(std::move(e));
  if (with_filter) e = filters_and_tests(std::move(e));
  return e;
}

ExprPtr Parser::primary() {
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
    if (r.ec != std::errc()) {  // Python's ints have no bound: kept as digits, as a JSON input's are
      Value big;
      big.kind = Value::Kind::BigInt;
      big.text = t.text;
      return literal(std::move(big), t.line);
    }
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
    return sealed(std::move(tuple));
  }
  if (accept_op("[")) {
    auto e = make(Expr::Kind::ListLit, t.line);
    while (!is_op("]")) {
      e->args.push_back(expression());
      if (!accept_op(",")) break;
    }
    expect_op("]");
    return sealed(std::move(e));
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
    return sealed(std::move(e));
  }
  fail(fmt::format("unexpected {}", describe(t)));
}

ExprPtr Parser::literal(Value v, int line) {
  auto e = make(Expr::Kind::Literal, line);
  e->value = std::move(v);
  return e;
}

// (args, name=value, ...) after the '(' was consumed; into e->args (after what is there) and keyword.
void Parser::call_args(Expr& e) {
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

ExprPtr Parser::postfix(ExprPtr e) {
  int chain = 0;
  while (true) {
    if (++chain > kMaxNesting) fail(fmt::format("more than {} attribute, index or call steps", kMaxNesting));
    const int line = peek().line;
    if (accept_op(".")) {
      if (peek().kind == Tok::Int) {
        auto item = make(Expr::Kind::Item, line);
        item->args.push_back(std::move(e));
        item->args.push_back(literal(Value(std::int64_t{std::strtoll(next().text.c_str(), nullptr, 10)}), line));
        e = sealed(std::move(item));
        continue;
      }
      auto attr = make(Expr::Kind::Attr, line);
      attr->name = name();
      attr->args.push_back(std::move(e));
      e = sealed(std::move(attr));
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
      e = sealed(std::move(item));
    } else if (accept_op("(")) {
      Depth d(*this);
      auto call = make(Expr::Kind::Call, line);
      call->args.push_back(std::move(e));
      call_args(*call);
      e = sealed(std::move(call));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::filters_and_tests(ExprPtr e) {
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
      e = sealed(std::move(f));
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
      e = sealed(std::move(t));
    } else {
      return e;
    }
  }
}

}  // namespace zoo::jinja::detail
