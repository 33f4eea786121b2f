#include <fmt/format.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "file_options.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/format.hpp"
#include "zoo/weight_source.hpp"

namespace zoo::cli {
namespace {

int inspect(const std::string& path, bool json, bool summary_only) {
  auto source = open_checkpoint(path);
  const auto names = source->names();
  struct FileStats {
    std::size_t tensors = 0, bytes = 0;
  };
  std::map<std::string, FileStats> files;
  std::map<std::string, std::size_t> dtypes;
  std::size_t total = 0;
  nlohmann::json tensors = nlohmann::json::array();
  std::vector<TensorInfo> infos;
  for (const auto& name : names) {
    auto info = source->info(name);
    if (!info) continue;
    files[info->file].tensors++;
    files[info->file].bytes += info->nbytes;
    dtypes[std::string(dtype_name(info->dtype))]++;
    total += info->nbytes;
    tensors.push_back({{"name", name}, {"dtype", dtype_name(info->dtype)}, {"shape", info->shape},
                       {"bytes", info->nbytes}, {"file", info->file}});
    infos.push_back(*info);
  }
  if (json) {
    nlohmann::json out;
    out["path"] = path;
    out["tensor_count"] = names.size();
    out["total_bytes"] = total;
    out["dtypes"] = dtypes;
    out["files"] = nlohmann::json::array();
    for (const auto& [file, stats] : files)
      out["files"].push_back({{"path", file}, {"tensors", stats.tensors}, {"bytes", stats.bytes}});
    out["metadata"] = source->metadata();
    out["tensors"] = tensors;
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  // Names, metadata and paths come from the files: escaped so none can print a line of its own.
  fmt::print("{}\n", escape_text(source->describe()));
  fmt::print("  {} tensors, {} in {} file(s)\n", names.size(), format_bytes(total), files.size());
  for (const auto& [file, stats] : files)
    fmt::print("  file {}: {} tensors, {}\n", escape_text(file), stats.tensors, format_bytes(stats.bytes));
  std::string dtype_list;
  for (const auto& [dtype, count] : dtypes) dtype_list += fmt::format("{}{} x{}", dtype_list.empty() ? "" : ", ", dtype, count);
  fmt::print("  dtypes: {}\n", dtype_list);
  const auto metadata = source->metadata();
  for (const auto& [key, value] : metadata) fmt::print("  metadata {}: {}\n", escape_text(key), escape_text(value));
  if (summary_only) return 0;
  std::vector<std::string> shown;
  for (const auto& name : names) shown.push_back(escape_text(name));
  std::size_t width = 4;
  for (const auto& name : shown) width = std::max(width, name.size());
  fmt::print("\n  {:<{}}  {:<5}  {:<20}  {:>10}  {}\n", "name", width, "dtype", "shape", "size", "file");
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const auto& info = infos[i];
    fmt::print("  {:<{}}  {:<5}  {:<20}  {:>10}  {}\n", shown[i], width, dtype_name(info.dtype), shape_str(info.shape),
               format_bytes(info.nbytes), escape_text(std::filesystem::path(info.file).filename().string()));
  }
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, Action& run) {
  struct Options {
    std::string path;
    bool json = false, summary = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("inspect", "Validate and describe a checkpoint (dir, .safetensors or index)");
  input_file(cmd->add_option("path", options->path, "Checkpoint directory, .safetensors file or index .json"),
             "a checkpoint", {.directory_ok = true})
      ->required();
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->add_flag("--summary", options->summary, "Omit the per-tensor table");
  cmd->callback([&run, options] { run = [options] { return inspect(options->path, options->json, options->summary); }; });
}

}  // namespace zoo::cli
