#include <fmt/format.h>

#include <memory>

#include "commands.hpp"
#include "run_helpers.hpp"

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
  cmd->add_option("--request", options->request, "Request JSON")->required();
  cmd->add_option("--out", options->out, "Output trace (.safetensors)")->required();
  cmd->add_option("--points", options->points, "Comma-separated globs of tap points (default: the standard set)");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] {
    run = [options] {
      PluginRegistry registry;
      auto opened = open_from_options(options->model, registry);
      load_model(opened, !options->quiet);
      std::string points = options->points;
      if (points.empty()) {
        points = default_trace_points();
        for (const auto& extra : opened.model->extra_trace_points()) points += "," + extra;
      }
      auto recorder = trace_request(opened, options->request, PointSelection::parse(points));
      recorder.write(options->out, trace_metadata(opened));
      if (!options->quiet)
        fmt::print(stderr, "wrote {} tensors to {}\n", recorder.tensors().size(), options->out);
      return 0;
    };
  });
}

}  // namespace zoo::cli
