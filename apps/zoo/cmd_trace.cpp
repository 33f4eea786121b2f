#include <fmt/format.h>

#include <memory>

#include "commands.hpp"
#include "file_options.hpp"
#include "run_helpers.hpp"
#include "zoo/error.hpp"

namespace zoo::cli {

void add_trace_command(CLI::App& app, Action& run) {
  struct Options {
    ModelOptions model;
    std::string request, out, points;
    bool quiet = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("trace", "Run a request and write the selected tap points to a safetensors trace");
  add_model_options(*cmd, options->model);
  input_file(cmd->add_option("--request", options->request, "Request JSON"), "a request JSON file")->required();
  output_file(cmd->add_option("--out", options->out, "Output trace (.safetensors)"), "a trace")->required();
  not_a_file(cmd->add_option("--points", options->points, "Comma-separated globs of tap points (default: the standard set)"));
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] {
    run = [options] {
      PluginRegistry registry;
      auto opened = open_from_options(options->model, registry);
      check_output("--out", options->out, opened, {{"request", options->request}});
      std::string points = options->points;
      const bool user_points = !points.empty();
      if (!user_points) {
        points = default_trace_points();
        for (const auto& extra : opened.model->extra_trace_points()) points += "," + extra;
      }
      const auto selection = PointSelection::parse(points);
      if (user_points && selection.globs().empty()) throw InputError("--points: selects no tap point");
      load_model(opened, !options->quiet);
      auto recorder = trace_request(opened, options->request, selection);
      // Explicit points must each record something: a typo would otherwise give a trace without
      // the tensor a later gate is meant to check. The default list may name points a model lacks.
      if (user_points) {
        std::vector<std::string> recorded;
        for (const auto& [name, tensor] : recorder.tensors()) recorded.push_back(name);
        require_every_glob_matches(selection, recorded, "--points", "tap point this model recorded");
      }
      recorder.write(options->out, trace_metadata(opened));
      if (!options->quiet)
        fmt::print(stderr, "wrote {} tensors to {}\n", recorder.tensors().size(), options->out);
      return 0;
    };
  });
}

}  // namespace zoo::cli
