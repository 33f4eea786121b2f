#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "run_helpers.hpp"
#include "zoo/compare.hpp"
#include "zoo/error.hpp"
#include "zoo/safetensors.hpp"

namespace zoo::cli {

void add_validate_command(CLI::App& app, Action& run) {
  struct Options {
    ModelOptions model;
    std::string out;
    bool json = false, quiet = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("validate", "Run the YAML's validation request and gate it against its golden");
  add_model_options(*cmd, options->model);
  cmd->add_option("--out", options->out, "Also keep the trace here");
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] {
    run = [options] {
      PluginRegistry registry;
      auto opened = open_from_options(options->model, registry);
      if (!opened.spec.validation)
        throw InputError(fmt::format("{}: no `validation:` section", opened.spec.file.string()));
      const auto& validation = *opened.spec.validation;
      const auto gates = parse_gates(validation.gates, opened.spec.file.string());
      // Trace exactly what the golden holds (or the YAML's points), so nothing is left unchecked.
      if (!options->out.empty()) check_output("--out", options->out, opened);
      const auto golden = SafetensorsFile::open(validation.golden);
      std::vector<std::string> golden_names;
      for (const auto& entry : golden->entries()) golden_names.push_back(entry.name);
      std::vector<std::string> points = golden_names;
      if (validation.points) {
        points = *validation.points;
        // A point that selects nothing is a typo, not a smaller check.
        require_every_glob_matches(PointSelection(points), golden_names,
                                   fmt::format("{}: validation.points", opened.spec.file.string()),
                                   fmt::format("tensor of the golden {}", validation.golden.string()));
      }
      load_model(opened, !options->quiet && !options->json);
      auto recorder = trace_request(opened, validation.request, PointSelection(points));
      if (!options->out.empty()) recorder.write(options->out, trace_metadata(opened));
      NamedTensors golden_tensors, actual_tensors;
      for (const auto& entry : golden->entries()) golden_tensors.emplace_back(entry.name, golden->view(entry));
      for (const auto& [name, tensor] : recorder.tensors()) actual_tensors.emplace_back(name, tensor.view());
      const auto report = compare_trace_tensors(golden_tensors, actual_tensors, gates,
                                                validation.points ? *validation.points : std::vector<std::string>{});
      if (options->json)
        fmt::print("{}\n", report.to_json().dump(2));
      else
        fmt::print("{}{}\n", report.table(),
                   report.passed()      ? "VALIDATION PASSED"
                   : report.evaluated() ? "VALIDATION FAILED"
                                        : "VALIDATION FAILED: no gate was evaluated (add validation.gates)");
      return report.passed() ? 0 : 1;
    };
  });
}

}  // namespace zoo::cli
