#include "zoo/alias_weight_source.hpp"
#include "zoo/model_spec.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <system_error>

#include "yaml_checks.hpp"
#include "zoo/compare.hpp"
#include "zoo/diagnostic_hook.hpp"
#include "zoo/checked.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"

namespace zoo {

namespace fs = std::filesystem;
namespace yc = yaml_checks;

namespace {

struct Reader {
  std::string label;  // the YAML path, as given
  fs::path base;      // relative paths in the YAML are relative to its directory

  fs::path resolve(const std::string& text) const {
    fs::path p(text);
    if (p.is_relative()) p = base / p;
    return p.lexically_normal();
  }

  // A path setting that must name an existing file or directory.
  fs::path existing(const YAML::Node& node, std::string_view what, bool want_file) const {
    const std::string text = yc::as_string(label, node, what);
    if (text.empty()) yc::fail(label, node, fmt::format("{} is empty", what));
    const fs::path p = resolve(text);
    std::error_code ec;
    const auto status = fs::status(p, ec);
    if (ec && ec.value() != ENOENT && ec.value() != ENOTDIR)  // a symlink loop, no permission, ...
      yc::fail(label, node, fmt::format("{} '{}': {}", what, text, describe_open_error(ec.value())));
    if (!fs::exists(status)) yc::fail(label, node, fmt::format("{} '{}' does not exist ({})", what, text, p.string()));
    if (want_file && fs::is_directory(status))
      yc::fail(label, node, fmt::format("{} '{}' is a directory, expected a file", what, text));
    return p;
  }

  void read_model(const YAML::Node& node, ModelSpec& spec) const {
    const auto entries = yc::map_entries(
        label, node, "model",
        {"plugin", "checkpoint", "device", "dtype", "max_context", "tensor_parallel", "batch_invariant"});
    bool have_checkpoint = false;
    const YAML::Node* dtype_node = nullptr;
    for (const auto& e : entries) {
      if (e.key == "plugin") {
        auto name = yc::as_string(label, e.value, "model.plugin");
        if (name.empty()) yc::fail(label, e.value, "model.plugin is empty (omit it to pick by config.json)");
        spec.plugin = std::move(name);
      } else if (e.key == "checkpoint") {
        spec.checkpoint = existing(e.value, "model.checkpoint", false);
        have_checkpoint = true;
      } else if (e.key == "device") {
        const auto text = yc::as_string(label, e.value, "model.device");
        spec.device_origin = yc::where(label, e.value.Mark());
        try {
          spec.device = Device::parse(text);
        } catch (const InputError&) {
          yc::fail(label, e.value, fmt::format("model.device '{}' is not cpu, cuda or cuda:N", text));
        }
      } else if (e.key == "dtype") {
        dtype_node = &e.value;
      } else if (e.key == "max_context") {
        spec.max_context = yc::as_int(label, e.value, "model.max_context");
        if (spec.max_context <= 0) yc::fail(label, e.value, "model.max_context must be a positive integer");
        // Bounded here, before any plugin multiplies it into a KV-cache size.
        if (spec.max_context > kMaxContextTokens)
          yc::fail(label, e.value,
                   fmt::format("model.max_context {} is larger than the limit of {} tokens", spec.max_context,
                               kMaxContextTokens));
      } else if (e.key == "tensor_parallel") {
        const std::int64_t ranks = yc::as_int(label, e.value, "model.tensor_parallel");
        if (ranks < 1 || ranks > kMaxTensorParallel)
          yc::fail(label, e.value,
                   fmt::format("model.tensor_parallel {} is outside 1..{} (ranks each layer is split over)",
                               ranks, kMaxTensorParallel));
        spec.tensor_parallel = static_cast<int>(ranks);
      } else if (e.key == "batch_invariant") {
        spec.batch_invariant = yc::as_bool(label, e.value, "model.batch_invariant");
      }
    }
    if (!have_checkpoint) yc::fail(label, node, "model.checkpoint is required (a checkpoint directory or file)");
    // The default depends on the device, which may come after dtype in the map.
    spec.dtype = spec.device.is_cpu() ? DType::F32 : DType::BF16;
    if (spec.device_origin.empty()) spec.device_origin = label + " (default)";
    spec.dtype_origin = label + " (default for the device)";
    if (dtype_node) {
      spec.dtype_origin = yc::where(label, dtype_node->Mark());
      const auto text = yc::as_string(label, *dtype_node, "model.dtype");
      const auto dtype = dtype_from_config_name(text);
      if (!dtype || (*dtype != DType::F32 && *dtype != DType::BF16 && *dtype != DType::F16))
        yc::fail(label, *dtype_node, fmt::format("model.dtype '{}' is not one of float32, bfloat16, float16", text));
      spec.dtype = *dtype;
    }
  }

  void read_plugins(const YAML::Node& node, ModelSpec& spec) const {
    for (const auto& e : yc::map_entries(label, node, "plugins", {"paths"})) {
      auto add = [&](const YAML::Node& item) {
        const auto text = yc::as_string(label, item, "plugins.paths entry");
        if (text.empty()) yc::fail(label, item, "plugins.paths entry is empty");
        // Not checked for existence: a search path may legitimately be absent (an unbuilt tree).
        spec.plugin_paths.push_back(resolve(text));
      };
      if (e.value.IsSequence()) {
        for (const auto& item : e.value) add(item);
      } else if (e.value.IsScalar()) {
        add(e.value);
      } else {
        yc::fail(label, e.value, fmt::format("plugins.paths must be a list of directories, got {}", yc::kind_name(e.value)));
      }
    }
  }

  AliasRule read_alias(const YAML::Node& node) const {
    constexpr std::string_view kForms = "{prefix: A, stored: B}, {name: A, stored: B}, {drop: B} or {drop_prefix: B}";
    const auto entries =
        yc::map_entries(label, node, "weights.aliases entry", {"prefix", "name", "stored", "drop", "drop_prefix"});
    const YAML::Node *prefix = nullptr, *name = nullptr, *stored = nullptr, *drop = nullptr, *drop_prefix = nullptr;
    for (const auto& e : entries) {
      if (e.key == "prefix") prefix = &e.value;
      if (e.key == "name") name = &e.value;
      if (e.key == "stored") stored = &e.value;
      if (e.key == "drop") drop = &e.value;
      if (e.key == "drop_prefix") drop_prefix = &e.value;
    }
    const int forms = (prefix != nullptr) + (name != nullptr) + (drop != nullptr) + (drop_prefix != nullptr);
    const bool needs_stored = prefix || name;
    if (forms != 1 || needs_stored != (stored != nullptr))
      yc::fail(label, node, fmt::format("an alias must be exactly one of {}", kForms));

    AliasRule rule;
    if (prefix) {
      rule.kind = AliasRule::Kind::Prefix;
      rule.requested = yc::as_string(label, *prefix, "alias prefix");
      rule.stored = yc::as_string(label, *stored, "alias stored");
      // An empty side is useful ("model." -> "" strips a prefix); both empty maps nothing.
      if (rule.requested.empty() && rule.stored.empty()) yc::fail(label, node, "alias prefix and stored are both empty");
    } else if (name) {
      rule.kind = AliasRule::Kind::Exact;
      rule.requested = yc::as_string(label, *name, "alias name");
      rule.stored = yc::as_string(label, *stored, "alias stored");
      if (rule.requested.empty()) yc::fail(label, *name, "alias name is empty");
      if (rule.stored.empty()) yc::fail(label, *stored, "alias stored is empty");
    } else {
      const YAML::Node& value = drop ? *drop : *drop_prefix;
      rule.kind = AliasRule::Kind::Drop;
      rule.prefix = drop_prefix != nullptr;
      rule.stored = yc::as_string(label, value, drop ? "alias drop" : "alias drop_prefix");
      if (rule.stored.empty()) yc::fail(label, value, "alias drop name is empty");
    }
    return rule;
  }

  void read_weights(const YAML::Node& node, ModelSpec& spec) const {
    for (const auto& e : yc::map_entries(label, node, "weights", {"aliases"})) {
      if (e.value.IsNull()) continue;
      if (!e.value.IsSequence())
        yc::fail(label, e.value, fmt::format("weights.aliases must be a list, got {}", yc::kind_name(e.value)));
      for (const auto& item : e.value) spec.aliases.push_back(read_alias(item));
    }
  }

  ValidationSpec read_validation(const YAML::Node& node) const {
    ValidationSpec v;
    bool have_request = false, have_golden = false;
    const auto entries = yc::map_entries(label, node, "validation", {"request", "golden", "points", "gates"});
    for (const auto& e : entries) {
      if (e.key == "request") {
        v.request = existing(e.value, "validation.request", true);
        have_request = true;
      } else if (e.key == "golden") {
        v.golden = existing(e.value, "validation.golden", true);
        have_golden = true;
      } else if (e.key == "points") {
        std::vector<std::string> points;
        auto add = [&](const YAML::Node& item) {
          const auto selection = PointSelection::parse(yc::as_string(label, item, "validation.points entry"));
          points.insert(points.end(), selection.globs().begin(), selection.globs().end());
        };
        if (e.value.IsSequence()) {
          for (const auto& item : e.value) add(item);
        } else if (e.value.IsScalar()) {
          add(e.value);
        } else {
          yc::fail(label, e.value,
                   fmt::format("validation.points must be a list or a comma-separated string, got {}",
                               yc::kind_name(e.value)));
        }
        if (points.empty()) yc::fail(label, e.value, "validation.points selects nothing");
        v.points = std::move(points);
      } else if (e.key == "gates") {
        parse_gates(e.value, label);  // reject bad gates now rather than after a long trace
        v.gates = e.value;
      }
    }
    if (!have_request) yc::fail(label, node, "validation.request is required (the request JSON to trace)");
    if (!have_golden) yc::fail(label, node, "validation.golden is required (the golden trace .safetensors)");
    return v;
  }
};

}  // namespace

ModelSpec load_model_spec(const fs::path& yaml_file) {
  std::error_code ec;
  if (fs::is_directory(yaml_file, ec)) return model_spec_for_directory(yaml_file);
  return parse_model_spec(read_text_file(yaml_file, "a model YAML file", kMaxYamlFileBytes), yaml_file);
}

ModelSpec parse_model_spec(const std::string& text, const fs::path& yaml_file) {
  Reader reader{yaml_file.string(), yaml_file.parent_path()};
  const std::string& label = reader.label;
  const YAML::Node root = yc::parse_text(text, label);
  if (root.IsNull()) yc::fail(label, YAML::Mark(), "empty config (expected a map with a 'model:' section)");

  ModelSpec spec;
  spec.file = yaml_file;
  bool have_model = false;
  const auto entries = yc::map_entries(label, root, "the config", {"model", "plugins", "weights", "validation"});
  // `model` first: the others do not depend on it, but its errors are the most useful to see first.
  for (const auto& e : entries)
    if (e.key == "model") {
      reader.read_model(e.value, spec);
      have_model = true;
    }
  if (!have_model) yc::fail(label, root, "missing required section 'model:'");
  for (const auto& e : entries) {
    if (e.key == "model" || e.value.IsNull()) continue;  // an empty optional section means "none"
    if (e.key == "plugins") reader.read_plugins(e.value, spec);
    if (e.key == "weights") reader.read_weights(e.value, spec);
    if (e.key == "validation") spec.validation = reader.read_validation(e.value);
  }
  return spec;
}

ModelSpec model_spec_for_directory(const fs::path& dir) {
  std::error_code ec;
  const auto status = fs::status(dir / "config.json", ec);
  if (ec && ec.value() != ENOENT)  // a symlink loop, no permission: not "without config.json"
    throw InputError(fmt::format("{}: {}", (dir / "config.json").string(), describe_open_error(ec.value())));
  if (!fs::is_regular_file(status))
    throw InputError(fmt::format("{}: is a directory without config.json, expected a model YAML or a Hugging Face "
                                 "model directory (config.json + *.safetensors)",
                                 dir.string()));
  // Exactly what a YAML holding only `model: {checkpoint: DIR}` gives: the defaults live in one place.
  ModelSpec spec;
  spec.file = dir;
  spec.checkpoint = dir.lexically_normal();
  spec.dtype = spec.device.is_cpu() ? DType::F32 : DType::BF16;
  return spec;
}

fs::path checkpoint_directory(const ModelSpec& spec) {
  std::error_code ec;
  return fs::is_directory(spec.checkpoint, ec) ? spec.checkpoint : spec.checkpoint.parent_path();
}

nlohmann::json load_hf_config(const fs::path& checkpoint) {
  std::error_code ec;
  const fs::path file = fs::is_directory(checkpoint, ec) ? checkpoint / "config.json" : checkpoint.parent_path() / "config.json";
  (void)fs::symlink_status(file, ec);
  if (ec.value() == ENOENT)
    throw InputError(fmt::format("{}: no such file (the checkpoint {} needs a HF config.json)", file.string(),
                                 checkpoint.string()));
  return load_json_object(file);
}

nlohmann::json load_json_object(const fs::path& file) {
  nlohmann::json config = read_json_file(file, "a JSON file");
  if (!config.is_object()) throw InputError(fmt::format("{}: expected a JSON object, got {}", file.string(), config.type_name()));
  return config;
}

}  // namespace zoo
