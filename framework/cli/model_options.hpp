#pragma once
// The options every model-running command shares (-m, --plugin-dir, --device, --dtype,
// --max-context, -t) and opening the model they name (model_options.cpp).
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "zoo/runtime.hpp"

namespace zoo::cli {

struct ModelOptions {
  std::string config;
  std::vector<std::string> plugin_dirs;
  std::string device;  // empty: from the YAML
  std::string dtype;
  long long max_context = 0;
  int threads = 0;  // 0: ZOO_NUM_THREADS, else every core

  SpecOverrides overrides() const;
};

void add_model_options(CLI::App& command, ModelOptions& options);

// Loads the model YAML, opens the model through plugins, checks the plan.
OpenedModel open_from_options(const ModelOptions& options, PluginRegistry& registry);

}  // namespace zoo::cli
