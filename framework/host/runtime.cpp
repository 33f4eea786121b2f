#include "zoo/alias_weight_source.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/multimodal_text.hpp"
#include "zoo/runtime.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <unistd.h>

#include "zoo/checked.hpp"
#include "zoo/error.hpp"

namespace zoo {

namespace {

// Whether a plugin takes the checkpoint's own config.json (its model_type or architectures), so
// that nothing is unwrapped: the one named in the YAML, else the one config.json picks.
bool wrapper_served(const ModelSpec& spec, const nlohmann::json& config, const PluginRegistry& registry) {
  try {
    if (!spec.plugin) return (void)registry.resolve_config(config, "config.json"), true;
    const PluginInfo& named = registry.resolve(*spec.plugin);
    return &registry.resolve_config(config, "config.json") == &named;
  } catch (const InputError&) {
    return false;
  }
}

}  // namespace

OpenedModel open_model(ModelSpec spec, PluginRegistry& registry, const SpecOverrides& overrides) {
  if (overrides.device) {
    const bool dtype_was_default = spec.dtype == (spec.device.is_cpu() ? DType::F32 : DType::BF16);
    spec.device = *overrides.device;
    spec.device_origin = "--device";
    if (dtype_was_default) {
      spec.dtype = spec.device.is_cpu() ? DType::F32 : DType::BF16;
      spec.dtype_origin = "--device (its default dtype)";
    }
  }
  if (overrides.dtype) {
    spec.dtype = *overrides.dtype;
    spec.dtype_origin = "--dtype";
  }
  if (overrides.max_context) {
    // The same bound as model.max_context in the YAML, checked before any plugin sizes a cache.
    spec.max_context = check_range(*overrides.max_context, 1, kMaxContextTokens, "--max-context");
  }
  if (overrides.tensor_parallel)
    spec.tensor_parallel =
        static_cast<int>(check_range(*overrides.tensor_parallel, 1, kMaxTensorParallel, "--tensor-parallel"));
  if (overrides.batch_invariant) spec.batch_invariant = true;

  std::vector<PluginSearchEntry> dirs;
  for (const auto& dir : overrides.plugin_dirs) dirs.push_back({dir, "--plugin-dir"});
  for (const auto& dir : spec.plugin_paths) dirs.push_back({dir, "plugins.paths"});
  registry.discover(dirs);

  OpenedModel opened;
  opened.config = load_hf_config(spec.checkpoint);
  std::shared_ptr<const WeightSource> weights = open_checkpoint(spec.checkpoint);
  if (!spec.aliases.empty()) weights = std::make_shared<AliasWeightSource>(weights, spec.aliases);
  opened.weights = weights;

  ModelArgs args;
  args.config = opened.config;
  std::string label = (spec.checkpoint / "config.json").string();
  // A multimodal checkpoint that no plugin serves as a whole: its text model, if a plugin runs that.
  // Errors about the config the plugin reads then name text_config.
  if (auto text = wrapper_served(spec, opened.config, registry)
                      ? std::nullopt
                      : multimodal_text_model(opened.config, *weights, label)) {
    args.config = std::move(text->config);
    weights = std::make_shared<AliasWeightSource>(weights, std::move(text->aliases));
    label += " text_config";
    fmt::print(stderr, "zoo: note: {}\n", text->notice);
  }
  args.weights = weights;
  args.device = spec.device;
  args.dtype = spec.dtype;
  args.max_context = spec.max_context;
  args.tensor_parallel = spec.tensor_parallel;
  args.batch_invariant = spec.batch_invariant;
  const std::string plugin = spec.plugin ? *spec.plugin : registry.resolve_config(args.config, label).name;
  try {
    opened.model = registry.create_model(plugin, args);
  } catch (const SettingError& e) {
    // The device or dtype is the problem, not config.json: name where each was set.
    throw SettingError(fmt::format("{}: {} (device {} from {}; dtype {} from {})", spec.file.string(), e.what(),
                                   spec.device.str(), spec.device_origin.empty() ? "the caller" : spec.device_origin,
                                   dtype_name(spec.dtype), spec.dtype_origin.empty() ? "the caller" : spec.dtype_origin));
  } catch (const InputError& e) {
    // A plugin rejecting the config: say which file it came from.
    throw InputError(fmt::format("{}: {}", label, e.what()));
  }
  opened.plan = make_load_plan(opened.model->requirements(), opened.model->weight_source());
  opened.spec = std::move(spec);
  return opened;
}

namespace {

// One progress line, redrawn in place on a terminal and printed at most every few seconds otherwise.
class ProgressLine {
 public:
  explicit ProgressLine(std::string label) : label_(std::move(label)), tty_(isatty(STDERR_FILENO) != 0) {}

  void update(std::size_t done, std::size_t total) {
    const auto now = std::chrono::steady_clock::now();
    const bool finished = done >= total;
    if (!finished && now - last_ < (tty_ ? std::chrono::milliseconds(100) : std::chrono::seconds(5))) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double pct = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
    // MB for small models, GB for real ones.
    const bool small = total < 1'000'000'000;
    const double unit = small ? 1e6 : 1e9;
    const double amount = static_cast<double>(done) / unit;
    fmt::print(stderr, "{}{}: {:5.1f}%  {:.2f} / {:.2f} {}  {:.2f} {}/s{}", tty_ ? "\r" : "", label_, pct, amount,
               static_cast<double>(total) / unit, small ? "MB" : "GB", seconds > 0 ? amount / seconds : 0.0,
               small ? "MB" : "GB", tty_ && !finished ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  std::string label_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = start_;  // first line after the interval
};

}  // namespace

void load_model(OpenedModel& opened, bool progress) {
  if (!opened.plan.ok()) {
    throw ValidationError(fmt::format("{}: load plan has {} problem(s); run `zoo plan {}` for the table",
                                      opened.spec.file.string(), opened.plan.problem_count(),
                                      opened.spec.file.string()));
  }
  if (!progress) {
    opened.model->load();
    return;
  }
  ProgressLine line("loading " + opened.model->info().plugin + " weights");
  opened.model->load([&](std::size_t done, std::size_t total) { line.update(done, total); });
}

}  // namespace zoo
