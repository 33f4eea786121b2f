#include <fmt/format.h>

#include <memory>

#include "commands.hpp"
#include "file_options.hpp"

namespace zoo::cli {

void add_plugins_command(CLI::App& app, Action& run) {
  struct Options {
    std::string model;
    std::vector<std::string> dirs;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("plugins", "List the plugins found and the model types they serve");
  input_file(cmd->add_option("model", options->model,
                  "Model YAML: also search its plugins.paths, as commands running that model do"), "a model YAML");
  search_path(cmd->add_option("--plugin-dir", options->dirs, "Extra plugin directory (repeatable)"), "a plugin directory or plugin");
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->callback([&run, options] {
    run = [options] {
      // The same search order as open_model: --plugin-dir, then the YAML's plugins.paths, then
      // ZOO_PLUGIN_PATH and the built-in directory; the FROM column says which found each plugin.
      std::vector<PluginSearchEntry> dirs;
      for (const auto& dir : options->dirs) dirs.push_back({dir, "--plugin-dir"});
      if (!options->model.empty()) {
        for (const auto& dir : load_model_spec(options->model).plugin_paths) dirs.push_back({dir, "plugins.paths"});
      }
      PluginRegistry registry;
      registry.discover(dirs);
      if (options->json)
        fmt::print("{}\n", plugins_json(registry).dump(2));
      else
        fmt::print("{}", plugins_table(registry));
      return 0;
    };
  });
}

}  // namespace zoo::cli
