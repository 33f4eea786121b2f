#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "zoo/checkpoint.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"
#include "zoo/safetensors.hpp"
#include "zoo/weight_source.hpp"

namespace zoo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// Names from an index are quoted in messages; control characters are not passed to the terminal.
std::string printable_name(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  if (text.size() > 200) out += "...";
  return out;
}

// Every tensor of one or more safetensors files, found by name. Shards stay mapped for as long
// as the source lives, so views stay valid.
class CheckpointSource final : public WeightSource {
 public:
  explicit CheckpointSource(std::string description) : description_(std::move(description)) {}

  void add(std::string name, std::shared_ptr<const SafetensorsFile> file, const SafetensorsEntry* entry) {
    if (std::find(files_.begin(), files_.end(), file) == files_.end()) files_.push_back(file);
    tensors_.insert_or_assign(std::move(name), Slot{file.get(), entry});
  }

  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    out.reserve(tensors_.size());
    for (const auto& [name, slot] : tensors_) out.push_back(name);
    return out;
  }

  std::optional<TensorInfo> info(std::string_view name) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return std::nullopt;
    const auto& e = *it->second.entry;
    return TensorInfo{e.name, it->second.file->path().string(), e.dtype, e.shape, e.end - e.begin};
  }

  TensorView view(std::string_view name) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw InputError(fmt::format("{} not found in {}", name, description_));
    return it->second.file->view(*it->second.entry);
  }

  std::string describe() const override { return description_; }

  std::map<std::string, std::string> metadata() const override {
    std::map<std::string, std::string> out;
    for (const auto& file : files_)
      for (const auto& [key, value] : file->metadata()) out.insert_or_assign(key, value);
    return out;
  }

 private:
  struct Slot {
    const SafetensorsFile* file;
    const SafetensorsEntry* entry;
  };
  std::string description_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, Slot, std::less<>> tensors_;
};

// A weight_map shard name must stay inside the checkpoint directory: a relative path with no ".."
// component. Anything else could make a crafted index open (and quote errors about) any file.
void check_shard_name(const std::string& shard, const std::string& tensor, const std::string& label) {
  const fs::path p(shard);
  bool escapes = shard.empty() || p.is_absolute() || p.has_root_name() || p.has_root_directory();
  for (const auto& part : p)
    if (part == "..") escapes = true;
  if (escapes)
    throw InputError(fmt::format("{}: weight_map entry for '{}' names '{}', which is not a file inside the "
                                 "checkpoint directory",
                                 label, printable_name(tensor), printable_name(shard)));
}

std::shared_ptr<const WeightSource> open_single(const fs::path& file, std::string description) {
  auto st = SafetensorsFile::open(file);
  auto source = std::make_shared<CheckpointSource>(std::move(description));
  for (const auto& entry : st->entries()) source->add(entry.name, st, &entry);
  return source;
}

std::shared_ptr<const WeightSource> open_index(const fs::path& index, std::string description) {
  const auto label = index.string();
  const auto weight_map = parse_shard_index(read_text_file(index, "a shard index JSON file", kMaxJsonFileBytes), label);
  const fs::path dir = index.parent_path();
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;  // each shard opened once
  auto source = std::make_shared<CheckpointSource>(std::move(description));
  for (const auto& [name, shard] : weight_map) {
    auto it = shards.find(shard);
    if (it == shards.end()) {
      const fs::path shard_path = dir / shard;
      std::error_code ec;
      (void)fs::symlink_status(shard_path, ec);
      if (ec.value() == ENOENT || ec.value() == ENOTDIR)
        throw InputError(fmt::format("{}: shard '{}' (holding '{}') not found at {}", label, printable_name(shard),
                                     printable_name(name), shard_path.string()));
      it = shards.emplace(shard, SafetensorsFile::open(shard_path)).first;
    }
    const auto* entry = it->second->find(name);
    if (!entry)
      throw InputError(fmt::format("{}: weight_map puts '{}' in shard '{}', which does not contain it", label,
                                   printable_name(name), printable_name(shard)));
    source->add(name, it->second, entry);
  }
  return source;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_shard_index(std::string_view text, const std::string& label) {
  const json root = parse_json_text(text, label);
  if (!root.is_object()) throw InputError(fmt::format("{}: index must be a JSON object", label));
  auto map_it = root.find("weight_map");
  if (map_it == root.end()) {
    // The likeliest mistake is the model's config.json given for its checkpoint: say so.
    const char* key = root.contains("model_type") ? "model_type" : root.contains("architectures") ? "architectures" : nullptr;
    if (key)
      throw InputError(fmt::format("{}: is a model config (it has \"{}\"), not a checkpoint; give the checkpoint "
                                   "directory, a .safetensors file or a .safetensors.index.json",
                                   label, key));
    throw InputError(fmt::format("{}: no \"weight_map\" in the index (a checkpoint is a directory, a .safetensors "
                                 "file or a .safetensors.index.json)",
                                 label));
  }
  if (!map_it->is_object()) throw InputError(fmt::format("{}: \"weight_map\" must be an object", label));
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(map_it->size());
  // Every entry is checked before any shard is opened.
  for (const auto& [name, shard_value] : map_it->items()) {
    if (!shard_value.is_string())
      throw InputError(fmt::format("{}: weight_map entry for '{}' must be a file name", label, printable_name(name)));
    const auto& shard = shard_value.get_ref<const std::string&>();
    check_shard_name(shard, name, label);
    out.emplace_back(name, shard);
  }
  return out;
}

std::shared_ptr<const WeightSource> open_checkpoint(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec && ec.value() != ENOENT && ec.value() != ENOTDIR)
    throw InputError(fmt::format("{}: {}", path.string(), describe_open_error(ec.value())));
  if (!fs::exists(status)) throw InputError(fmt::format("{}: no such file or directory", path.string()));
  const auto description = fmt::format("checkpoint {}", path.string());
  if (fs::is_directory(status)) {
    // Both present is ambiguous (transformers silently prefers the single file, which may be a
    // stale leftover next to a newer sharded save), so it is an error naming both.
    auto present = [&](const char* name) {
      std::error_code e;
      (void)fs::symlink_status(path / name, e);
      return !e;
    };
    const bool single = present(kSingleFile), index = present(kIndexFile);
    if (single && index)
      throw InputError(fmt::format("{}: directory holds both {} and {}; remove the one that is stale", path.string(),
                                   kSingleFile, kIndexFile));
    if (single) return open_single(path / kSingleFile, description);
    if (index) return open_index(path / kIndexFile, description);
    throw InputError(fmt::format("{}: directory holds neither {} nor {}", path.string(), kSingleFile, kIndexFile));
  }
  if (path.extension() == ".json") return open_index(path, description);
  return open_single(path, description);
}

}  // namespace zoo
