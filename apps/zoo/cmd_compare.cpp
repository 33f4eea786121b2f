#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "file_options.hpp"
#include "zoo/compare.hpp"

namespace zoo::cli {

void add_compare_command(CLI::App& app, Action& run) {
  struct Options {
    std::string golden, actual, gates;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("compare", "Compare a trace against a golden trace; exit 1 when a gate fails");
  input_file(cmd->add_option("golden", options->golden, "Golden trace (.safetensors)"), "a golden trace")->required();
  input_file(cmd->add_option("actual", options->actual, "Trace to check (.safetensors)"), "a trace")->required();
  input_file(cmd->add_option("--gates", options->gates, "Gates YAML (a `gates:` section)"), "a gates YAML");
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->callback([&run, options] {
    run = [options] {
      const auto gates = options->gates.empty() ? std::vector<Gate>{} : load_gates(options->gates);
      const auto report = compare_traces(options->golden, options->actual, gates);
      if (options->json)
        fmt::print("{}\n", report.to_json().dump(2));
      else
        fmt::print("{}", report.table());
      return report.passed() ? 0 : 1;
    };
  });
}

}  // namespace zoo::cli
