// The options every model-running command shares, and opening the model they name.
#include "model_options.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "file_options.hpp"
#include "numeric_option.hpp"
#include "zoo/checked.hpp"
#include "zoo/error.hpp"
#include "zoo/model_spec.hpp"

namespace zoo::cli {

SpecOverrides ModelOptions::overrides() const {
  SpecOverrides o;
  if (!device.empty()) o.device = Device::parse(device);
  if (!dtype.empty()) {
    auto parsed = dtype_from_config_name(dtype);
    if (!parsed) throw InputError(fmt::format("--dtype: unknown dtype '{}'", dtype));
    o.dtype = *parsed;
  }
  if (max_context != 0) o.max_context = max_context;  // 0: not given; negatives are rejected by open_model
  if (tensor_parallel != 0) o.tensor_parallel = tensor_parallel;
  o.batch_invariant = batch_invariant;
  for (const auto& d : plugin_dirs) o.plugin_dirs.emplace_back(d);
  return o;
}

void add_model_options(CLI::App& command, ModelOptions& options) {
  // -m / --model as llama-cli takes it; the positional stays the usual form.
  input_file(command.add_option("model,-m,--model", options.config,
                                "Model YAML, or a Hugging Face model directory (config.json + safetensors)"),
             "a model YAML or model directory", {.directory_ok = true})
      ->required();
  // Defaults that depend on the model are written in the help text, not shown as "=0".
  search_path(command.add_option("--plugin-dir", options.plugin_dirs, "Extra plugin directory (repeatable)"),
              "a plugin directory or plugin")
      ->default_str("");
  not_a_file(command.add_option("--device", options.device, "cpu, cuda or cuda:N (default: the YAML's, else cpu)"));
  not_a_file(command.add_option("--dtype", options.dtype,
                     "Compute dtype: float32, bfloat16, float16 (default: the YAML's, else float32 on cpu, "
                     "bfloat16 on cuda)"));
  command.add_option("--max-context", options.max_context,
                     "KV-cache capacity per session in tokens (default: the YAML's, else 4096)")
      ->default_str("")
      ->check(integer_in(1));  // 0 and negative values were once silently ignored: refuse them
  command
      .add_option(
          "--tensor-parallel", options.tensor_parallel,
          "Ranks to split each layer over: threads on cpu, GPUs on cuda (default: the YAML's, else 1)")
      ->default_str("")
      ->check(integer_in(1, kMaxTensorParallel));
  command.add_flag("--batch-invariant", options.batch_invariant,
                   "Each sequence's results bitwise those of its run alone, whatever shares its batches; "
                   "slower (docs/architecture.md)");
  command.add_option("-t,--threads", options.threads, "CPU worker threads, 1..4096 (default: ZOO_NUM_THREADS, else every core)")
      ->default_str("")
      ->check(integer_in(1, 4096));
}

OpenedModel open_from_options(const ModelOptions& options, PluginRegistry& registry) {
  // The CPU pool is sized from ZOO_NUM_THREADS when first used, which is after this point (no
  // command runs CPU kernels before it opens its model): the flag is that variable, given here.
  if (options.threads > 0) ::setenv("ZOO_NUM_THREADS", std::to_string(options.threads).c_str(), 1);
  return open_model(load_model_spec(options.config), registry, options.overrides());
}

std::int64_t paged_context_limit(const ModelOptions& options, std::int64_t ctx_size, std::string_view flag) {
  const ModelSpec spec = load_model_spec(options.config);
  const nlohmann::json config = load_hf_config(spec.checkpoint);
  const auto positive = [](const nlohmann::json& object) -> std::int64_t {
    const auto& v = object.contains("max_position_embeddings") ? object["max_position_embeddings"] : nlohmann::json();
    return v.is_number_integer() && v.get<std::int64_t>() > 0 ? v.get<std::int64_t>() : 0;
  };
  const std::int64_t model_limit = positive(config);
  // A model whose text model has a config of its own (a multimodal checkpoint, a speech model) states its
  // limit there: it bounds what may be asked, though the default stays the spec's.
  const bool nested = model_limit == 0 && config.contains("text_config") && config["text_config"].is_object();
  const std::int64_t text_limit = nested ? positive(config["text_config"]) : model_limit;
  const std::int64_t asked = ctx_size > 0 ? ctx_size : options.max_context;
  if (asked > 0 && text_limit > 0 && asked > text_limit)
    throw InputError(fmt::format("{} {}: above the model's {}max_position_embeddings {}",
                                 ctx_size > 0 ? flag : std::string_view("--max-context"), asked,
                                 nested ? "text_config." : "", text_limit));
  return asked > 0 ? asked : model_limit > 0 ? model_limit : spec.max_context;
}

}  // namespace zoo::cli
