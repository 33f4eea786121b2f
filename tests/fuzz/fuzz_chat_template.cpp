// libFuzzer target: a chat template (Jinja text) rendered for a fixed conversation with tools. The
// template must parse and render, or throw zoo::InputError (syntax, undefined, a limit passed) or
// jinja::TemplateRaised (its raise_exception); anything else (another exception, a crash, a hang
// past the step budget, a stack overflow) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "zoo/chat_template.hpp"
#include "zoo/error.hpp"

namespace {

const zoo::ChatInput& conversation() {
  static const zoo::ChatInput input = [] {
    zoo::ChatInput in;
    in.messages = zoo::jinja::parse_json(
        R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi {{x}} \u00e9"},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f",
             "arguments": {"a": 3.0, "b": [1, null, true]}}}], "reasoning_content": "hm"},
            {"role": "tool", "name": "f", "content": "42"}, {"role": "user", "content": ""}])",
        "fuzz/messages.json");
    in.tools = zoo::jinja::parse_json(
        R"([{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object",
            "properties": {"a": {"type": "number"}}, "required": ["a"]}}}])",
        "fuzz/tools.json");
    in.extra.set("enable_thinking", zoo::jinja::Value(false));
    return in;
  }();
  return input;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  zoo::jinja::RenderOptions options;
  options.limits.max_steps = 200000;  // a hang is a timeout of the fuzzer: keep each run short
  options.limits.max_output_bytes = std::size_t{1} << 20;
  options.now_epoch_seconds = 0;
  try {
    zoo::jinja::Dict tokens;
    tokens.set("bos_token", zoo::jinja::Value("<s>"));
    const zoo::ChatTemplate tmpl(text, "fuzz/chat_template.jinja", tokens);
    (void)tmpl.render(conversation(), options);
  } catch (const zoo::InputError&) {
  } catch (const zoo::jinja::TemplateRaised&) {
  }
  return 0;
}
