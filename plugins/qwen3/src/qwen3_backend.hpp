#pragma once
#include <memory>
#include <string>
#include <vector>

#include "qwen3_config.hpp"
#include "zoo/model.hpp"

namespace zoo::qwen3 {

// Checkpoint tensor names of a HF Qwen3ForCausalLM.
std::string layer_tensor(std::int64_t layer, const char* suffix);
inline constexpr const char* kEmbedTokens = "model.embed_tokens.weight";
inline constexpr const char* kFinalNorm = "model.norm.weight";
inline constexpr const char* kLmHead = "lm_head.weight";

std::vector<TensorRequirement> qwen3_requirements(const Qwen3Config& config);

// The 17 per-layer tap stages, in forward order (docs/validation.md).
inline constexpr const char* kLayerStages[] = {
    "input_norm", "q_proj", "k_proj",        "v_proj",         "q_norm",    "k_norm",
    "q_rope",     "k_rope", "attn",          "o_proj",         "attn_residual", "post_attn_norm",
    "gate_proj",  "up_proj", "act",          "down_proj",      "output"};

// Checks an override request against this step; throws InputError on positions out of range or
// a row count that doesn't match.
void check_overrides(const ForwardStep& step, std::int64_t hidden);

// Where a model runs: the CPU (float32 reference) or CUDA (bf16). Owned through a shared_ptr so
// that each session can keep the backend (weights, device state) alive after the Model is gone.
class Qwen3Backend : public std::enable_shared_from_this<Qwen3Backend> {
 public:
  virtual ~Qwen3Backend() = default;
  virtual void load(const WeightSource& weights, const ProgressFn& progress) = 0;
  virtual std::unique_ptr<Session> new_session() = 0;
  virtual nlohmann::json runtime_stats() const { return nlohmann::json::object(); }
};

std::shared_ptr<Qwen3Backend> make_cpu_backend(const Qwen3Config& config, const ModelArgs& args);
std::shared_ptr<Qwen3Backend> make_cuda_backend(const Qwen3Config& config, const ModelArgs& args);

}  // namespace zoo::qwen3
