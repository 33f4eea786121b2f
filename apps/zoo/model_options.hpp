#pragma once
// The options every model-running command shares (-m, --plugin-dir, --device, --dtype,
// --max-context, -t) and opening the model they name (model_options.cpp).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zoo/runtime.hpp"

namespace zoo::cli {

struct ModelOptions {
  std::string config;
  std::vector<std::string> plugin_dirs;
  std::string device;  // empty: from the YAML
  std::string dtype;
  long long max_context = 0;
  long long tensor_parallel = 0;  // 0: the YAML's (default 1)
  bool batch_invariant = false;   // false: the YAML's (default off)
  int threads = 0;  // 0: ZOO_NUM_THREADS, else every core

  SpecOverrides overrides() const;
};

void add_model_options(CLI::App& command, ModelOptions& options);

// A sequence's context limit where KV pages are taken as tokens arrive (the batch runner): it
// costs nothing up front, so it is `ctx_size` (the option `flag`) or --max-context when given,
// else the model's max_position_embeddings; one above the model's is an InputError naming both.
std::int64_t paged_context_limit(const ModelOptions& options, std::int64_t ctx_size, std::string_view flag);

// Loads the model YAML, opens the model through plugins, checks the plan.
OpenedModel open_from_options(const ModelOptions& options, PluginRegistry& registry);

}  // namespace zoo::cli
