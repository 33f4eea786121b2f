#pragma once
// A chat model's answer as an API returns it: the text split into reasoning (`<think>` ... `</think>`),
// content and tool calls, as the model's chat template has it write them (Qwen3 and Hermes:
// `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; Llama 3.1: the answer is a JSON object
// {"name": ..., "parameters": {...}}). ChatOutput takes the text as it streams and gives back what
// is safe to send: a tag split across two pieces is held until it is whole, a tool call until it is
// closed (one delta per call).
#include <string>
#include <string_view>
#include <vector>

namespace zoo::engine {

enum class ReasoningSyntax { none, think };
enum class ToolCallSyntax { none, hermes, llama3_json };
struct ChatSyntax {
  ReasoningSyntax reasoning = ReasoningSyntax::none;
  ToolCallSyntax tools = ToolCallSyntax::none;
};
// What a chat template's source says the model writes: `<think>` for reasoning; `<tool_call>` for
// Hermes-style calls, `<|python_tag|>` or "Environment: ipython" for Llama 3.1's JSON calls.
ChatSyntax detect_chat_syntax(std::string_view template_source);
const char* reasoning_syntax_name(ReasoningSyntax syntax);
const char* tool_call_syntax_name(ToolCallSyntax syntax);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text, compact, keys in the model's order
};

struct ChatDelta {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

class ChatOutput {
 public:
  // `tools`: parse tool calls (the request gave tools and did not say tool_choice "none").
  // `in_reasoning`: the prompt opened a reasoning block the answer continues (it ends in `<think>`).
  // `prefix`: text the prompt already holds of the answer (a forced call's opening), parsed as if
  // generated (a call it opens is returned as a call).
  ChatOutput(ChatSyntax syntax, bool tools, bool in_reasoning, std::string prefix = {});
  ChatDelta push(std::string_view text);
  ChatDelta finish();  // the end of the answer: what was held back, unclosed calls parsed or returned as text

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class Mode { reasoning, content, tool_call, json_calls };
  ChatDelta run(bool final);
  void emit_reasoning(ChatDelta& d, std::string text);
  void emit_content(ChatDelta& d, std::string text);
  // Text before the longest tail of the buffer that may begin `tag` (all of it when final).
  std::string safe_part(std::string_view tag, bool final);

  ChatSyntax syntax_;
  bool tools_;
  Mode mode_;
  std::string buffer_;
  bool content_started_ = false;  // the answer's content has begun (no <think> may open after)
  bool strip_newlines_ = false;   // after </think> or a call: newlines before the next text are dropped
  std::string space_before_call_;  // whitespace before a <tool_call>, content only if it is no call
  std::string reasoning_, content_;
  std::vector<ToolCall> calls_;
};

// A tool call's JSON ({"name": string, "arguments" or "parameters": object or JSON text}); false
// when it is not one.
bool parse_tool_call(std::string_view text, ToolCall& call);

}  // namespace zoo::engine
