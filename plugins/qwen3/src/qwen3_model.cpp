// The Qwen3 plugin: config, requirements, and the Model seam over a CPU or CUDA backend.
#include <fmt/format.h>

#include "qwen3_backend.hpp"
#include "zoo/error.hpp"
#include "zoo/plugin_abi.hpp"

namespace zoo::qwen3 {

std::string layer_tensor(std::int64_t layer, const char* suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

std::vector<TensorRequirement> qwen3_requirements(const Qwen3Config& c) {
  const std::vector<DType> floats{DType::BF16, DType::F16, DType::F32};
  std::vector<TensorRequirement> reqs;
  auto add = [&](std::string name, Shape shape) { reqs.push_back({std::move(name), std::move(shape), floats, false}); };
  add(kEmbedTokens, {c.vocab_size, c.hidden_size});
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    add(layer_tensor(l, "input_layernorm.weight"), {c.hidden_size});
    add(layer_tensor(l, "self_attn.q_proj.weight"), {c.q_dim(), c.hidden_size});
    add(layer_tensor(l, "self_attn.k_proj.weight"), {c.kv_dim(), c.hidden_size});
    add(layer_tensor(l, "self_attn.v_proj.weight"), {c.kv_dim(), c.hidden_size});
    add(layer_tensor(l, "self_attn.o_proj.weight"), {c.hidden_size, c.q_dim()});
    add(layer_tensor(l, "self_attn.q_norm.weight"), {c.head_dim});
    add(layer_tensor(l, "self_attn.k_norm.weight"), {c.head_dim});
    add(layer_tensor(l, "post_attention_layernorm.weight"), {c.hidden_size});
    add(layer_tensor(l, "mlp.gate_proj.weight"), {c.intermediate_size, c.hidden_size});
    add(layer_tensor(l, "mlp.up_proj.weight"), {c.intermediate_size, c.hidden_size});
    add(layer_tensor(l, "mlp.down_proj.weight"), {c.hidden_size, c.intermediate_size});
  }
  add(kFinalNorm, {c.hidden_size});
  // With tied embeddings the head is embed_tokens, even when the file also holds an lm_head.
  if (!c.tie_word_embeddings) add(kLmHead, {c.vocab_size, c.hidden_size});
  return reqs;
}

void check_overrides(const ForwardStep& step, std::int64_t hidden) {
  const auto n = static_cast<std::int64_t>(step.override_positions.size());
  if (static_cast<std::int64_t>(step.override_rows.size()) != n * hidden)
    throw InputError(fmt::format("embedding overrides: {} positions need {} values, got {}", n, n * hidden,
                                 step.override_rows.size()));
  for (auto p : step.override_positions)
    if (p < 0 || p >= static_cast<std::int64_t>(step.ids.size()))
      throw InputError(fmt::format("embedding override position {} is outside this step's {} tokens", p, step.ids.size()));
}

namespace {

class Qwen3Model : public Model {
 public:
  explicit Qwen3Model(const ModelArgs& args)
      : config_(Qwen3Config::parse(args.config, "qwen3 config")), weights_(args.weights) {
    if (!weights_) throw InputError("qwen3: no weight source given");
    // Bounds max_context and checks the KV-cache size fits before a backend multiplies it out.
    config_.kv_cache_elements(args.max_context, "qwen3");
    if (args.device.is_cpu()) {
      if (args.dtype != DType::F32)
        throw SettingError(fmt::format("qwen3: the CPU backend computes in float32, not {}", dtype_name(args.dtype)));
      backend_ = make_cpu_backend(config_, args);
    } else {
      if (args.dtype != DType::BF16)
        throw SettingError(fmt::format("qwen3: the CUDA backend computes in bfloat16, not {}", dtype_name(args.dtype)));
      backend_ = make_cuda_backend(config_, args);
    }
  }

  ModelInfo info() const override {
    return {"qwen3", "qwen3", config_.vocab_size, config_.hidden_size, config_.num_layers, config_.summary()};
  }
  std::vector<TensorRequirement> requirements() const override { return qwen3_requirements(config_); }
  const WeightSource& weight_source() const override { return *weights_; }
  void load(const ProgressFn& progress) override {
    backend_->load(*weights_, progress);
    loaded_ = true;
  }
  std::unique_ptr<Session> new_session() override {
    if (!loaded_) throw std::logic_error("qwen3: new_session() before load()");
    return backend_->new_session();
  }
  nlohmann::json runtime_stats() const override { return backend_->runtime_stats(); }

 private:
  Qwen3Config config_;
  std::shared_ptr<const WeightSource> weights_;
  std::shared_ptr<Qwen3Backend> backend_;  // shared with the sessions
  bool loaded_ = false;
};

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"qwen3", nullptr};
  static const char* const architectures[] = {"Qwen3ForCausalLM", "Qwen3Model", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "qwen3", "0.1.0", model_types, architectures};
  return &d;
}

std::unique_ptr<Model> create(const ModelArgs& args, Host&) { return std::make_unique<Qwen3Model>(args); }

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)

}  // namespace zoo::qwen3
