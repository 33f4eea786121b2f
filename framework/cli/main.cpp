// The `zoo` command line: subcommands in cmd_*.cpp, exit codes per docs (0 ok, 1 validation failed,
// 2 bad input or usage), and never a crash whatever the input.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <new>

#include "commands.hpp"
#include "zoo/error.hpp"
#include "zoo/format.hpp"

namespace zoo::cli {

SpecOverrides ModelOptions::overrides() const {
  SpecOverrides o;
  if (!device.empty()) o.device = Device::parse(device);
  if (!dtype.empty()) {
    auto parsed = dtype_from_config_name(dtype);
    if (!parsed) throw InputError(fmt::format("--dtype: unknown dtype '{}'", dtype));
    o.dtype = *parsed;
  }
  if (max_context != 0) o.max_context = max_context;  // 0: not given; negatives are rejected by open_model
  for (const auto& d : plugin_dirs) o.plugin_dirs.emplace_back(d);
  return o;
}

void add_model_options(CLI::App& command, ModelOptions& options) {
  command.add_option("config", options.config, "Model YAML")->required();
  command.add_option("--plugin-dir", options.plugin_dirs, "Extra plugin directory (repeatable)");
  command.add_option("--device", options.device, "Override the YAML's device: cpu, cuda, cuda:N");
  command.add_option("--dtype", options.dtype, "Override the YAML's compute dtype");
  // 0 and negative values were once silently ignored (the YAML's value ran instead): refuse them.
  command.add_option("--max-context", options.max_context, "KV-cache capacity per session (tokens)")
      ->check(CLI::PositiveNumber);
}

OpenedModel open_from_options(const ModelOptions& options, PluginRegistry& registry) {
  return open_model(load_model_spec(options.config), registry, options.overrides());
}

}  // namespace zoo::cli

int main(int argc, char** argv) {
  using namespace zoo::cli;
  CLI::App app{"Zoo: run and validate transformer models shipped as plugins"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every command");
  Action run;
  add_plugins_command(app, run);
  add_inspect_command(app, run);
  add_plan_command(app, run);
  add_trace_command(app, run);
  add_generate_command(app, run);
  add_compare_command(app, run);
  add_validate_command(app, run);
  add_bench_command(app, run);
  add_synth_command(app, run);
  add_tokenize_command(app, run);
  add_tts_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports a misspelt command as "A subcommand is required"; name the word instead.
    const auto extra = app.remaining();
    const bool misspelt = app.get_subcommands().empty() && !extra.empty() && !extra.front().starts_with('-');
    fmt::print(stderr, "zoo: error: {}\n",
               zoo::escape_text(misspelt ? fmt::format("unknown command '{}'", extra.front()) : e.what()));
    fmt::print(stderr, "Run with --help for usage.\n");
    return 2;
  }
  try {
    return run ? run() : 2;
  } catch (const zoo::ValidationError& e) {
    fmt::print(stderr, "zoo: validation failed: {}\n", zoo::escape_text(e.what()));
    return 1;
  } catch (const zoo::InputError& e) {
    // Messages quote names and paths from files; escaping here, in the one place every error is
    // printed, keeps each error one line and lets no crafted name print a line of its own.
    fmt::print(stderr, "zoo: error: {}\n", zoo::escape_text(e.what()));
    return 2;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "zoo: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "zoo: error: {}\n", zoo::escape_text(e.what()));
    return 2;
  }
}
