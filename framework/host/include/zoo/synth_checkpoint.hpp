#pragma once
// Random checkpoints at a config's real shapes (`zoo synth`): for speed and memory work where real
// weights cannot be downloaded. The tensor list comes from the plugin serving the config (its
// requirements, under their stored names), so nothing here knows a model.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/dtype.hpp"
#include "zoo/model.hpp"
#include "zoo/tensor.hpp"
#include "zoo/weight_source.hpp"

namespace zoo {

// The largest mean or std of synthesized weights: far beyond any real model's (0.02), small enough
// that f16 (largest value 65504) holds 65 standard deviations; 1e300 read into a float was inf.
inline constexpr double kMaxSynthWeightScale = 1000;

// One tensor to write, filled with N(mean, stddev).
struct SynthTensor {
  std::string stored;  // its name in the checkpoint
  Shape shape;
  float mean = 0.0f, stddev = 0.02f;
};

// A source with no tensors: lets a plugin declare its requirements before any checkpoint exists.
std::shared_ptr<const WeightSource> empty_weight_source();

// The non-optional requirements of `model`, under their stored names: vectors (norms) N(1, 0.05),
// everything else N(0, stddev).
std::vector<SynthTensor> required_tensors(const Model& model, float stddev);

// Tensors a checkpoint holds beyond what its plugin requires (e.g. a codec the plugin reads on
// demand): {"tensors": [{"name": N, "shape": [...], "mean": m, "std": s}, ...]}, mean and std
// optional (0 and 0.02). InputError naming the file and entry.
std::vector<SynthTensor> load_extra_tensors(const std::filesystem::path& file);

struct SynthWrite {
  DType dtype = DType::BF16;
  std::uint64_t seed = 0;
  double shard_gb = 5.0;  // shard size
  bool force = false;     // write into a non-empty directory, replacing its model files
  // Called after each shard: its file, its tensor count, bytes written so far, total bytes.
  std::function<void(const std::filesystem::path&, std::size_t, std::size_t, std::size_t)> on_shard;
};

// Writes `tensors` (values depend only on the seed, the tensor's index and the position, not on
// the thread count) as safetensors shards into `out`, then `config` as its config.json, last, so
// a directory becomes a checkpoint only once its weights are complete. A non-empty `out` is
// refused unless `force`; stale weights of another layout are removed. `config_file` is the
// config.json the config was read from (it may be out/config.json). Returns the bytes written.
std::size_t write_synth_checkpoint(const std::filesystem::path& out, const nlohmann::json& config,
                                   const std::filesystem::path& config_file, const std::vector<SynthTensor>& tensors,
                                   const SynthWrite& options);

}  // namespace zoo
