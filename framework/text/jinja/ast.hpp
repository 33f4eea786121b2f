#pragma once
// The renderer's internals: tokens, the syntax tree, and the pieces the files share.
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "zoo/jinja.hpp"

namespace zoo::jinja::detail {

// Deeper than any real template nests (a handful of blocks, expressions a few levels), shallow
// enough that the recursive parser and evaluator stay far from the end of the stack.
inline constexpr int kMaxNesting = 100;

enum class Tok {
  Text,        // template data between tags
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,
  Int,
  Float,
  Op,  // an operator or punctuation: text holds it
  End,
};

struct Token {
  Tok kind;
  std::string text;
  int line = 1;
};

// Source to tokens, with trim_blocks and lstrip_blocks applied as transformers' environment sets
// them, and `-` whitespace control. InputError "LABEL:LINE: ..." for an unterminated tag or string.
std::vector<Token> lex(std::string_view source, const std::string& label);

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    Attr,      // args[0].name
    Item,      // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]] (null parts are omitted)
    Call,      // args[0](args[1:], keyword)
    Filter,    // args[0] | name(args[1:], keyword)
    Test,      // args[0] is [not] name(args[1:])
    Unary,     // op args[0]: "-", "+", "not"
    Binary,    // args[0] op args[1]: arithmetic, "~", "and", "or", "in", "not in"
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    Cond,      // args[0] if args[1] else args[2] (args[2] may be null)
    ListLit,   // [args...]
    TupleLit,  // (args...)
    DictLit,   // {args[0]: args[1], ...}
  };
  Kind kind;
  int line = 1;
  Value value;
  std::string name;  // Name, Attr, Filter, Test; the operator of Unary and Binary
  std::vector<std::string> ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  bool negated = false;  // `is not`
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  // FilterBlock: the body's text through `expr`, a Filter whose first argument stands for it.
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue, Block, FilterBlock };
  Kind kind;
  int line = 1;
  std::string text;  // Text
  ExprPtr expr;      // Output; For: the iterable; Set: the value
  // If: conditions[i] guards bodies[i]; a last body without condition is the else.
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  // For: targets (one, or k, v ...), the `if` filter, body, else; Set: target name, or
  // namespace name + attribute; Macro: name, parameters with defaults (null: none).
  std::vector<std::string> targets;
  std::string attribute;
  ExprPtr filter;
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;
};

struct Program {
  Body body;
};

// Tokens to a program; InputError "LABEL:LINE: ..." for a syntax error.
std::unique_ptr<Program> parse(std::vector<Token> tokens, const std::string& label);

// An error inside a render before it is located: the renderer prefixes "LABEL:LINE: ".
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] inline void failure(const std::string& message) { throw Failure(message); }

// Attribute and item access, iteration, ordering and membership with jinja2's rules (an
// Undefined result for what is missing, Failure for what Python refuses).
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
std::vector<Value> iterate(const Value& v);
bool less(const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
std::int64_t length(const Value& v);
// A bound method of a str (methods.cpp), nullopt when str has none by that name.
std::optional<Value> string_method(const std::string& s, const std::string& name);
// `a OP b` for the arithmetic operators, ~, + and * (operators.cpp); `cost` grows with the size of
// what is built (strings and lists past `cap` bytes or items are refused), for the step budget.
Value binary_op(const std::string& op, const Value& a, const Value& b, std::size_t cap, std::uint64_t& cost);
// Filters and tests by name (filters.cpp); Failure for an unknown name.
Value apply_filter(const std::string& name, const Value& target, const CallArgs& args);
bool apply_test(const std::string& name, const Value& v, const CallArgs& args);
bool has_test(const std::string& name);

// The Python pieces the renderer and the filters share.
std::string kind_name(const Value& v);  // Python's type name: str, int, list, dict, NoneType...
std::u32string to_code_points(std::string_view utf8);
std::string to_utf8(std::u32string_view text);
std::string float_repr(double d);

}  // namespace zoo::jinja::detail
