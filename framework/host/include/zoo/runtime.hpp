#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "zoo/load_plan.hpp"
#include "zoo/model.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/plugin_registry.hpp"

namespace zoo {

// Overrides a command line may put over a model YAML.
struct SpecOverrides {
  std::optional<Device> device;
  std::optional<DType> dtype;
  std::optional<std::int64_t> max_context;
  std::optional<std::int64_t> tensor_parallel;
  bool batch_invariant = false;  // --batch-invariant: on whatever the YAML says
  std::vector<std::filesystem::path> plugin_dirs;
};

// A model built from a YAML spec, with its load plan computed and nothing loaded yet.
struct OpenedModel {
  ModelSpec spec;
  nlohmann::json config;                          // the checkpoint's config.json
  std::shared_ptr<const WeightSource> weights;    // checkpoint, with the YAML's aliases applied
  std::shared_ptr<Model> model;
  LoadPlan plan;
};

// Discovers plugins (YAML plugins.paths and overrides first), opens the checkpoint, applies the
// YAML's aliases, picks the plugin (spec.plugin, else config.json model_type/architectures),
// creates the model and computes its load plan. Nothing is read beyond headers and config.json.
OpenedModel open_model(ModelSpec spec, PluginRegistry& registry, const SpecOverrides& overrides = {});

// Throws ValidationError with the plan's problems when it is not clean, else loads the weights,
// reporting progress on stderr when `progress` is set.
void load_model(OpenedModel& opened, bool progress);

}  // namespace zoo
