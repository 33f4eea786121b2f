#include <fmt/format.h>

#include <memory>

#include "commands.hpp"

namespace zoo::cli {

void add_plugins_command(CLI::App& app, Action& run) {
  struct Options {
    std::vector<std::string> dirs;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("plugins", "List the plugins found and the model types they serve");
  cmd->add_option("--plugin-dir", options->dirs, "Extra plugin directory (repeatable)");
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->callback([&run, options] {
    run = [options] {
      PluginRegistry registry;
      registry.discover({options->dirs.begin(), options->dirs.end()});
      if (options->json)
        fmt::print("{}\n", plugins_json(registry).dump(2));
      else
        fmt::print("{}", plugins_table(registry));
      return 0;
    };
  });
}

}  // namespace zoo::cli
