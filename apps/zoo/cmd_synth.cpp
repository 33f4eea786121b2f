// `zoo synth`: a random checkpoint at a config's real shapes (the writer: zoo/synth_checkpoint.hpp).
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "commands.hpp"
#include "file_options.hpp"
#include "numeric_option.hpp"
#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/synth_checkpoint.hpp"

namespace zoo::cli {
namespace {

struct SynthOptions {
  std::string config, out, dtype = "bf16", plugin, extra;
  std::vector<std::string> plugin_dirs;
  std::uint64_t seed = 0;
  double shard_gb = 5.0;
  float stddev = 0.02f;
  bool quiet = false, force = false;
};

// `text` as one shell word: as is when it is plain, else single-quoted.
std::string shell_quote(const std::string& text) {
  const bool plain = !text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789_-./:=@%+,") == std::string::npos;
  if (plain) return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}


namespace fs = std::filesystem;

int synth(const SynthOptions& options) {
  if (!std::isfinite(options.stddev) || options.stddev < 0)
    throw InputError(fmt::format("--std: must be a finite number >= 0, got {}", options.stddev));
  const auto dtype = dtype_from_config_name(options.dtype);
  if (!dtype || !is_floating(*dtype) || *dtype == DType::F64)
    throw InputError(fmt::format("--dtype: '{}' is not one of bf16, f16, f32", options.dtype));
  const nlohmann::json config = load_json_object(options.config);

  PluginRegistry registry;
  registry.discover({options.plugin_dirs.begin(), options.plugin_dirs.end()});
  ModelArgs args;
  args.config = config;
  args.weights = empty_weight_source();
  const std::string plugin = options.plugin.empty() ? registry.resolve_config(config, options.config).name : options.plugin;
  auto model = registry.create_model(plugin, args);

  std::vector<SynthTensor> tensors = required_tensors(*model, options.stddev);
  if (!options.extra.empty()) {
    std::unordered_map<std::string, std::size_t> listed;  // name -> its index in the list
    const std::size_t required = tensors.size();
    for (std::size_t i = 0; i < required; ++i) listed.emplace(tensors[i].stored, SIZE_MAX);
    auto extras = load_extra_tensors(options.extra);
    for (std::size_t i = 0; i < extras.size(); ++i) {
      const auto [at, fresh] = listed.emplace(extras[i].stored, i);
      if (!fresh && at->second == SIZE_MAX)
        throw InputError(fmt::format("{}: tensors[{}]: tensor '{}' is already required by the plugin",
                                     options.extra, i, extras[i].stored));
      if (!fresh)
        throw InputError(fmt::format("{}: tensors[{}]: tensor '{}' is listed twice (first at tensors[{}])",
                                     options.extra, i, extras[i].stored, at->second));
      tensors.push_back(std::move(extras[i]));
    }
  }
  const std::filesystem::path out = options.out;
  SynthWrite write{*dtype, options.seed, options.shard_gb, options.force, nullptr};
  if (!options.quiet)
    write.on_shard = [](const std::filesystem::path& file, std::size_t count, std::size_t done, std::size_t total) {
      fmt::print(stderr, "synth: wrote {} ({} tensors), {} / {}\n", file.string(), count, format_bytes(done),
                 format_bytes(total));
    };
  const std::size_t total = write_synth_checkpoint(out, config, options.config, tensors, write);
  if (!options.quiet) fmt::print(stderr, "synth: {} tensors, {} in {}\n", tensors.size(), format_bytes(total), out.string());
  // The directory is a model as it stands; say how to run it (stdout: it is the command's result),
  // with the plugin directories it was made with, or the command would not find its plugin.
  std::string dir = shell_quote(out.string());
  for (const auto& plugin_dir : options.plugin_dirs) dir += " --plugin-dir " + shell_quote(plugin_dir);
  std::error_code ec;
  // `zoo bench` runs any model; `zoo generate` only one with a text head, and text needs a tokenizer.
  if (const auto why = model->text_generation_unsupported(); !why.empty())
    fmt::print("zoo bench {}\n(not `zoo generate`: {})\n", dir, why);
  else if (std::filesystem::exists(out / "tokenizer.json", ec))
    fmt::print("zoo generate {} --prompt 'Hello'\n", dir);
  else
    fmt::print("zoo bench {}\n(with a tokenizer.json in {}: zoo generate {} --prompt 'Hello')\n", dir,
               shell_quote(out.string()), dir);
  return 0;
}

}  // namespace

void add_synth_command(CLI::App& app, Action& run) {
  auto options = std::make_shared<SynthOptions>();
  auto* cmd = app.add_subcommand("synth", "Write a random checkpoint at a config.json's real shapes");
  input_file(cmd->add_option("--config", options->config, "HF config.json"), "a config.json")->required();
  output_directory(cmd->add_option("--out", options->out, "Output directory"), "a checkpoint directory")->required();
  not_a_file(cmd->add_option("--dtype", options->dtype, "bf16 (default), f16 or f32"));
  cmd->add_option("--seed", options->seed, "Random seed")->check(any_uint64());
  cmd->add_option("--shard-gb", options->shard_gb, "Shard size in GB (default 5)")->check(number_in(0.001, 1000.0));
  cmd->add_option("--std", options->stddev, "Standard deviation of weights (norms get mean 1)")
      ->check(number_in(0.0, kMaxSynthWeightScale));
  not_a_file(cmd->add_option("--plugin", options->plugin, "Plugin to ask for the tensor list (default: by model_type)"));
  input_file(cmd->add_option("--extra-tensors", options->extra,
                             "JSON listing tensors to add beyond the plugin's requirements (name, shape, mean, std)"),
             "a tensor list JSON");
  search_path(cmd->add_option("--plugin-dir", options->plugin_dirs, "Extra plugin directory (repeatable)"), "a plugin directory or plugin");
  cmd->add_flag("--force", options->force, "Write into a non-empty directory, replacing its model files");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] { run = [options] { return synth(*options); }; });
}

}  // namespace zoo::cli
