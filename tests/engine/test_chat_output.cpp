// A chat answer's text split into reasoning, content and tool calls, whole and streamed in pieces
// of every size: the pieces add up to the whole, and no delta holds part of a tag.
#include <catch2/catch.hpp>

#include <string>

#include "zoo/server/chat_output.hpp"

namespace zoo::engine {
namespace {

struct Result {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

// Streams `text` in pieces of `step` bytes; checks each delta against the parser's totals.
// `tags`: whether tags may be in the output (text that is no call, a syntax the model lacks).
Result stream(ChatSyntax syntax, bool tools, bool in_reasoning, const std::string& text, std::size_t step,
              std::string prefix = {}, bool tags = false) {
  ChatOutput out(syntax, tools, in_reasoning, std::move(prefix));
  Result r;
  const auto add = [&](const ChatDelta& d) {
    for (const auto* tag : {"<think>", "</think>", "<tool_call>", "</tool_call>"}) {
      if (tags) break;
      CHECK(d.content.find(tag) == std::string::npos);
      CHECK(d.reasoning.find(tag) == std::string::npos);
    }
    r.reasoning += d.reasoning;
    r.content += d.content;
    r.calls.insert(r.calls.end(), d.calls.begin(), d.calls.end());
  };
  for (std::size_t at = 0; at < text.size(); at += step) add(out.push(text.substr(at, step)));
  add(out.finish());
  CHECK(r.reasoning == out.reasoning());
  CHECK(r.content == out.content());
  CHECK(r.calls.size() == out.calls().size());
  return r;
}

const ChatSyntax kQwen{ReasoningSyntax::think, ToolCallSyntax::hermes};
const ChatSyntax kLlama{ReasoningSyntax::none, ToolCallSyntax::llama3_json};

TEST_CASE("chat output: <think> becomes reasoning, the rest content, in pieces of any size") {
  for (std::size_t step : {1, 2, 3, 7, 100}) {
    INFO("step " << step);
    auto r = stream(kQwen, false, false, "<think>\nThe user greets me.\n</think>\n\nHello there!", step);
    CHECK(r.reasoning == "\nThe user greets me.\n");
    CHECK(r.content == "Hello there!");
    // The prompt opened the block (a template that ends its generation prompt with <think>).
    r = stream(kQwen, false, true, "thinking...</think>\n\nAnswer: 4", step);
    CHECK(r.reasoning == "thinking...");
    CHECK(r.content == "Answer: 4");
    // No reasoning at all, and a '<' that opens no tag.
    r = stream(kQwen, false, false, "<b>bold</b> and 3 < 4", step);
    CHECK(r.reasoning.empty());
    CHECK(r.content == "<b>bold</b> and 3 < 4");
    // A model without the syntax keeps the tags as text.
    r = stream(ChatSyntax{}, true, false, "<think>x</think><tool_call>{}</tool_call>", step, {}, true);
    CHECK(r.content == "<think>x</think><tool_call>{}</tool_call>");
    // An answer cut inside its reasoning: all of it is reasoning.
    r = stream(kQwen, false, false, "<think>still thinking </thi", step);
    CHECK(r.reasoning == "still thinking </thi");
    CHECK(r.content.empty());
  }
}

TEST_CASE("chat output: Hermes <tool_call> JSON becomes calls, with content before and reasoning") {
  const std::string text =
      "<think>\nNeed the weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\", \"days\": 3.0, \"tags\": [\"a\", \"b\"]}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {\"zone\": \"CET\"}}\n</tool_call>";
  for (std::size_t step : {1, 4, 9, 1000}) {
    INFO("step " << step);
    const auto r = stream(kQwen, true, false, text, step);
    CHECK(r.reasoning == "\nNeed the weather.\n");
    CHECK(r.content == "Let me check.");
    REQUIRE(r.calls.size() == 2);
    CHECK(r.calls[0].name == "get_weather");
    CHECK(r.calls[0].arguments == R"({"city":"Paris","days":3.0,"tags":["a","b"]})");  // order and 3.0 kept
    CHECK(r.calls[1].name == "get_time");
    CHECK(r.calls[1].arguments == R"({"zone":"CET"})");
  }
  // Tools not asked for: the call is text.
  auto r = stream(kQwen, false, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", 3, {}, true);
  CHECK(r.calls.empty());
  CHECK(r.content == "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
  // Not a call (bad JSON, no name): returned as the model wrote it.
  r = stream(kQwen, true, false, "a <tool_call>{\"name\": 3}</tool_call> b", 2, {}, true);
  CHECK(r.calls.empty());
  CHECK(r.content == "a <tool_call>{\"name\": 3}</tool_call> b");
  // Cut off before </tool_call>: a whole JSON call still counts; a broken one is text.
  r = stream(kQwen, true, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n", 5);
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].arguments == R"({"x":1})");
  r = stream(kQwen, true, false, "<tool_call>\n{\"name\": \"f\", \"argu", 5, {}, true);
  CHECK(r.calls.empty());
  CHECK(r.content == "<tool_call>\n{\"name\": \"f\", \"argu");
  // Arguments given as JSON text are parsed; a forced call's opening comes from the prompt.
  r = stream(kQwen, true, false, "{\"q\": \"x\"}}\n</tool_call>", 3, "<tool_call>\n{\"name\": \"search\", \"arguments\": ");
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].name == "search");
  CHECK(r.calls[0].arguments == R"({"q":"x"})");
  ToolCall call;
  CHECK(parse_tool_call(R"({"name": "f", "arguments": "{\"a\": 2}"})", call));
  CHECK(call.arguments == R"({"a":2})");
  CHECK_FALSE(parse_tool_call(R"({"name": "f", "arguments": "not json"})", call));
  CHECK_FALSE(parse_tool_call(R"(["f"])", call));
}

TEST_CASE("chat output: Llama 3.1's JSON answers become calls, other text stays content") {
  for (std::size_t step : {1, 5, 1000}) {
    INFO("step " << step);
    auto r = stream(kLlama, true, false, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", step);
    REQUIRE(r.calls.size() == 1);
    CHECK(r.calls[0].name == "get_weather");
    CHECK(r.calls[0].arguments == R"({"city":"Oslo"})");
    CHECK(r.content.empty());
    r = stream(kLlama, true, false, "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"n\": 1}}", step);
    REQUIRE(r.calls.size() == 2);
    CHECK(r.calls[1].name == "b");
    r = stream(kLlama, true, false, "{not a call}", step);
    CHECK(r.calls.empty());
    CHECK(r.content == "{not a call}");
    r = stream(kLlama, true, false, "It is sunny. {\"name\": \"x\"}", step);
    CHECK(r.calls.empty());
    CHECK(r.content == "It is sunny. {\"name\": \"x\"}");
  }
}

TEST_CASE("chat output: the syntax is read from the chat template's source") {
  CHECK(detect_chat_syntax("{{ '<think>' }} {% if tools %}<tool_call>{% endif %}").reasoning == ReasoningSyntax::think);
  CHECK(detect_chat_syntax("<tool_call>").tools == ToolCallSyntax::hermes);
  CHECK(detect_chat_syntax("{{- \"Environment: ipython\\n\" }}").tools == ToolCallSyntax::llama3_json);
  CHECK(detect_chat_syntax("<|python_tag|>").tools == ToolCallSyntax::llama3_json);
  const ChatSyntax none = detect_chat_syntax("{{ messages[0].content }}");
  CHECK(none.reasoning == ReasoningSyntax::none);
  CHECK(none.tools == ToolCallSyntax::none);
  CHECK(std::string(tool_call_syntax_name(ToolCallSyntax::llama3_json)) == "llama3_json");
}

}  // namespace
}  // namespace zoo::engine
