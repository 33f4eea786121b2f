// The interpreter: statements write into an output buffer, expressions evaluate to values, with
// jinja2's scoping (a for loop's body is a fresh scope per iteration, a macro sees the template's
// top level) and every render bounded by steps, output bytes and depth.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <new>
#include <stdexcept>

#include "ast.hpp"

namespace zoo::jinja {

using detail::Expr;
using detail::failure;
using detail::Failure;
using detail::Stmt;

namespace {

// Nested evaluations at run time (macro recursion multiplies the template's own nesting): well
// inside the stack, far above what real templates reach.
constexpr int kMaxRuntimeDepth = 1500;

struct Frame {
  Dict vars;
  Frame* parent = nullptr;
};

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  Renderer(const std::string& label, const RenderOptions& options, const Dict& variables)
      : label_(label), options_(options), budget_(options.limits) {
    root_.vars = variables;
  }

  std::string run(const detail::Body& body) {
    std::string out;
    out_ = &out;
    exec_body(body, root_);
    return out;
  }

 private:
  struct Guard {
    explicit Guard(Renderer& r) : r_(r) {
      if (++r_.depth_ > kMaxRuntimeDepth)
        failure(fmt::format("nested more than {} levels deep while rendering (a recursion without end?)",
                            kMaxRuntimeDepth));
    }
    ~Guard() { --r_.depth_; }
    Renderer& r_;
  };

  [[noreturn]] void located(int line, const std::string& what) const {
    throw InputError(fmt::format("{}:{}: {}", label_, line, what));
  }

  static void step(std::uint64_t n = 1) { detail::charge_steps(n); }

  // A captured block's buffer is thrown away and written again at each turn of a loop: the
  // bytes written are work too.
  void write(const std::string& s) {
    if (out_->size() + s.size() > options_.limits.max_output_bytes)
      failure(fmt::format("the template renders more than {} MiB", options_.limits.max_output_bytes >> 20));
    step(s.size() / 256);
    *out_ += s;
  }

  Flow exec_body(const detail::Body& body, Frame& frame) {
    for (const auto& s : body) {
      const Flow f = exec(*s, frame);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s, Frame& frame) {
    try {
      Guard g(*this);
      step();
      switch (s.kind) {
        case Stmt::Kind::Text: write(s.text); return Flow::Normal;
        case Stmt::Kind::Output: write(to_str(eval(*s.expr, frame))); return Flow::Normal;
        case Stmt::Kind::If:
          for (std::size_t k = 0; k < s.bodies.size(); ++k)
            if (k >= s.conditions.size() || truthy(eval(*s.conditions[k], frame))) return exec_body(s.bodies[k], frame);
          return Flow::Normal;
        case Stmt::Kind::For: return exec_for(s, frame);
        case Stmt::Kind::Set: exec_set(s, frame); return Flow::Normal;
        case Stmt::Kind::SetBlock: {
          Value text(capture(s.body, frame));
          detail::charge_bytes(text.text.size());
          frame.vars.set(s.targets[0], std::move(text));
          return Flow::Normal;
        }
        case Stmt::Kind::Macro: define_macro(s, frame); return Flow::Normal;
        case Stmt::Kind::Break: return Flow::Break;
        case Stmt::Kind::Continue: return Flow::Continue;
        case Stmt::Kind::Block: return exec_body(s.body, frame);
        case Stmt::Kind::FilterBlock: {
          const Value text(capture(s.body, frame));
          const CallArgs a = eval_args(*s.expr, frame, 1);
          write(to_str(detail::apply_filter(s.expr->name, text, a)));
          return Flow::Normal;
        }
      }
    } catch (const Failure& f) {
      located(s.line, f.what());
    } catch (const std::bad_alloc&) {  // the budgets should come first: this names the statement
      located(s.line, "out of memory");
    } catch (const std::length_error&) {
      located(s.line, "a value too long to build");
    }
    return Flow::Normal;
  }

  std::string capture(const detail::Body& body, Frame& frame) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    try {
      exec_body(body, frame);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buffer;
  }

  static void unpack(const std::vector<std::string>& targets, const Value& item, Frame& into) {
    if (targets.size() == 1) {
      into.vars.set(targets[0], item);
      return;
    }
    const auto parts = detail::iterate(item);
    if (parts.size() != targets.size())
      failure(fmt::format("{} values to unpack (expected {}, got {})",
                          parts.size() > targets.size() ? "too many" : "not enough", targets.size(), parts.size()));
    for (std::size_t k = 0; k < parts.size(); ++k) into.vars.set(targets[k], parts[k]);
  }

  Flow exec_for(const Stmt& s, Frame& frame) {
    const Value iterable = eval(*s.expr, frame);
    // A list is iterated in place (the value holds it alive); anything else is listed first.
    std::shared_ptr<const List> listed =
        iterable.list ? iterable.list : std::make_shared<const List>(detail::iterate(iterable));
    if (s.filter) {
      List kept;
      for (const auto& item : *listed) {
        step();
        Frame f{{}, &frame};
        unpack(s.targets, item, f);
        if (truthy(eval(*s.filter, f))) {
          detail::charge_bytes(detail::value_bytes(item));
          kept.push_back(item);
        }
      }
      listed = std::make_shared<const List>(std::move(kept));
    }
    const List& items = *listed;
    if (items.empty()) return exec_body(s.else_body, frame);
    const auto n = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < n; ++i) {
      step();
      Frame f{{}, &frame};
      unpack(s.targets, items[static_cast<std::size_t>(i)], f);
      Dict loop;
      loop.items.reserve(12);
      loop.set("index", Value(i + 1));
      loop.set("index0", Value(i));
      loop.set("revindex", Value(n - i));
      loop.set("revindex0", Value(n - i - 1));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == n - 1));
      loop.set("length", Value(n));
      loop.set("depth", Value(1));
      loop.set("depth0", Value(0));
      loop.set("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined("there is no previous item"));
      loop.set("nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value::undefined("there is no next item"));
      loop.set("cycle", Value::make_function([i](CallArgs& a) -> Value {
        if (a.positional.empty()) failure("no items for cycling given");
        return a.positional[static_cast<std::size_t>(i) % a.positional.size()];
      }));
      f.vars.set("loop", Value::make_dict(std::move(loop)));
      if (exec_body(s.body, f) == Flow::Break) break;
    }
    return Flow::Normal;
  }

  void exec_set(const Stmt& s, Frame& frame) {
    Value v = eval(*s.expr, frame);
    if (s.attribute.empty()) {
      unpack(s.targets, v, frame);
      return;
    }
    const Value target = lookup(s.targets[0], frame);
    if (target.kind != Value::Kind::Namespace)
      failure(fmt::format("cannot assign attribute on non-namespace object ('{}' is {})", s.targets[0],
                          detail::kind_name(target)));
    if (!s.attribute.empty() && s.attribute[0] == '_')
      failure("chat templates cannot store underscore-prefixed attributes on a namespace");
    target.dict->set(s.attribute, std::move(v));
  }

  void define_macro(const Stmt& s, Frame& frame) {
    const Stmt* macro = &s;
    frame.vars.set(s.targets[0], Value::make_function([this, macro](CallArgs& args) -> Value {
      if (++calls_ > options_.limits.max_call_depth)
        failure(fmt::format("macros call each other more than {} deep (a recursion without end?)",
                            options_.limits.max_call_depth));
      struct Down {
        int& n;
        ~Down() { --n; }
      } down{calls_};
      // A macro sees the template's top level and its own arguments, not its caller's locals.
      Frame f{{}, &root_};
      if (args.positional.size() > macro->params.size())
        failure(fmt::format("macro '{}' takes not more than {} argument(s)", macro->targets[0], macro->params.size()));
      for (const auto& [key, value] : args.keyword) {
        bool known = false;
        for (const auto& p : macro->params) known = known || p.first == key;
        if (!known) failure(fmt::format("macro '{}' takes no keyword argument '{}'", macro->targets[0], key));
      }
      for (std::size_t k = 0; k < macro->params.size(); ++k) {
        const auto& [pname, def] = macro->params[k];
        if (auto given = args.get(pname, k)) {
          detail::charge_bytes(detail::value_bytes(*given));  // a copy each call deep
          f.vars.set(pname, *given);
        } else if (def)
          f.vars.set(pname, eval(*def, f));
        else
          f.vars.set(pname, Value::undefined(fmt::format("parameter '{}' was not provided", pname)));
      }
      return Value(capture(macro->body, f));
    }));
  }

  Value lookup(const std::string& name, const Frame& frame) const {
    for (const Frame* f = &frame; f; f = f->parent)
      if (const Value* v = f->vars.find(name)) return *v;
    if (auto g = global(name)) return *g;
    return Value::undefined(fmt::format("'{}' is undefined", name));
  }

  std::optional<Value> global(const std::string& name) const {
    if (name == "range") return Value::make_function(range);
    if (name == "namespace" || name == "dict")
      return Value::make_function([ns = name == "namespace"](CallArgs& a) -> Value {
        Dict d;
        for (const auto& p : a.positional) {
          if (!p.is_mapping()) failure(fmt::format("{}() takes a mapping, got {}", ns ? "namespace" : "dict", detail::kind_name(p)));
          for (const auto& [k, v] : p.dict->items) {
            detail::charge_bytes(detail::value_bytes(k) + detail::value_bytes(v));
            d.set(k, v);
          }
        }
        for (const auto& [k, v] : a.keyword) {  // keyword names are strings
          if (ns && !k.empty() && k[0] == '_')
            failure("chat templates cannot store underscore-prefixed attributes on a namespace");
          d.set(k, v);
        }
        Value v = Value::make_dict(std::move(d));
        if (ns) v.kind = Value::Kind::Namespace;
        return v;
      });
    if (name == "raise_exception")
      return Value::make_function([this](CallArgs& a) -> Value {
        if (a.positional.empty()) failure("raise_exception() missing 1 required positional argument: 'message'");
        const std::string message = to_str(a.positional[0]);
        std::string one_line = message;
        for (auto& c : one_line)
          if (c == '\n' || c == '\r') c = ' ';
        throw TemplateRaised(fmt::format("{}: {}", label_, one_line), message);
      });
    if (name == "strftime_now")
      return Value::make_function([this](CallArgs& a) -> Value {
        if (a.positional.empty() || !a.positional[0].is_string()) failure("strftime_now() takes a format string");
        const std::time_t t = options_.now_epoch_seconds
                                  ? static_cast<std::time_t>(*options_.now_epoch_seconds)
                                  : std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
        std::tm tm{};
        if (options_.now_is_utc ? !gmtime_r(&t, &tm) : !localtime_r(&t, &tm)) failure("strftime_now(): no time");
        char buf[512];
        const std::size_t n = std::strftime(buf, sizeof buf, a.positional[0].text.c_str(), &tm);
        return Value(std::string(buf, n));
      });
    return std::nullopt;
  }

  static Value range(CallArgs& a) {
    std::int64_t start = 0, stop = 0, stride = 1;
    std::vector<std::int64_t> n;
    for (const auto& p : a.positional) {
      if (p.kind != Value::Kind::Int && p.kind != Value::Kind::Bool)
        failure(fmt::format("'{}' object cannot be interpreted as an integer", detail::kind_name(p)));
      n.push_back(p.kind == Value::Kind::Bool ? p.boolean : p.integer);
    }
    if (n.size() == 1) stop = n[0];
    else if (n.size() == 2 || n.size() == 3) start = n[0], stop = n[1];
    else failure("range() takes 1 to 3 arguments");
    if (n.size() == 3) stride = n[2];
    if (stride == 0) failure("range() arg 3 must not be zero");
    // The sandbox's cap: jinja2 refuses ranges longer than this.
    constexpr std::int64_t kMaxRange = 100000;
    const long double count = stride > 0 ? std::ceil((static_cast<long double>(stop) - start) / stride)
                                         : std::ceil((static_cast<long double>(start) - stop) / -stride);
    if (count > kMaxRange)
      failure("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    List items;
    if (count > 0) items.reserve(static_cast<std::size_t>(count));
    for (std::int64_t v = start; stride > 0 ? v < stop : v > stop; v += stride) items.emplace_back(v);
    return Value::make_list(std::move(items));
  }

  CallArgs eval_args(const Expr& e, Frame& frame, std::size_t first) {
    CallArgs a;
    for (std::size_t k = first; k < e.args.size(); ++k) a.positional.push_back(eval(*e.args[k], frame));
    for (const auto& [key, value] : e.keyword) a.keyword.emplace_back(key, eval(*value, frame));
    return a;
  }

  // Every string an expression yields is a new copy: counted, so that a big string copied in a loop
  // or held by nested macro calls is bounded like any value built (an operator's result is counted
  // as it is built, a condition's by the operand it is).
  Value eval(const Expr& e, Frame& frame) {
    Guard g(*this);
    step();
    Value v = eval_node(e, frame);
    if (v.is_string() && e.kind != Expr::Kind::Binary && e.kind != Expr::Kind::Cond) {
      detail::check_length(v.text.size());
      detail::charge_bytes(v.text.size());
    }
    return v;
  }

  // The value of `e` without a copy where it names a variable: `s[i]`, `s|length` in a loop read
  // s where it is (expressions assign nothing, so it stays there while the rest is evaluated).
  const Value& eval_ref(const Expr& e, Frame& frame, Value& holder) {
    if (e.kind == Expr::Kind::Name) {
      Guard g(*this);
      step();
      for (const Frame* f = &frame; f; f = f->parent)
        if (const Value* v = f->vars.find(e.name)) return *v;
    }
    holder = eval(e, frame);
    return holder;
  }

  Value eval_node(const Expr& e, Frame& frame) {
    Value holder;
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name, frame);
      case Expr::Kind::Attr:
        return detail::get_attr(eval_ref(*e.args[0], frame, holder), e.name);
      case Expr::Kind::Item: {
        const Value& obj = eval_ref(*e.args[0], frame, holder);
        return detail::get_item(obj, eval(*e.args[1], frame));
      }
      case Expr::Kind::Slice: {
        const Value& obj = eval_ref(*e.args[0], frame, holder);
        Value parts[3] = {Value::none(), Value::none(), Value::none()};
        for (int k = 0; k < 3; ++k)
          if (e.args[static_cast<std::size_t>(k) + 1]) parts[k] = eval(*e.args[static_cast<std::size_t>(k) + 1], frame);
        return detail::slice(obj, parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::Call: return eval_call(e, frame);
      case Expr::Kind::Filter: {
        const Value& target = eval_ref(*e.args[0], frame, holder);
        const CallArgs a = eval_args(e, frame, 1);
        return detail::apply_filter(e.name, target, a);
      }
      case Expr::Kind::Test: {
        const Value& target = eval_ref(*e.args[0], frame, holder);
        const CallArgs a = eval_args(e, frame, 1);
        return Value(detail::apply_test(e.name, target, a) != e.negated);
      }
      case Expr::Kind::Unary: return eval_unary(e, frame);
      case Expr::Kind::Binary: return eval_binary(e, frame);
      case Expr::Kind::Compare: return eval_compare(e, frame);
      case Expr::Kind::Cond:
        if (truthy(eval(*e.args[1], frame))) return eval(*e.args[0], frame);
        if (e.args[2]) return eval(*e.args[2], frame);
        return Value::undefined(fmt::format(
            "the inline if-expression on line {} evaluated to false and no else section was defined.", e.line));
      case Expr::Kind::ListLit:
      case Expr::Kind::TupleLit: {
        List items;
        for (const auto& a : e.args) items.push_back(eval(*a, frame));
        return Value::make_list(std::move(items), e.kind == Expr::Kind::TupleLit);
      }
      case Expr::Kind::DictLit: {
        detail::charge_bytes(e.args.size() * sizeof(Value));
        Dict d;
        for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = eval(*e.args[k], frame);
          if (key.is_sequence() || key.is_mapping() || key.is_undefined() || key.kind == Value::Kind::Function)
            failure(fmt::format("unhashable type: '{}'", detail::kind_name(key)));
          d.set(std::move(key), eval(*e.args[k + 1], frame));
        }
        return Value::make_dict(std::move(d));
      }
    }
    return {};
  }

  Value eval_call(const Expr& e, Frame& frame) {
    const Value callee = eval(*e.args[0], frame);
    CallArgs a = eval_args(e, frame, 1);
    if (callee.is_undefined()) failure(callee.text);
    if (callee.kind != Value::Kind::Function)
      failure(fmt::format("'{}' object is not callable", detail::kind_name(callee)));
    return (*callee.function)(a);
  }

  Value eval_unary(const Expr& e, Frame& frame) {
    const Value v = eval(*e.args[0], frame);
    if (e.name == "not") return Value(!truthy(v));
    if (v.is_undefined()) failure(v.text);
    if (v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool) {
      const std::int64_t i = v.kind == Value::Kind::Bool ? v.boolean : v.integer;
      if (e.name == "-" && i == INT64_MIN) failure("integer overflow");
      return Value(e.name == "-" ? -i : i);
    }
    if (v.kind == Value::Kind::Float) return Value(e.name == "-" ? -v.real : v.real);
    failure(fmt::format("bad operand type for unary {}: '{}'", e.name, detail::kind_name(v)));
  }

  Value eval_compare(const Expr& e, Frame& frame) {
    Value left = eval(*e.args[0], frame);
    for (std::size_t k = 0; k < e.ops.size(); ++k) {
      Value right = eval(*e.args[k + 1], frame);
      const std::string& op = e.ops[k];
      bool r;
      if (op == "==") r = equal(left, right);
      else if (op == "!=") r = !equal(left, right);
      else if (op == "in") r = detail::contains(right, left);
      else if (op == "not in") r = !detail::contains(right, left);
      else if (op == "<") r = detail::less(left, right);
      else if (op == ">") r = detail::less(right, left);
      else if (op == "<=") r = !detail::less(right, left);
      else r = !detail::less(left, right);
      if (!r) return Value(false);
      left = std::move(right);
    }
    return Value(true);
  }

  Value eval_binary(const Expr& e, Frame& frame);

  const std::string& label_;
  const RenderOptions& options_;
  Frame root_;
  detail::Budget budget_;
  std::string* out_ = nullptr;
  int depth_ = 0;
  int calls_ = 0;
};

Value Renderer::eval_binary(const Expr& e, Frame& frame) {
  const std::string& op = e.name;
  if (op == "and") {
    Value a = eval(*e.args[0], frame);
    return truthy(a) ? eval(*e.args[1], frame) : a;
  }
  if (op == "or") {
    Value a = eval(*e.args[0], frame);
    return truthy(a) ? a : eval(*e.args[1], frame);
  }
  const Value a = eval(*e.args[0], frame);
  const Value b = eval(*e.args[1], frame);
  return detail::binary_op(op, a, b);
}

}  // namespace

namespace {
// The byte offset of the first malformed UTF-8 sequence (overlong forms and surrogates included), or npos.
std::size_t invalid_utf8_at(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    std::uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (std::size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (b & 0x3f);
    }
    static constexpr std::uint32_t min_of[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_of[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += n;
  }
  return std::string_view::npos;
}
}  // namespace

Template::Template(std::string_view source, std::string label) : label_(std::move(label)) {
  // Python reads the template as text: bytes that are not UTF-8 are an error there too.
  if (const auto at = invalid_utf8_at(source); at != std::string_view::npos) {
    const auto line = 1 + std::count(source.begin(), source.begin() + static_cast<std::ptrdiff_t>(at), '\n');
    throw InputError(fmt::format("{}:{}: not valid UTF-8 (at byte {})", label_, line, at));
  }
  program_ = detail::parse(detail::lex(source, label_), label_);
}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Dict& variables, const RenderOptions& options) const {
  Renderer r(label_, options, variables);
  try {
    return r.run(program_->body);
  } catch (const Failure& f) {
    throw InputError(fmt::format("{}: {}", label_, f.what()));
  }
}

}  // namespace zoo::jinja
