#pragma once
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace zoo {

struct ChatMessage {
  std::string role;  // system, user, assistant, ...
  std::string content;
};

// The two chat formats nearly every byte-level BPE chat model uses, recognised from the template text
// of tokenizer_config.json and rendered without a Jinja engine:
//  - RoleBlocks: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, "<|im_start|>assistant\n" as
//    the generation prompt (ChatML), with the default system message the template may write in;
//  - RoleHeaders: "<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>" per message after
//    the bos token, "<|start_header_id|>assistant<|end_header_id|>\n\n" as the generation prompt,
//    contents trimmed when the template trims them.
// Any other template is refused: rendering it wrongly would be silent, refusing it is not.
enum class ChatFormat { RoleBlocks, RoleHeaders };

class ChatTemplate {
 public:
  // Recognises `template_text`; InputError "LABEL: ..." naming what was not understood.
  // `bos_token` is what the template's bos_token expands to.
  static ChatTemplate recognise(std::string_view template_text, std::string bos_token, const std::string& label);

  ChatFormat format() const { return format_; }
  const std::optional<std::string>& default_system() const { return default_system_; }
  // The prompt text for `messages` (then encoded without adding special tokens, as transformers does).
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt = true) const;

 private:
  ChatFormat format_ = ChatFormat::RoleBlocks;
  std::string bos_;                            // written first when the template writes bos_token
  std::optional<std::string> default_system_;  // written when the conversation has no system message
  bool trim_ = false;
};

// The chat template of a model directory: DIR/chat_template.jinja when present, else the
// `chat_template` of DIR/tokenizer_config.json (a string, or the entry named "default" of a list of
// {name, template}), with bos_token from tokenizer_config.json. InputError naming the file when there
// is none or it is not one of the supported forms.
ChatTemplate load_chat_template(const std::filesystem::path& model_dir);

}  // namespace zoo
