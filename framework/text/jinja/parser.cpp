// Tokens to a syntax tree: statements by recursive descent over the tags (expressions:
// parse_expr.cpp). Nesting is bounded: a template nested deeper than kMaxNesting is an error,
// never a stack overflow.
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "parser.hpp"

namespace zoo::jinja::detail {

// Each node's operands are moved out before it goes, so no destructor recurses.
Expr::~Expr() {
  std::vector<ExprPtr> pending;
  const auto take = [&pending](Expr& e) {
    for (auto& a : e.args)
      if (a) pending.push_back(std::move(a));
    for (auto& kv : e.keyword)
      if (kv.second) pending.push_back(std::move(kv.second));
  };
  take(*this);
  while (!pending.empty()) {
    ExprPtr e = std::move(pending.back());
    pending.pop_back();
    take(*e);
  }
}

// Statements up to one of the `ends` tags (its name is left in `end`, the tag's name consumed).
Body Parser::body(std::initializer_list<std::string_view> ends, std::string& end) {
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

std::unique_ptr<Stmt> Parser::statement() {
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
    if (is_op(",")) {  // `set a, b = 1, 2`: a tuple without parentheses
      auto tuple = make(Expr::Kind::TupleLit, line);
      tuple->args.push_back(std::move(s->expr));
      while (accept_op(",") && peek().kind != Tok::BlockEnd) tuple->args.push_back(expression());
      s->expr = sealed(std::move(tuple));
    }
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
    s->expr = sealed(std::move(f));
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

std::unique_ptr<Program> parse(std::vector<Token> tokens, const std::string& label) {
  return Parser(std::move(tokens), label).run();
}

}  // namespace zoo::jinja::detail
