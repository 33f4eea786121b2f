#include <catch2/catch.hpp>

#include <string>

#include "zoo/error.hpp"
#include "zoo/jinja.hpp"

using namespace zoo;
using namespace zoo::jinja;
using Catch::Contains;
using Catch::StartsWith;

namespace {

std::string render(const std::string& source, const std::string& json_vars = "{}", const RenderOptions& options = {}) {
  const Template t(source, "t.jinja");
  const Value vars = parse_json(json_vars, "vars");
  return t.render(*vars.dict, options);
}

std::string error_of(const std::string& source, const std::string& json_vars = "{}", const RenderOptions& options = {}) {
  try {
    render(source, json_vars, options);
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("no InputError for " << source);
  return {};
}

// Joins parts (GCC 12 warns falsely on chains of std::string operator+ with long strings).
std::string cat(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& p : parts) out += p;
  return out;
}

}  // namespace

// The expected strings here were printed by jinja2 3.1 in transformers' environment (the golden
// tests under [chat] check whole templates against transformers itself).
TEST_CASE("jinja prints values as Python does", "[jinja]") {
  CHECK(render("{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }}") == "[1, 'a', None, True, 1.5, {'k': \"it's\"}]");
  CHECK(render("{{ (1, 2) }}{{ 1e20 }} {{ 1e15 }} {{ 0.1 + 0.2 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} "
               "{{ -7 % 3 }} {{ 2 ** 10 }}") == "(1, 2)1e+20 1000000000000000.0 0.30000000000000004 3.5 2.0 3 -4 2 1024");
  CHECK(render("{{ x }}|{{ x|length }}|{{ 'a' in x }}|{{ x|trim }}") == "|0|False|");
  CHECK(render("{{ 'abc'[::-1] }} {{ 'h\xc3\xa9llo'|length }} {{ 'h\xc3\xa9llo'[1] }} {{ [1,2,3][-1] }} {{ [1,2,3,4][1:3] }}") ==
        "cba 5 \xc3\xa9 3 [2, 3]");
  CHECK(render("{{ True == 1 }} {{ 1 == 1.0 }} {{ none }} {{ True }}") == "True True None True");
  // Python's ints have no bound: results past 64 bits print exact.
  CHECK(render("{{ 2 ** 100 }} {{ 9223372036854775807 + 1 }} {{ -4294967296 * 4294967296 }} {{ 12345678901234567890123 }}") ==
        "1267650600228229401496703205376 9223372036854775808 -18446744073709551616 12345678901234567890123");
  CHECK_THROWS_WITH(render("{{ 2 ** 64 + 1 }}"), Contains("past 64 bits is not supported"));
  CHECK(render("{{ 'a b  c'.split() }} {{ 'a,b'.split(',') }} {{ 'xxhixx'.strip('x') }}") ==
        "['a', 'b', 'c'] ['a', 'b'] hi");
  CHECK(render("{{ v|tojson }}", R"({"v": {"b": 3.0, "a": [1, 12345678901234567890, "\u00e9\n"], "c": null}})") ==
        R"({"b": 3.0, "a": [1, 12345678901234567890, "é\n"], "c": null})");
  CHECK(render("{{ v|tojson(indent=2) }}", R"({"v": {"a": [1, {}], "b": []}})") ==
        "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
}

TEST_CASE("jinja scoping, loops and macros follow jinja2", "[jinja]") {
  // A set inside a loop body is local to its iteration; namespace carries state out.
  CHECK(render("{% for i in [1,2] %}{% if loop.first %}{% set v = 5 %}{% endif %}{{ v }}{% endfor %}{{ v }}") == "5");
  CHECK(render("{% set v = 1 %}{% for i in [1,2] %}{% set v = v + 1 %}{{ v }}{% endfor %}{{ v }}") == "221");
  CHECK(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}") == "6");
  CHECK(render("{% for i in [1,2,3] if i != 2 %}{{ loop.index }}{{ loop.last }}{{ loop.length }}{% endfor %}") ==
        "1False22True2");
  CHECK(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"a": 1, "b": [1]}})") == "a=1;b=[1];");
  CHECK(render("{% for x in [] %}a{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}") == "1");
  CHECK(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}") == "321");
  CHECK(render("{% macro g(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ g('x') }}{{ g('y', b='z') }}") == "xByz");
  CHECK(render("  {% if true %}\n  x\n  {% endif %}\n  {{ 1 }}\n") == "  x\n  1");
  CHECK(render("a {#- c -#} b {%- if 1 -%}  c  {%- endif %}") == "abc");
}

TEST_CASE("jinja undefined values fail where jinja2 fails", "[jinja]") {
  CHECK_THAT(error_of("{{ x.y }}"), StartsWith("t.jinja:1: 'x' is undefined"));
  CHECK_THAT(error_of("\n{{ x + 1 }}"), StartsWith("t.jinja:2: 'x' is undefined"));
  CHECK_THAT(error_of("{{ x|tojson }}"), Contains("not JSON serializable"));
  CHECK_THAT(error_of("{{ m.a.b }}", R"({"m": {}})"), Contains("'dict object' has no attribute 'a'"));
  CHECK_THAT(error_of("{{ x() }}"), Contains("'x' is undefined"));
  CHECK(render("{{ m.content is defined }}{{ y|default('q') }}{{ ''|default('q', true) }}", R"({"m": {}})") == "Falseqq");
  try {
    render("{{ raise_exception('bad role') }}");
    FAIL("no raise");
  } catch (const TemplateRaised& e) {
    CHECK(e.message() == "bad role");
    CHECK(std::string(e.what()) == "t.jinja: bad role");
  }
}

TEST_CASE("jinja renders are bounded", "[jinja]") {
  RenderOptions small;
  small.limits.max_steps = 100000;
  CHECK_THAT(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}", small),
             StartsWith("t.jinja:1: ") && Contains("steps"));
  CHECK_THAT(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), StartsWith("t.jinja:1: ") && Contains("deep"));
  CHECK_THAT(error_of("{{ range(100001)|length }}"), Contains("Range too big"));
  CHECK_THAT(error_of("{{ 'x' * 100000000 }}"), Contains("cap"));
  // Values nested without end (a list wrapped in itself in a loop) stop at a depth, not at the
  // end of the stack when printed, compared or destroyed.
  CHECK_THAT(error_of("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x == ns.x }}"),
             StartsWith("t.jinja:1: ") && Contains("nested more than 256 levels deep"));
  CHECK_THAT(error_of("{% set ns = namespace(x=none) %}{% for i in range(100000) %}{% set ns.x = namespace(p=ns.x) %}{% endfor %}"),
             Contains("nested more than 256 levels deep"));
  RenderOptions tiny;
  tiny.limits.max_output_bytes = 1000;
  CHECK_THAT(error_of("{% for i in range(1000) %}ab{% endfor %}", "{}", tiny), Contains("renders more than"));
  // The parser bounds nesting: 100000 brackets are an error, not a stack overflow.
  CHECK_THROWS_WITH(Template(cat({"{{ ", std::string(100000, '('), "1", std::string(100000, ')'), " }}"}), "deep.jinja"),
                    StartsWith("deep.jinja:1: syntax error") && Contains("nested"));
  CHECK_THROWS_WITH(Template(cat({"{{ ", std::string(100000, '['), std::string(100000, ']'), " }}"}), "deep.jinja"),
                    StartsWith("deep.jinja:1: syntax error") && Contains("nested"));
  CHECK_THROWS_WITH(Template(cat({"{{ ", std::string(100000, '-'), "1 }}"}), "deep.jinja"),
                    StartsWith("deep.jinja:1: syntax error") && Contains("nested"));
  CHECK_THROWS_WITH(Template(cat({"{{ x", std::string(100000, '|'), " }}"}), "deep.jinja"), StartsWith("deep.jinja:1: syntax error"));
  CHECK_THROWS_WITH(Template("{{ (1 }}", "open.jinja"), StartsWith("open.jinja:1: syntax error"));
  CHECK_THROWS_WITH(Template("ok \xc3\x28", "bytes.jinja"),
                    StartsWith("bytes.jinja:1: not valid UTF-8 (at byte 3)"));
  CHECK_THROWS_WITH(Template("\xed\xa0\x80", "bytes.jinja"),
                    StartsWith("bytes.jinja:1: not valid UTF-8 (at byte 0)"));
  // The line of the bad byte, as a syntax error's.
  CHECK_THROWS_WITH(Template("a\nb\n\xff", "bytes.jinja"),
                    StartsWith("bytes.jinja:3: not valid UTF-8 (at byte 4)"));
  std::string blocks;
  for (int i = 0; i < 5000; ++i) blocks += "{% if 1 %}";
  CHECK_THROWS_WITH(Template(blocks, "deep.jinja"), StartsWith("deep.jinja:1: syntax error") && Contains("nested"));
}
