#pragma once
// Opening a fixture checkpoint as a bf16 CUDA model, the way the CUDA parity, sampling and golden
// tests all do.
#include <cstdint>
#include <filesystem>
#include <memory>

#include "zoo/checkpoint.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/plugin_registry.hpp"
#include "zoo/weight_source.hpp"

namespace zoo::cuda_test {

// ModelArgs for the checkpoint in `dir` on the first CUDA device, in bf16.
inline ModelArgs cuda_bf16_args(const std::filesystem::path& dir, std::int64_t max_context = 1024) {
  ModelArgs args;
  args.config = load_hf_config(dir);
  args.weights = open_checkpoint(dir);
  args.device = Device::parse("cuda");
  args.dtype = DType::BF16;
  args.max_context = max_context;
  return args;
}

// A model from this build's plugins, loaded; the registry keeps its plugin library alive.
struct LoadedModel {
  PluginRegistry registry;
  std::shared_ptr<Model> model;
};

inline std::unique_ptr<LoadedModel> load_cuda_fixture(const std::filesystem::path& dir,
                                                      std::int64_t max_context = 1024,
                                                      int tensor_parallel = 1, bool batch_invariant = false) {
  auto loaded = std::make_unique<LoadedModel>();
  loaded->registry.discover({std::filesystem::path(ZOO_BINARY_DIR) / "lib" / "zoo" / "plugins"});
  ModelArgs args = cuda_bf16_args(dir, max_context);
  args.tensor_parallel = tensor_parallel;
  args.batch_invariant = batch_invariant;
  const auto& plugin = loaded->registry.resolve_config(args.config, (dir / "config.json").string());
  loaded->model = loaded->registry.create_model(plugin.name, args);
  loaded->model->load();
  return loaded;
}

}  // namespace zoo::cuda_test
