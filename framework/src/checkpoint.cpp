#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "zoo/error.hpp"
#include "zoo/safetensors.hpp"
#include "zoo/weight_source.hpp"

namespace zoo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

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

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("{}: read failed", path.string()));
  return std::move(text).str();
}

std::shared_ptr<const WeightSource> open_single(const fs::path& file, std::string description) {
  auto st = SafetensorsFile::open(file);
  auto source = std::make_shared<CheckpointSource>(std::move(description));
  for (const auto& entry : st->entries()) source->add(entry.name, st, &entry);
  return source;
}

std::shared_ptr<const WeightSource> open_index(const fs::path& index, std::string description) {
  const auto label = index.string();
  json root;
  try {
    root = json::parse(read_text(index));
  } catch (const json::exception& e) {
    std::string_view what = e.what();  // drop nlohmann's "[json.exception.parse_error.101] " tag
    if (auto close = what.find("] "); what.starts_with('[') && close != std::string_view::npos)
      what.remove_prefix(close + 2);
    throw InputError(fmt::format("{}: not valid JSON: {}", label, what));
  }
  if (!root.is_object()) throw InputError(fmt::format("{}: index must be a JSON object", label));
  auto map_it = root.find("weight_map");
  if (map_it == root.end()) throw InputError(fmt::format("{}: no \"weight_map\" in the index", label));
  if (!map_it->is_object()) throw InputError(fmt::format("{}: \"weight_map\" must be an object", label));

  const fs::path dir = index.parent_path();
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;  // each shard opened once
  auto source = std::make_shared<CheckpointSource>(std::move(description));
  for (const auto& [name, shard_value] : map_it->items()) {
    if (!shard_value.is_string())
      throw InputError(fmt::format("{}: weight_map entry for '{}' must be a file name", label, name));
    const auto& shard = shard_value.get_ref<const std::string&>();
    auto it = shards.find(shard);
    if (it == shards.end()) {
      const fs::path shard_path = dir / shard;
      std::error_code ec;
      if (!fs::exists(shard_path, ec))
        throw InputError(fmt::format("{}: shard '{}' (holding '{}') not found at {}", label, shard, name,
                                     shard_path.string()));
      it = shards.emplace(shard, SafetensorsFile::open(shard_path)).first;
    }
    const auto* entry = it->second->find(name);
    if (!entry)
      throw InputError(fmt::format("{}: weight_map puts '{}' in shard '{}', which does not contain it", label, name,
                                   shard));
    source->add(name, it->second, entry);
  }
  return source;
}

}  // namespace

std::shared_ptr<const WeightSource> open_checkpoint(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw InputError(fmt::format("{}: no such file or directory", path.string()));
  const auto description = fmt::format("checkpoint {}", path.string());
  if (fs::is_directory(status)) {
    // transformers prefers the single file when both are present; do the same.
    if (fs::exists(path / kSingleFile, ec)) return open_single(path / kSingleFile, description);
    if (fs::exists(path / kIndexFile, ec)) return open_index(path / kIndexFile, description);
    throw InputError(fmt::format("{}: directory holds neither {} nor {}", path.string(), kSingleFile, kIndexFile));
  }
  if (path.extension() == ".json") return open_index(path, description);
  return open_single(path, description);
}

}  // namespace zoo
