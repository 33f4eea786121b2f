#pragma once
// A request's token ids from what a user gives: ids in a request JSON, or text (inline or from a
// file), or a whole conversation, optionally rendered through the model's chat template first. What
// `zoo generate` reads and what a server will read; messages name the CLI flags, which is how
// users meet these options.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "zoo/chat_template.hpp"
#include "zoo/request.hpp"
#include "zoo/tokenizer.hpp"

namespace zoo {

// Exactly one source is set; "-" as a file name reads standard input (size-capped).
struct PromptOptions {
  std::optional<std::string> request_file;   // --request: token ids
  std::optional<std::string> text;           // --prompt
  std::optional<std::string> text_file;      // --prompt-file
  std::optional<std::string> messages_file;  // --messages: a conversation (needs chat)
  bool chat = false;                         // render through the model's chat template
  std::string system;                        // a system message for a chat text prompt
  std::string template_name;                 // a named template of the model directory
  std::vector<std::string> template_settings;  // KEY=JSON variables for the template
};

// The model's tokenizer: `tokenizer_file` when given, else DIR/tokenizer.json; nullopt when there
// is none and none is `needed`. InputError naming the file.
std::optional<Tokenizer> open_model_tokenizer(const std::filesystem::path& model_dir, const std::string& tokenizer_file,
                                              bool needed);

// The request `options` describe, for the model in `model_dir` (chat templates come from there).
// Text needs `tokenizer`. InputError naming the flag or file at fault; an empty prompt is one.
Request build_request(const PromptOptions& options, const std::filesystem::path& model_dir,
                      const std::optional<Tokenizer>& tokenizer);

// A conversation file: a JSON list of messages, or {"messages": [...], "tools": [...]} ("-":
// stdin); `tools_file` (optional) replaces the tools. InputError naming the file.
ChatInput read_chat_input(const std::string& messages_file, const std::string& tools_file);

// --set KEY=JSON template variables into `input`; --date YYYY-MM-DD (optional) fixes what
// strftime_now() formats. InputError naming the flag.
void apply_chat_settings(ChatInput& input, const std::vector<std::string>& settings, const std::string& date,
                         jinja::RenderOptions& options);

}  // namespace zoo
