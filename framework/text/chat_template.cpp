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

// Real chat templates are a few KB (the longest tool-use ones ~20 KB).
constexpr std::size_t kMaxChatTemplateBytes = std::size_t{1} << 20;

// Whether the directory has an entry by that name, whatever it is: a FIFO, a directory, a dangling
// link or a symlink loop is then read (and refused by name) rather than skipped as absent.
bool has_entry(const std::filesystem::path& file) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(file, ec));
}

// The named special tokens transformers passes to every template (its SPECIAL_TOKENS_ATTRIBUTES),
// then the named extra ones: a string, or an AddedToken object {"content": "...", ...}.
jinja::Dict special_tokens_of(const nlohmann::json& config, const std::string& label) {
  jinja::Dict tokens;
  const auto add = [&](const std::string& key, const nlohmann::json& v) {
    if (v.is_null()) return;
    if (v.is_string())
      tokens.set(key, jinja::Value(v.get<std::string>()));
    else if (v.is_object() && v.contains("content") && v["content"].is_string())
      tokens.set(key, jinja::Value(v["content"].get<std::string>()));
    else
      throw InputError(fmt::format("{}: {} must be a string or an object with a string \"content\", got {}", label,
                                   key, escape_text(v.dump(), 100)));
  };
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
    if (config.contains(key)) add(key, config[key]);
  if (config.contains("extra_special_tokens") && config["extra_special_tokens"].is_object())
    for (const auto& [key, v] : config["extra_special_tokens"].items()) add(key, v);
  return tokens;
}

// transformers fills `reasoning_content` (and `thinking`, which gpt-oss templates read) from
// whichever of the names a message carries its reasoning under.
jinja::Value alias_reasoning(const jinja::Value& message) {
  if (message.kind != jinja::Value::Kind::Dict) return message;
  const jinja::Value* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"})
    if (const auto* v = message.dict->find(key); v && !v->is_none()) {
      reasoning = v;
      break;
    }
  if (!reasoning) return message;
  jinja::Dict d;
  d.set("thinking", *reasoning);
  for (const auto& [k, v] : message.dict->items) d.set(k, v);
  d.set("reasoning_content", *reasoning);
  return jinja::Value::make_dict(std::move(d));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view text, std::string label, jinja::Dict special_tokens)
    : source_(text), template_(text, std::move(label)), special_tokens_(std::move(special_tokens)) {}

std::string ChatTemplate::render(const ChatInput& input, const jinja::RenderOptions& options) const {
  if (!input.messages.is_sequence())
    throw InputError(fmt::format("{}: messages must be a list of message objects, got {}", label(),
                                 jinja::type_name(input.messages)));
  jinja::List messages;
  for (const auto& m : *input.messages.list) {
    if (m.kind != jinja::Value::Kind::Dict)
      throw InputError(fmt::format("{}: every message must be an object, got {}", label(), jinja::type_name(m)));
    messages.push_back(alias_reasoning(m));
  }
  // transformers: render(messages, tools, documents, add_generation_prompt, **special_tokens, **kwargs),
  // the caller's kwargs winning over the special tokens.
  jinja::Dict vars;
  vars.set("messages", jinja::Value::make_list(std::move(messages)));
  vars.set("tools", input.tools);
  vars.set("documents", input.documents);
  vars.set("add_generation_prompt", jinja::Value(input.add_generation_prompt));
  for (const auto& [k, v] : special_tokens_.items) vars.set(k, v);
  for (const auto& [k, v] : input.extra.items) vars.set(k, v);
  return template_.render(vars, options);
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  ChatInput input;
  for (const auto& m : messages) {
    jinja::Dict d;
    d.set("role", jinja::Value(m.role));
    d.set("content", jinja::Value(m.content));
    input.messages.list->push_back(jinja::Value::make_dict(std::move(d)));
  }
  input.add_generation_prompt = add_generation_prompt;
  return render(input);
}

ChatTemplate load_chat_template(const std::filesystem::path& model_dir, const std::string& name, bool with_tools) {
  const auto config_file = model_dir / "tokenizer_config.json";
  const auto label = config_file.string();
  nlohmann::json config = nlohmann::json::object();
  const bool have_config = has_entry(config_file);
  if (have_config) config = load_json_object(config_file);
  jinja::Dict tokens = special_tokens_of(config, label);
  const auto from_file = [&](const std::filesystem::path& file) {
    return ChatTemplate(read_text_file(file, "a chat template", kMaxChatTemplateBytes), file.string(), tokens);
  };

  // Named templates: entries of a tokenizer_config.json list, then additional_chat_templates/.
  std::vector<std::pair<std::string, std::string>> named;
  const nlohmann::json* value = nullptr;
  if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    value = &config["chat_template"];
    if (value->is_array()) {
      for (const auto& entry : *value)
        // Type checks first: json::value("name", "") throws a type_error on a non-string name.
        if (entry.is_object() && entry.contains("name") && entry["name"].is_string() && entry.contains("template") &&
            entry["template"].is_string())
          named.emplace_back(entry["name"].get<std::string>(), entry["template"].get<std::string>());
    } else if (!value->is_string()) {
      throw InputError(fmt::format("{}: chat_template must be a string or a list of {{name, template}}, got {}", label,
                                   value->type_name()));
    }
  }
  const auto find_named = [&](const std::string& n) -> std::optional<ChatTemplate> {
    for (const auto& [entry, text] : named)
      if (entry == n) return ChatTemplate(text, fmt::format("{} (chat_template \"{}\")", label, n), tokens);
    const auto extra = model_dir / "additional_chat_templates" / (n + ".jinja");
    if (n.find('/') == std::string::npos && n.find("..") == std::string::npos && has_entry(extra))
      return from_file(extra);
    return std::nullopt;
  };
  if (!name.empty()) {
    if (name == "default" && has_entry(model_dir / "chat_template.jinja")) return from_file(model_dir / "chat_template.jinja");
    if (auto t = find_named(name)) return std::move(*t);
    if (name == "default" && value && value->is_string()) return ChatTemplate(value->get<std::string>(), label, tokens);
    std::string names;
    for (const auto& [entry, text] : named) names += (names.empty() ? "" : ", ") + entry;
    throw InputError(fmt::format("{}: no chat template named \"{}\"{}", label, name,
                                 names.empty() ? std::string() : " (it has " + names + ")"));
  }
  if (with_tools)
    if (auto t = find_named("tool_use")) return std::move(*t);
  const auto jinja_file = model_dir / "chat_template.jinja";
  if (has_entry(jinja_file)) return from_file(jinja_file);
  if (!have_config)
    throw InputError(fmt::format("{}: no such file (--chat needs the model's chat template, in "
                                 "tokenizer_config.json or chat_template.jinja)",
                                 label));
  if (!value) throw InputError(fmt::format("{}: has no chat_template (the model may not be a chat model; drop --chat)", label));
  if (value->is_string()) return ChatTemplate(value->get<std::string>(), label, tokens);
  if (auto t = find_named("default")) return std::move(*t);
  throw InputError(fmt::format("{}: chat_template is a list without an entry named \"default\" (give --template NAME)",
                               label));
}

jinja::Value load_json_input(const std::filesystem::path& file, std::string_view what) {
  return jinja::parse_json(read_text_file(file, what, kMaxJsonFileBytes), file.string(), kMaxJsonDepth);
}

}  // namespace zoo
