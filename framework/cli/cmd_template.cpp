// `zoo template MODEL --messages F.json`: the prompt the model's chat template renders for a
// conversation, printed exactly, so it can be compared with transformers' apply_chat_template.
#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <memory>

#include "commands.hpp"
#include "file_options.hpp"
#include "zoo/chat_template.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"
#include "zoo/model_spec.hpp"

namespace zoo::cli {

namespace fs = std::filesystem;

fs::path chat_model_directory(const std::string& model) {
  std::error_code ec;
  if (fs::is_directory(model, ec)) return model;
  return checkpoint_directory(load_model_spec(model));
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

void add_template_command(CLI::App& app, Action& run) {
  struct Options {
    std::string model, messages, tools, date, name;
    std::vector<std::string> settings;
    bool no_generation_prompt = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "template", "Print the prompt the model's chat template renders for a conversation (exactly, no newline added)");
  input_file(cmd->add_option("model", options->model, "Model directory (tokenizer_config.json, chat_template.jinja) or model YAML"),
             "a model directory or model YAML", {.directory_ok = true})
      ->required();
  input_file(cmd->add_option("--messages", options->messages,
                             "JSON list of messages (or {\"messages\": [...], \"tools\": [...]}); - for stdin"),
             "a messages JSON file", {.stdin_ok = true})
      ->required();
  input_file(cmd->add_option("--tools", options->tools, "JSON list of tool schemas"), "a tools JSON file");
  cmd->add_flag("--no-generation-prompt", options->no_generation_prompt,
                "Render without the assistant turn's opening (add_generation_prompt=false)");
  not_a_file(cmd->add_option("--set", options->settings,
                             "Template variable KEY=JSON, e.g. enable_thinking=false (repeatable)"));
  not_a_file(cmd->add_option("--date", options->date, "YYYY-MM-DD that strftime_now() formats (default: now)"));
  not_a_file(cmd->add_option("--template", options->name,
                             "Named template (tool_use, default, ...; default: tool_use with --tools when there is one)"));
  cmd->callback([&run, options] {
    run = [options] {
      ChatInput input = read_chat_input(options->messages, options->tools);
      input.add_generation_prompt = !options->no_generation_prompt;
      jinja::RenderOptions render_options;
      apply_chat_settings(input, options->settings, options->date, render_options);
      const ChatTemplate tmpl =
          load_chat_template(chat_model_directory(options->model), options->name, !input.tools.is_none());
      const std::string text = tmpl.render(input, render_options);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return 0;
    };
  });
}

}  // namespace zoo::cli
