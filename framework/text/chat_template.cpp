#include "zoo/chat_template.hpp"

#include <fmt/format.h>

#include <system_error>

#include <nlohmann/json.hpp>

#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/input_file.hpp"
#include "zoo/model_spec.hpp"

namespace zoo {

namespace {

bool contains(std::string_view text, std::string_view what) { return text.find(what) != std::string_view::npos; }

// Jinja's `trim` (Python's str.strip() on the ASCII whitespace a prompt has in practice).
std::string trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\v\f";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

// A system message the template writes itself when the conversation has none: a string literal
// "<|im_start|>system\n TEXT <|im_end|>" whose TEXT is plain (no quote, so no expression).
std::optional<std::string> literal_default_system(std::string_view text) {
  constexpr std::string_view head = "<|im_start|>system";
  for (auto at = text.find(head); at != std::string_view::npos; at = text.find(head, at + 1)) {
    std::size_t i = at + head.size();
    if (text.substr(i, 2) == "\\n")
      i += 2;
    else if (text.substr(i, 1) == "\n")
      i += 1;
    else
      continue;
    const auto end = text.find("<|im_end|>", i);
    if (end == std::string_view::npos) continue;
    const std::string_view raw = text.substr(i, end - i);
    std::string value;
    bool expression = false;
    for (std::size_t k = 0; k < raw.size(); ++k) {
      const char c = raw[k];
      if (c == '\\' && k + 1 < raw.size()) {
        const char e = raw[++k];
        value += e == 'n' ? '\n' : e == 't' ? '\t' : e;  // \' \" \\ stand for themselves
      } else if (c == '\'' || c == '"' || c == '{' || c == '}') {
        expression = true;  // the text is built from variables: not a literal default
        break;
      } else {
        value += c;
      }
    }
    if (!expression && !value.empty()) return value;
  }
  return std::nullopt;
}

// Real chat templates are a few KB (the longest tool-use ones ~20 KB).
constexpr std::size_t kMaxChatTemplateBytes = std::size_t{1} << 20;

// Whether the directory has an entry by that name, whatever it is: a FIFO, a directory, a dangling
// link or a symlink loop is then read (and refused by name) rather than skipped as absent.
bool has_entry(const std::filesystem::path& file) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(file, ec));
}

}  // namespace

ChatTemplate ChatTemplate::recognise(std::string_view text, std::string bos_token, const std::string& label) {
  ChatTemplate t;
  const bool blocks = contains(text, "<|im_start|>") && contains(text, "<|im_end|>");
  const bool headers =
      contains(text, "<|start_header_id|>") && contains(text, "<|end_header_id|>") && contains(text, "<|eot_id|>");
  if (blocks == headers)
    throw InputError(fmt::format(
        "{}: unsupported chat template (zoo renders the <|im_start|>role ... <|im_end|> form and the "
        "<|start_header_id|>role<|end_header_id|> ... <|eot_id|> form, and runs no general Jinja); "
        "format the prompt yourself and pass it with --prompt",
        label));
  if (blocks) {
    t.format_ = ChatFormat::RoleBlocks;
    t.default_system_ = literal_default_system(text);
  } else {
    // The plain header form writes only the conversation; templates that write a system block of
    // their own (dates, tool preambles) need the Jinja they are written in.
    if (contains(text, "system<|end_header_id|>"))
      throw InputError(fmt::format(
          "{}: unsupported chat template: it writes a system block of its own (zoo renders the plain "
          "<|start_header_id|> form without Jinja); format the prompt yourself and pass it with --prompt",
          label));
    t.format_ = ChatFormat::RoleHeaders;
    t.trim_ = contains(text, "trim");
  }
  if (contains(text, "bos_token")) t.bos_ = std::move(bos_token);
  return t;
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  std::string out = bos_;
  if (format_ == ChatFormat::RoleBlocks) {
    const bool has_system = !messages.empty() && messages.front().role == "system";
    if (!has_system && default_system_) out += "<|im_start|>system\n" + *default_system_ + "<|im_end|>\n";
    for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
  } else {
    for (const auto& m : messages)
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + (trim_ ? trim(m.content) : m.content) +
             "<|eot_id|>";
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return out;
}

ChatTemplate load_chat_template(const std::filesystem::path& model_dir) {
  const auto config_file = model_dir / "tokenizer_config.json";
  nlohmann::json config = nlohmann::json::object();
  const bool have_config = has_entry(config_file);
  if (have_config) config = load_json_object(config_file);
  std::string bos;
  if (config.contains("bos_token") && !config["bos_token"].is_null()) {
    // A string, or an AddedToken object {"content": "...", ...}.
    const auto& b = config["bos_token"];
    if (b.is_string()) bos = b.get<std::string>();
    else if (b.is_object() && b.contains("content") && b["content"].is_string()) bos = b["content"].get<std::string>();
    else
      throw InputError(fmt::format("{}: bos_token must be a string or an object with a string \"content\", got {}",
                                   config_file.string(), escape_text(b.dump(), 100)));
  }

  const auto jinja_file = model_dir / "chat_template.jinja";
  if (has_entry(jinja_file))
    return ChatTemplate::recognise(read_text_file(jinja_file, "a chat template", kMaxChatTemplateBytes), bos,
                                   jinja_file.string());

  const auto label = config_file.string();
  if (!have_config)
    throw InputError(fmt::format("{}: no such file (--chat needs the model's chat template, in "
                                 "tokenizer_config.json or chat_template.jinja)",
                                 label));
  if (!config.contains("chat_template") || config["chat_template"].is_null())
    throw InputError(fmt::format("{}: has no chat_template (the model may not be a chat model; drop --chat)", label));
  const auto& value = config["chat_template"];
  if (value.is_string()) return ChatTemplate::recognise(value.get<std::string>(), bos, label);
  if (value.is_array()) {
    for (const auto& entry : value)
      // Type checks first: json::value("name", "") throws a type_error on a non-string name.
      if (entry.is_object() && entry.contains("name") && entry["name"].is_string() && entry["name"] == "default" &&
          entry.contains("template") && entry["template"].is_string())
        return ChatTemplate::recognise(entry["template"].get<std::string>(), bos, label);
    throw InputError(fmt::format("{}: chat_template is a list without an entry named \"default\"", label));
  }
  throw InputError(fmt::format("{}: chat_template must be a string or a list of {{name, template}}, got {}", label,
                               value.type_name()));
}

}  // namespace zoo
