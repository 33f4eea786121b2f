// `zoo template MODEL --messages F.json`: the prompt the model's chat template renders for a
// conversation, printed exactly, so it can be compared with transformers' apply_chat_template.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "file_options.hpp"
#include "zoo/chat_template.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/prompt_input.hpp"

namespace zoo::cli {

namespace fs = std::filesystem;

fs::path chat_model_directory(const std::string& model) {
  std::error_code ec;
  if (fs::is_directory(model, ec)) return model;
  return checkpoint_directory(load_model_spec(model));
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
