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
// The tallest expression tree (`a ~ b ~ c ...` is one node per operator, its first operand at the
// bottom): far above real templates, below what jinja2's compiled Python accepts (CPython refuses
// 200 nested parentheses), and small enough that evaluating and destroying it is shallow.
inline constexpr int kMaxExprHeight = 400;

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
  Expr() = default;
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  // Iterative: a tree is destroyed without recursion, whatever its height.
  ~Expr();
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
  int height = 1;        // 1 + the tallest operand's (set by the parser, bounded by kMaxExprHeight)
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

// The budgets of the render running on this thread (budget.cpp). The renderer creates one per
// render; the filters, methods and operators charge their work and the bytes of what they build
// to it before building, so that no builtin runs or allocates past the render's limits. With no
// render running (a JSON input read, a value printed by the CLI) charging is free.
class Budget {
 public:
  explicit Budget(const RenderLimits& limits);
  ~Budget();
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;
  const RenderLimits& limits() const { return limits_; }

 private:
  friend void charge_steps(std::uint64_t);
  friend void charge_bytes(std::uint64_t);
  friend std::size_t string_cap();
  const RenderLimits& limits_;
  std::uint64_t steps_ = 0, bytes_ = 0;
  Budget* previous_;
};
// Work: n steps (a statement, an expression, a loop iteration, a comparison, bytes scanned).
void charge_steps(std::uint64_t n);
// Bytes of a value about to be built (and their work: one step per 256 bytes).
void charge_bytes(std::uint64_t n);
// A string about to be `size` bytes long: Failure past string_cap() (the output cap), since no
// longer string can end up in a render (no check outside a render).
void check_length(std::size_t size);
std::size_t string_cap();
// What copying `v` into a new list or dict costs: a value, and its text (strings are copied).
inline std::uint64_t value_bytes(const Value& v) {
  return sizeof(Value) + v.text.size();
}
// Decoding n bytes of text (to code points, to count them): a step per 16 bytes, about the time a
// step takes.
inline void charge_scan(std::size_t n) {
  charge_steps(n / 16);
}
// Python's str.find over bytes in linear time (glibc's two-way memmem), npos when absent.
std::size_t find_text(std::string_view s, std::string_view sub, std::size_t from = 0);
std::size_t rfind_text(std::string_view s, std::string_view sub);

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
// `a OP b` for the arithmetic operators, ~, + and * (operators.cpp); what it builds is charged to
// the render's budget first (a string past the output cap is refused).
Value binary_op(const std::string& op, const Value& a, const Value& b);
// Filters and tests by name (filters.cpp); Failure for an unknown name.
Value apply_filter(const std::string& name, const Value& target, const CallArgs& args);
bool apply_test(const std::string& name, const Value& v, const CallArgs& args);
bool has_test(const std::string& name);

// The Python pieces the renderer and the filters share.
std::string kind_name(const Value& v);  // Python's type name: str, int, list, dict, NoneType...
std::u32string to_code_points(std::string_view utf8);
// The byte length of the code point starting at s[i] (1 for a malformed byte), as
// to_code_points reads it; and the number of code points, without building them.
std::size_t code_point_size(std::string_view s, std::size_t i);
std::size_t code_point_count(std::string_view s);
std::string to_utf8(std::u32string_view text);
std::string float_repr(double d);

}  // namespace zoo::jinja::detail
