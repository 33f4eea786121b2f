#pragma once
// The dense decoder-only transformer that most causal LMs are: embedding (with override rows),
// N pre-norm blocks [RMSNorm, GQA attention with RoPE and a KV cache, RMSNorm, SwiGLU MLP], a
// final RMSNorm and a tied or untied head. A model plugin describes its model with a DecoderSpec
// (sizes, switches, RoPE table, tensor names) and gets a complete Model: requirements, loading,
// a float32 CPU reference backend and a bf16 CUDA backend (cuBLASLt, packed q|k|v and gate|up,
// decode graphs), every DESIGN.md tap point, step validation and profiling.
//
// Nothing here knows a model family: what differs between families is data in the spec.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zoo/host.hpp"
#include "zoo/layers/abi.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/model.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

// Where a family's checkpoint keeps each tensor. Module paths: the weight is "<module>.weight" and
// a bias "<module>.bias". Per-layer modules sit under `layer_prefix`, whose "{}" is the layer
// index. The defaults are the Hugging Face names that most decoder families share.
struct DecoderTensorNames {
  std::string embed = "model.embed_tokens";
  std::string final_norm = "model.norm";
  std::string lm_head = "lm_head";
  std::string layer_prefix = "model.layers.{}.";
  std::string input_norm = "input_layernorm";
  std::string q_proj = "self_attn.q_proj";
  std::string k_proj = "self_attn.k_proj";
  std::string v_proj = "self_attn.v_proj";
  std::string o_proj = "self_attn.o_proj";
  std::string q_norm = "self_attn.q_norm";
  std::string k_norm = "self_attn.k_norm";
  std::string post_attention_norm = "post_attention_layernorm";
  std::string gate_proj = "mlp.gate_proj";
  std::string up_proj = "mlp.up_proj";
  std::string down_proj = "mlp.down_proj";
};

// The rotary embedding as kernels apply it: angle = position * inv_freq[i] (head_dim / 2 entries,
// any scaling already folded in) and cos/sin multiplied by attention_scaling. rope.hpp builds it.
struct RopeTable {
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;
  std::string summary = "default";  // for `zoo plan` ("llama3 x8", "yarn x4", ...)
};

struct DecoderSpec {
  std::string family;      // the plugin's name, in messages and ModelInfo
  std::string model_type;  // HF model_type for ModelInfo; empty: the family
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE
  bool qkv_bias = false;  // biases on q_proj, k_proj, v_proj
  bool o_bias = false;    // bias on o_proj
  bool mlp_bias = false;  // biases on gate_proj, up_proj, down_proj
  // With a tied head the head is the embedding table, even when the file also has an lm_head.
  bool tie_word_embeddings = false;
  std::int64_t max_position_embeddings = 0;  // informational
  RopeTable rope;
  DecoderTensorNames names;
  // What reading config.json found that does not stop the model (read_hf_decoder_config fills
  // it); make_decoder_model logs each line as a warning.
  std::vector<std::string> config_warnings;

  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // Checks the sizes (positive, GQA-compatible, even head_dim, table length) and that every
  // derived size fits in 64 bits; InputError naming `label` otherwise. make_decoder_model calls it.
  void check(const std::string& label) const;
  // Elements of all tensors the spec reads; InputError naming `label` if the sum does not fit.
  std::int64_t checked_parameter_count(const std::string& label) const;
  std::int64_t parameter_count() const;
  // K and V cache elements for `max_context` tokens (both caches, all layers); InputError naming
  // max_context when it is out of range or the size does not fit in 64 bits.
  std::int64_t kv_cache_elements(std::int64_t max_context, const std::string& label) const;
  std::string summary() const;

  // Checkpoint names, derived from `names`.
  std::string layer_tensor(std::int64_t layer, const std::string& module, const char* kind = "weight") const;
  std::string embed_weight() const { return names.embed + ".weight"; }
  std::string final_norm_weight() const { return names.final_norm + ".weight"; }
  std::string lm_head_weight() const { return names.lm_head + ".weight"; }
};

// One layer's parameters in forward order; which exist depends on the spec's switches.
enum class LayerParam {
  input_norm, q, q_bias, k, k_bias, v, v_bias, o, o_bias, q_norm, k_norm, post_norm,
  gate, gate_bias, up, up_bias, down, down_bias
};
inline constexpr std::size_t kLayerParamCount = static_cast<std::size_t>(LayerParam::down_bias) + 1;
struct LayerTensor {
  LayerParam param;
  std::string name;
  Shape shape;
};
// The parameters of layer `layer` that this spec has, with their checkpoint names and shapes.
std::vector<LayerTensor> layer_tensors(const DecoderSpec& spec, std::int64_t layer);
// Every tensor the model reads (embedding, layers, final norm, head unless tied), float dtypes.
std::vector<TensorRequirement> decoder_requirements(const DecoderSpec& spec);

// The per-layer tap stages this spec emits, in forward order (DESIGN.md; q_norm/k_norm only with
// qk_norm).
std::vector<std::string> layer_stages(const DecoderSpec& spec);

// A Model over `args.weights`: float32 on the CPU, bf16 on CUDA. Checks the spec first, then
// logs through `host` the spec's config_warnings and, when the checkpoint holds layers past
// num_layers, one line naming the tensors that go unused.
std::unique_ptr<Model> make_decoder_model(DecoderSpec spec, const ModelArgs& args, Host& host);

}  // namespace zoo::layers
