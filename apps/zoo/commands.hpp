#pragma once
#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "model_options.hpp"
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
void add_serve_command(CLI::App& app, Action& run);
void add_compare_command(CLI::App& app, Action& run);
void add_validate_command(CLI::App& app, Action& run);
void add_bench_command(CLI::App& app, Action& run);
void add_synth_command(CLI::App& app, Action& run);
void add_tokenize_command(CLI::App& app, Action& run);
void add_tts_command(CLI::App& app, Action& run);
void add_template_command(CLI::App& app, Action& run);

// The model directory of MODEL for `zoo template` (cmd_template.cpp): a directory, or a model
// YAML's checkpoint directory.
std::filesystem::path chat_model_directory(const std::string& model);

// MODEL argument -> tokenizer.json (a model directory, a tokenizer.json, or a model YAML whose
// checkpoint has one beside it). InputError naming what is missing.
std::filesystem::path tokenizer_json_for(const std::string& model);

}  // namespace zoo::cli
