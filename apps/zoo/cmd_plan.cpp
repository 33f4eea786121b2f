#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"

namespace zoo::cli {

void add_plan_command(CLI::App& app, Action& run) {
  struct Options {
    ModelOptions model;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("plan", "Show which stored tensor feeds each model tensor (headers only)");
  add_model_options(*cmd, options->model);
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->callback([&run, options] {
    run = [options] {
      PluginRegistry registry;
      auto opened = open_from_options(options->model, registry);
      if (options->json) {
        auto out = opened.plan.to_json();
        out["model"] = opened.model->info().summary;
        fmt::print("{}\n", out.dump(2));
      } else {
        fmt::print("model: {}\n{}", opened.model->info().summary, opened.plan.table());
      }
      return opened.plan.ok() ? 0 : 1;
    };
  });
}

}  // namespace zoo::cli
