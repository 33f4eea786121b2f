#pragma once
// Checkpoints on disk: safetensors files, sharded or not, as a WeightSource (checkpoint.cpp).
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zoo/weight_source.hpp"

namespace zoo {

// A directory holding model.safetensors or model.safetensors.index.json (plus config.json), a
// single .safetensors file, or an index file. Throws InputError naming the path on any problem,
// including an index that names a missing shard.
std::shared_ptr<const WeightSource> open_checkpoint(const std::filesystem::path& path);

// The (tensor, shard file) pairs of a model.safetensors.index.json's weight_map, checked: JSON
// (depth-limited), an object with a "weight_map" object of strings, every shard a relative path
// inside the checkpoint directory (no "..", not absolute). InputError naming `label` otherwise.
std::vector<std::pair<std::string, std::string>> parse_shard_index(std::string_view text, const std::string& label);

}  // namespace zoo
