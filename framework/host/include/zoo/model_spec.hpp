#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "zoo/alias_weight_source.hpp"
#include "zoo/tensor.hpp"
#include "zoo/weight_source.hpp"

namespace zoo {

// The `validation:` section of a model YAML. Paths are resolved relative to the YAML file.
struct ValidationSpec {
  std::filesystem::path request;
  std::filesystem::path golden;
  std::optional<std::vector<std::string>> points;  // default: the golden's tensor names
  YAML::Node gates;  // parsed by parse_gates() (compare.hpp), which reports its own positions
};

// A model YAML (reference in docs/validation.md, "Model config and request files"). Unknown or
// duplicate keys, wrong types, missing required keys and missing files (checkpoint, validation
// request and golden) are InputErrors "FILE:LINE:COL: what is wrong"; so are bad gates.
struct ModelSpec {
  std::filesystem::path file;
  std::optional<std::string> plugin;  // else picked by config.json model_type/architectures
  std::filesystem::path checkpoint;
  Device device;
  DType dtype = DType::F32;
  // Where device and dtype were set, for messages: "FILE:LINE:COL" of the YAML key, a flag such as
  // "--dtype", or "FILE (default)".
  std::string device_origin, dtype_origin;
  std::int64_t max_context = 4096;
  int tensor_parallel = 1;  // ranks each layer is split over (model.tensor_parallel)
  bool batch_invariant = false;  // model.batch_invariant (zoo/batch_invariant.hpp)
  std::vector<std::filesystem::path> plugin_paths;
  std::vector<AliasRule> aliases;
  std::optional<ValidationSpec> validation;
};

// `yaml_file` may also be a Hugging Face model directory (config.json + safetensors): see
// model_spec_for_directory. Every command taking a model therefore takes either.
ModelSpec load_model_spec(const std::filesystem::path& yaml_file);
// The same for YAML text already read; `yaml_file` names it and anchors its relative paths.
ModelSpec parse_model_spec(const std::string& text, const std::filesystem::path& yaml_file);

// The spec of a bare model directory: the directory is the checkpoint, the plugin is picked by its
// config.json, and everything else takes the YAML defaults (cpu, float32, max_context 4096), which
// command-line overrides (--device, --dtype, --max-context) replace. InputError naming the directory
// when it has no config.json.
ModelSpec model_spec_for_directory(const std::filesystem::path& dir);

// The directory holding the checkpoint (and, for a HF model, its tokenizer.json and
// generation_config.json): the checkpoint itself or the directory of a checkpoint file.
std::filesystem::path checkpoint_directory(const ModelSpec& spec);

// Reads a checkpoint's config.json (directory) or the config.json beside a file. InputError on
// a missing or malformed file.
nlohmann::json load_hf_config(const std::filesystem::path& checkpoint);

// Reads a file holding one JSON object (a config.json anywhere). InputError naming the file when it
// is missing, unreadable, not JSON or not an object.
nlohmann::json load_json_object(const std::filesystem::path& file);

}  // namespace zoo
