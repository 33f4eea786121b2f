#pragma once
#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "model_options.hpp"
#include "zoo/chat_template.hpp"
#include "zoo/runtime.hpp"

namespace zoo::cli {

// Each command registers itself and sets `run` to its action; main() runs the chosen one and turns
// exceptions into exit codes (InputError 2, ValidationError 1).
using Action = std::function<int()>;

void add_plugins_command(CLI::App& app, Action& run);
void add_inspect_command(CLI::App& app, Action& run);
void add_plan_command(CLI::App& app, Action& run);
void add_trace_command(CLI::App& app, Action& run);
void add_generate_command(CLI::App& app, Action& run);
void add_compare_command(CLI::App& app, Action& run);
void add_validate_command(CLI::App& app, Action& run);
void add_bench_command(CLI::App& app, Action& run);
void add_synth_command(CLI::App& app, Action& run);
void add_tokenize_command(CLI::App& app, Action& run);
void add_tts_command(CLI::App& app, Action& run);
void add_template_command(CLI::App& app, Action& run);

// Chat input for `zoo template` and `zoo generate --chat` (cmd_template.cpp): the model directory
// of MODEL (a directory, or a model YAML's checkpoint directory); the --messages file (a list, or
// {"messages", "tools"}; - for stdin) and --tools file; --set KEY=JSON variables and --date.
std::filesystem::path chat_model_directory(const std::string& model);
ChatInput read_chat_input(const std::string& messages_file, const std::string& tools_file);
void apply_chat_settings(ChatInput& input, const std::vector<std::string>& settings, const std::string& date,
                         jinja::RenderOptions& options);

// MODEL argument -> tokenizer.json (a model directory, a tokenizer.json, or a model YAML whose
// checkpoint has one beside it). InputError naming what is missing.
std::filesystem::path tokenizer_json_for(const std::string& model);

}  // namespace zoo::cli
