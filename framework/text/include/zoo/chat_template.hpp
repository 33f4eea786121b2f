#pragma once
// A model's chat template, rendered as transformers' apply_chat_template renders it: the Jinja
// text of tokenizer_config.json or chat_template.jinja, given the conversation, the tools, the
// special tokens the tokenizer config names and any extra variables (enable_thinking, ...).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "zoo/jinja.hpp"

namespace zoo {

struct ChatMessage {
  std::string role;  // system, user, assistant, ...
  std::string content;
};

// What a template renders: `messages` is a list of message dicts ({role, content, tool_calls, ...},
// key order and number types as written); `tools` and `documents` are none when not given, as
// transformers passes them; `extra` holds further variables (chat_template_kwargs, --set).
struct ChatInput {
  jinja::Value messages = jinja::Value::make_list();
  jinja::Value tools = jinja::Value::none();
  jinja::Value documents = jinja::Value::none();
  bool add_generation_prompt = true;
  jinja::Dict extra;
};

class ChatTemplate {
 public:
  // Parses `text` (InputError "LABEL:LINE: ..." for a syntax error); `special_tokens` are the
  // bos_token, eos_token, ... variables (strings).
  ChatTemplate(std::string_view text, std::string label, jinja::Dict special_tokens = {});

  // The prompt text (then encoded without adding special tokens, as transformers does).
  // InputError "LABEL:LINE: ..." when rendering fails; jinja::TemplateRaised when the template
  // refuses the conversation with raise_exception.
  std::string render(const ChatInput& input, const jinja::RenderOptions& options = {}) const;
  // The shortcut for plain text messages.
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt = true) const;

  const std::string& label() const { return template_.label(); }
  const jinja::Dict& special_tokens() const { return special_tokens_; }
  // The template's text (what a server reads the model's reasoning and tool-call syntax from).
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  jinja::Template template_;
  jinja::Dict special_tokens_;
};

// The chat template of a model directory, chosen as transformers chooses it: `name` when given (an
// entry of a tokenizer_config.json list of {name, template}, or additional_chat_templates/NAME.jinja),
// else DIR/chat_template.jinja when present, else the `chat_template` of DIR/tokenizer_config.json
// (a string, or of a list the "tool_use" entry when `with_tools` and there is one, else "default").
// Special tokens come from tokenizer_config.json (strings or {"content": ...} objects). InputError
// naming the file when there is none or it is malformed.
ChatTemplate load_chat_template(const std::filesystem::path& model_dir, const std::string& name = {},
                                bool with_tools = false);

// A conversation file: a JSON list of message objects, or an object with "messages" (and
// optionally "tools"), read through the input layer. InputError naming the file.
jinja::Value load_json_input(const std::filesystem::path& file, std::string_view what);

}  // namespace zoo
