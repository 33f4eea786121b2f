#include "zoo/prompt_input.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <ctime>

#include "zoo/error.hpp"
#include "zoo/input_file.hpp"

namespace zoo {

namespace {

// All of a file, or of stdin for "-", through the input layer: a FIFO, device or directory is an
// error naming it, and either is capped in size.
std::string read_all(const std::string& file, std::string_view what, std::size_t max_bytes) {
  if (file == "-") return read_stdin_text(what, max_bytes);
  return read_text_file(file, what, max_bytes);
}

Request encode_prompt(const std::optional<Tokenizer>& tokenizer, const std::string& text, const std::string& label) {
  if (!tokenizer) throw InputError(fmt::format("{}: a text prompt needs the model's tokenizer.json", label));
  Request request;
  request.file = label;
  try {
    request.input_ids = tokenizer->encode(text);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", label, e.what()));
  }
  if (request.input_ids.empty()) throw InputError(fmt::format("{}: the prompt is empty", label));
  return request;
}

}  // namespace

std::optional<Tokenizer> open_model_tokenizer(const std::filesystem::path& model_dir, const std::string& tokenizer_file,
                                              bool needed) {
  std::error_code ec;
  const std::filesystem::path file =
      tokenizer_file.empty() ? model_dir / "tokenizer.json" : std::filesystem::path(tokenizer_file);
  if (tokenizer_file.empty() && !std::filesystem::exists(file, ec)) {
    if (!needed) return std::nullopt;
    throw InputError(fmt::format("{}: no such file (text prompts need the model's tokenizer.json; give one with "
                                 "--tokenizer, or token ids with --request)",
                                 file.string()));
  }
  return Tokenizer::from_file(file);
}

Request build_request(const PromptOptions& o, const std::filesystem::path& model_dir,
                      const std::optional<Tokenizer>& tokenizer) {
  const int given = o.request_file.has_value() + o.text.has_value() + o.text_file.has_value() +
                    o.messages_file.has_value();
  if (given != 1) throw InputError("generate: give exactly one of --prompt, --prompt-file, --messages and --request");
  if (!o.chat && (!o.template_settings.empty() || !o.template_name.empty()))
    throw InputError("--set, --template: need --chat (they are the chat template's)");
  if (o.request_file) {
    if (o.chat) throw InputError("--chat: applies to text prompts (--prompt, --prompt-file), not to --request ids");
    return *o.request_file == "-" ? parse_request(read_all("-", "a request JSON", kMaxJsonFileBytes), "<stdin>")
                                  : load_request(*o.request_file);
  }
  if (o.messages_file) {
    // A whole conversation, rendered by the model's chat template as `zoo template` renders it.
    if (!o.chat) throw InputError("--messages: needs --chat (the conversation is rendered by the chat template)");
    if (!o.system.empty()) throw InputError("--system: give the system message in the --messages file");
    ChatInput input = read_chat_input(*o.messages_file, "");
    jinja::RenderOptions render_options;
    apply_chat_settings(input, o.template_settings, "", render_options);
    const auto tmpl = load_chat_template(model_dir, o.template_name, !input.tools.is_none());
    return encode_prompt(tokenizer, tmpl.render(input, render_options),
                         *o.messages_file == "-" ? "<stdin>" : *o.messages_file);
  }
  const std::string label = o.text ? std::string("--prompt") : (*o.text_file == "-" ? "<stdin>" : *o.text_file);
  std::string text = o.text ? *o.text : read_all(*o.text_file, "a prompt text file", kMaxTextFileBytes);
  if (o.chat) {
    ChatInput input;
    for (const auto& [role, content] : {std::pair<const char*, const std::string*>{"system", &o.system}, {"user", &text}}) {
      if (role == std::string_view("system") && o.system.empty()) continue;
      jinja::Dict m;
      m.set("role", jinja::Value(role));
      m.set("content", jinja::Value(*content));
      input.messages.list->push_back(jinja::Value::make_dict(std::move(m)));
    }
    jinja::RenderOptions render_options;
    apply_chat_settings(input, o.template_settings, "", render_options);
    text = load_chat_template(model_dir, o.template_name).render(input, render_options);
  } else if (!o.system.empty()) {
    throw InputError("--system: needs --chat (a system message is part of a chat template)");
  }
  return encode_prompt(tokenizer, text, label);
}

ChatInput read_chat_input(const std::string& messages_file, const std::string& tools_file) {
  ChatInput input;
  const std::string label = messages_file == "-" ? "<stdin>" : messages_file;
  const jinja::Value messages =
      messages_file == "-"
          ? jinja::parse_json(read_stdin_text("a messages JSON", kMaxJsonFileBytes), label, kMaxJsonDepth)
          : load_json_input(messages_file, "a messages JSON file");
  // A list of messages, or a request-shaped object {"messages": [...], "tools": [...]}.
  if (messages.is_mapping()) {
    const auto* m = messages.dict->find("messages");
    if (!m || !m->is_sequence())
      throw InputError(fmt::format("{}: expected a JSON list of messages, or an object with a \"messages\" list", label));
    input.messages = *m;
    if (const auto* t = messages.dict->find("tools"); t && !t->is_none()) input.tools = *t;
  } else if (messages.is_sequence()) {
    input.messages = messages;
  } else {
    throw InputError(fmt::format("{}: expected a JSON list of messages, got {}", label, jinja::type_name(messages)));
  }
  for (std::size_t k = 0; k < input.messages.list->size(); ++k)
    if (!(*input.messages.list)[k].is_mapping())
      throw InputError(fmt::format("{}: message {} is not a JSON object", label, k));
  if (!tools_file.empty()) {
    const jinja::Value tools = load_json_input(tools_file, "a tools JSON file");
    if (!tools.is_sequence())
      throw InputError(fmt::format("{}: expected a JSON list of tools, got {}", tools_file, jinja::type_name(tools)));
    input.tools = tools;
  }
  return input;
}

namespace {

// --set KEY=JSON: a template variable (enable_thinking=false, date_string="1 Jan 2025").
void add_setting(ChatInput& input, const std::string& setting) {
  const auto eq = setting.find('=');
  const std::string key = setting.substr(0, eq);
  bool ident = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0]));
  for (const char c : key) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (eq == std::string::npos || !ident)
    throw InputError(fmt::format("--set {}: expected KEY=JSON with KEY a name (e.g. enable_thinking=false)", setting));
  input.extra.set(key, jinja::parse_json(setting.substr(eq + 1), fmt::format("--set {}", key)));
}

// --date YYYY-MM-DD: strftime_now() formats that day's midnight (UTC), so renders are reproducible.
std::int64_t parse_date(const std::string& date) {
  std::tm tm{};
  int y = 0, m = 0, d = 0;
  char tail = 0;
  if (std::sscanf(date.c_str(), "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3 || date.size() != 10 || m < 1 || m > 12 ||
      d < 1 || d > 31 || y < 1900)
    throw InputError(fmt::format("--date {}: expected YYYY-MM-DD", date));
  tm.tm_year = y - 1900;
  tm.tm_mon = m - 1;
  tm.tm_mday = d;
  const std::time_t t = timegm(&tm);
  std::tm check{};
  gmtime_r(&t, &check);
  if (check.tm_mday != d) throw InputError(fmt::format("--date {}: no such day", date));
  return static_cast<std::int64_t>(t);
}

}  // namespace

void apply_chat_settings(ChatInput& input, const std::vector<std::string>& settings, const std::string& date,
                         jinja::RenderOptions& options) {
  for (const auto& s : settings) add_setting(input, s);
  if (!date.empty()) {
    options.now_epoch_seconds = parse_date(date);
    options.now_is_utc = true;
  }
}

}  // namespace zoo
