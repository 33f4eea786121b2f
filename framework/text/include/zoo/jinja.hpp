#pragma once
// A Jinja renderer for chat templates: the subset of Jinja2 that Hugging Face chat templates use,
// with the semantics of the environment transformers renders them in (an immutable sandbox,
// trim_blocks and lstrip_blocks on, its own `tojson`, `raise_exception` and `strftime_now`).
// Values follow Python's rules (printing, truthiness, equality, slicing), because the prompt a
// model was trained on is what Python printed. Every render is bounded (steps, output bytes,
// nesting, the bytes of the values it builds, the work of every filter and method), so a hostile
// template is an error, never a hang, a stack overflow or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/error.hpp"

namespace zoo::jinja {

struct Value;
using List = std::vector<Value>;
struct Dict;
struct CallArgs;
// A callable value: a global (range, namespace), a bound method or a macro.
using Function = std::function<Value(CallArgs&)>;

inline constexpr int kMaxValueDepth = 256;

struct Value {
  // BigInt: an integer of a JSON input too large for 64 bits, kept as its digits (Python keeps it
  // exact; it prints and serialises as written, and arithmetic on it is refused).
  // Tuple prints as Python's (a, b) and serialises as a list. A Namespace is a mutable dict whose
  // entries are attributes (`set ns.x = ...`). A Generator is what jinja2's map, select, reject,
  // unique and items filters return: it iterates (and `list` makes it a List) but has no length,
  // no index and no JSON, as in Python.
  enum class Kind { Undefined, None, Bool, Int, Float, BigInt, String, List, Tuple, Dict, Namespace, Function, Generator };

  Kind kind = Kind::Undefined;
  bool boolean = false;
  // A String marked safe (jinja2's Markup, from the `safe` and `escape` filters): `+` with a plain
  // string HTML-escapes the plain one, as Markup.__add__ does.
  bool safe = false;
  // How deep lists and dicts nest inside this value (0 for a scalar): capped when they are built,
  // so that no walk over a value (printing, ==, JSON, its destruction) can exhaust the stack.
  int depth = 0;
  std::int64_t integer = 0;
  double real = 0.0;
  // String's text; BigInt's digits; Undefined's error message ("'x' is undefined"), which any use
  // of it that jinja2 refuses reports.
  std::string text;
  std::shared_ptr<List> list;  // List, Tuple, Generator
  std::shared_ptr<Dict> dict;  // Dict, Namespace
  std::shared_ptr<Function> function;

  Value() = default;
  Value(bool b) : kind(Kind::Bool), boolean(b) {}
  Value(int i) : kind(Kind::Int), integer(i) {}
  Value(std::int64_t i) : kind(Kind::Int), integer(i) {}
  Value(double d) : kind(Kind::Float), real(d) {}
  Value(std::string s) : kind(Kind::String), text(std::move(s)) {}
  Value(const char* s) : kind(Kind::String), text(s) {}

  static Value undefined(std::string message) {
    Value v;
    v.text = std::move(message);
    return v;
  }
  static Value none() {
    Value v;
    v.kind = Kind::None;
    return v;
  }
  // An error (located by the renderer) past kMaxValueDepth levels of nesting.
  static Value make_list(List items = {}, bool tuple = false);
  static Value make_dict(Dict items);
  static Value make_dict();
  static Value make_function(Function f);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::BigInt; }
  bool is_sequence() const { return kind == Kind::List || kind == Kind::Tuple; }
  bool is_mapping() const { return kind == Kind::Dict || kind == Kind::Namespace; }
};

// An insertion-ordered dict (JSON objects and the dicts templates build). Keys are strings, or
// the scalars a template writes as keys ({0: 0, 512: 128}), compared as Python compares them.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  const Value* find_key(const Value& key) const;
  void set(std::string key, Value value);  // replaces in place, else appends (Python's order)
  void set(const char* key, Value value) { set(std::string(key), std::move(value)); }
  void set(Value key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword argument `name`, else positional `index`, else nullopt.
  std::optional<Value> get(std::string_view name, std::size_t index) const;
};

// Thrown by a template's raise_exception(message): the template refusing its input (roles out of
// order, an unsupported tool call). A ValidationError: the input was well formed, and the CLI
// exits 1 with the message.
class TemplateRaised : public ValidationError {
 public:
  TemplateRaised(const std::string& what, std::string message)
      : ValidationError(what), message_(std::move(message)) {}
  // The template's own words, as raise_exception received them.
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// Python's str() of a value, as {{ value }} prints it.
std::string to_str(const Value& v);
// Python's repr().
std::string to_repr(const Value& v);
// Python's json.dumps(v, ensure_ascii=..., indent=..., separators=..., sort_keys=...): the default
// separators are ", " and ": " (with an indent "," and ": "). InputError on a value JSON cannot hold.
struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<int> indent;
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options = {});
// Python's type name of a value: str, int, list, dict, NoneType, ...
std::string type_name(const Value& v);
// Python's truthiness.
bool truthy(const Value& v);
// Python's ==.
bool equal(const Value& a, const Value& b);

// JSON text to a value as Python's json.loads reads it: key order as written, integers exact
// (BigInt past 64 bits), floats as doubles. InputError "LABEL: ..." (never quoting the input) for
// invalid JSON or nesting deeper than `max_depth`.
Value parse_json(std::string_view text, std::string_view label, int max_depth = 64);
// A parsed nlohmann value (its integers and floats keep their types).
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

struct RenderLimits {
  std::size_t max_output_bytes = std::size_t{16} << 20;
  // Every statement, expression and loop iteration is a step: far above any real chat template
  // (a few thousand per message), low enough to stop a runaway one in well under a second.
  std::uint64_t max_steps = 20'000'000;
  int max_call_depth = 200;  // nested macro calls
  // The bytes of the values a render builds (strings, and list and dict elements at the size of a
  // value each), summed as they are built and never given back: it bounds the render's memory
  // whatever the template keeps alive (copies held by 200 nested macro calls, lists of big
  // strings). Real templates build a few times their output.
  std::size_t max_value_bytes = std::size_t{256} << 20;
};

struct RenderOptions {
  RenderLimits limits;
  // What strftime_now() formats: the local time now when unset.
  std::optional<std::int64_t> now_epoch_seconds;
  bool now_is_utc = false;  // a fixed date (--date) is formatted as UTC midnight
};

namespace detail {
struct Program;
}

class Template {
 public:
  // Parses `source`; InputError "LABEL:LINE: what" for a syntax error or nesting deeper than the
  // parser's bound. `label` names the template in every error (the file it came from).
  Template(std::string_view source, std::string label);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `variables` as the template's globals (beside range, namespace, dict,
  // raise_exception and strftime_now). InputError "LABEL:LINE: what" for an error (an undefined
  // value used, a type error, a limit passed); TemplateRaised for raise_exception.
  std::string render(const Dict& variables, const RenderOptions& options = {}) const;

  const std::string& label() const { return label_; }

 private:
  std::shared_ptr<const detail::Program> program_;
  std::string label_;
};

}  // namespace zoo::jinja
