#pragma once
// The dense decoder-only transformer that most causal LMs are: embedding (with override rows),
// N blocks [norms, GQA attention with RoPE and a KV cache, gated MLP], a final norm and a tied or
// untied head. A model plugin describes its model with a DecoderSpec (sizes, the kinds below,
// per-layer LayerSpecs, RoPE tables, tensor names) and gets a complete Model: requirements,
// loading, a float32 CPU reference backend and a bf16 CUDA backend (cuBLASLt, packed q|k|v and
// gate|up, decode graphs), every DESIGN.md tap point, step validation and profiling.
//
// Nothing here knows a model family: what differs between families is data in the spec.
#include <cmath>
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
  std::string post_attention_norm = "post_attention_layernorm";  // the pre-MLP norm (NormPlacement::pre)
  // Sandwich and post norms (NormPlacement::sandwich, post): of the attention output, before the
  // MLP, and of the MLP output. Empty: the family's placement has none.
  std::string post_attn_out_norm;
  std::string pre_mlp_norm;
  std::string post_mlp_norm;
  std::string gate_proj = "mlp.gate_proj";
  std::string up_proj = "mlp.up_proj";
  std::string down_proj = "mlp.down_proj";
  // A mixture-of-experts MLP (MlpKind::moe): the router, and each expert's modules under
  // `expert_prefix` (relative to the layer; "{}" is the expert's index).
  std::string router = "mlp.gate";
  std::string expert_prefix = "mlp.experts.{}.";
  std::string expert_gate = "gate_proj";
  std::string expert_up = "up_proj";
  std::string expert_down = "down_proj";
  // The fused expert layout (ExpertLayout::fused): all of a layer's experts in two parameters,
  // relative to the layer and stored without a ".weight": gate|up [experts, 2 x intermediate,
  // hidden] (expert e's gate rows, then its up rows) and down [experts, hidden, intermediate].
  std::string experts_gate_up = "mlp.experts.gate_up_proj";
  std::string experts_down = "mlp.experts.down_proj";
  // A shared expert beside the routed ones (MoeSpec::shared_intermediate_size > 0): its gated MLP
  // under `shared_expert` (with the expert_* module names) and its sigmoid gate.
  std::string shared_expert = "mlp.shared_expert.";
  std::string shared_expert_gate = "mlp.shared_expert_gate";
};

// The rotary embedding as kernels apply it: angle = position * inv_freq[i] (head_dim / 2 entries,
// any scaling already folded in) and cos/sin multiplied by attention_scaling. rope.hpp builds it.
struct RopeTable {
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;
  std::string summary = "default";  // for `zoo plan` ("llama3 x8", "yarn x4", ...)
};

// How a norm scales: RMSNorm's x * w, or x * (1 + w) (the stored weight is an offset from 1).
enum class NormKind { rms, rms_one_plus };
// Where a block's norms sit. pre: input norm before attention, a norm before the MLP. sandwich:
// those plus a norm of the attention output and of the MLP output before each residual add.
// post: only the output norms, nothing before the sublayers. (docs/plugins.md: who uses which.)
enum class NormPlacement { pre, sandwich, post };
// q/k normalization before RoPE: none, RMSNorm over each head, or over the whole projection
// (weights of num_heads x head_dim and num_kv_heads x head_dim).
enum class QkNorm { none, per_head, whole };
// The gated MLP's activation: act(gate) * up.
enum class Activation { silu, gelu_tanh, gelu };
enum class AttentionKind { full, sliding };
// A layer's MLP: dense (gate|up, activation, down) or a mixture of experts (DecoderSpec::moe).
enum class MlpKind { dense, moe };
// How a checkpoint stores a mixture-of-experts layer's experts: one gate, up and down module per
// expert (the names transformers 4 wrote, and 5's save_pretrained by default), or fused into two
// stacked parameters (transformers 5 in memory, save_pretrained(save_original_format=False), and
// checkpoints released since). make_decoder_model finds it per layer from the tensors present.
enum class ExpertLayout { per_expert, fused };

// What differs between the layers of one model.
struct LayerSpec {
  AttentionKind attention = AttentionKind::full;
  std::int64_t window = 0;  // sliding: a query at position p sees keys p - window + 1 .. p
  int rope = 0;             // which of DecoderSpec::ropes this layer rotates with
  MlpKind mlp = MlpKind::dense;
  ExpertLayout experts = ExpertLayout::per_expert;  // MlpKind::moe: where its experts are stored
};

// The mixture-of-experts MLP of the MlpKind::moe layers. Per token: router logits = x @ router^T,
// probabilities = softmax(logits), the top_k experts by probability (renormalized to sum 1 when
// normalize_top_k), and the output is the sum of those experts' gated MLPs (each of
// intermediate_size, the model's activation) weighted by their probabilities. With a shared expert
// (shared_intermediate_size > 0) every token also gets sigmoid(x . shared_gate) times a gated MLP
// of that size, added after the routed sum.
struct MoeSpec {
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t intermediate_size = 0;
  bool normalize_top_k = false;
  std::int64_t shared_intermediate_size = 0;
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
  NormKind norm = NormKind::rms;
  NormPlacement norm_placement = NormPlacement::pre;
  QkNorm qk_norm = QkNorm::none;
  Activation activation = Activation::silu;
  // Attention scores are q.k * query_scale; 0: 1 / sqrt(head_dim).
  double query_scale = 0.0;
  double attn_softcap = 0.0;   // > 0: scores become c * tanh(score / c)
  double final_softcap = 0.0;  // > 0: logits become c * tanh(logit / c)
  // Token embeddings are multiplied by this (e.g. sqrt(hidden_size), rounded to the compute
  // dtype as transformers does); 0: not scaled. Override and table rows are not scaled.
  double embed_scale = 0.0;
  // Rotary dimensions per head (partial rotary): the first rotary_dim values rotate; 0: head_dim.
  std::int64_t rotary_dim = 0;
  bool qkv_bias = false;  // biases on q_proj, k_proj, v_proj
  bool o_bias = false;    // bias on o_proj
  bool mlp_bias = false;  // biases on gate_proj, up_proj, down_proj
  // With a tied head the head is the embedding table, even when the file also has an lm_head.
  bool tie_word_embeddings = false;
  std::int64_t max_position_embeddings = 0;  // informational
  // The RoPE tables; layers[l].rope picks one (e.g. global and local bases). Each has
  // rotary() / 2 frequencies.
  std::vector<RopeTable> ropes = std::vector<RopeTable>(1);
  // One entry per layer, or empty: every layer full attention with ropes[0] and a dense MLP.
  std::vector<LayerSpec> layers;
  MoeSpec moe;  // the experts of the MlpKind::moe layers (none: experts == 0)
  DecoderTensorNames names;
  // What reading config.json found that does not stop the model (read_hf_decoder_config fills
  // it); make_decoder_model logs each line as a warning.
  std::vector<std::string> config_warnings;

  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
  std::int64_t rotary() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  float attention_scale() const {
    return query_scale > 0 ? static_cast<float>(query_scale) : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  LayerSpec layer(std::int64_t l) const { return layers.empty() ? LayerSpec{} : layers[static_cast<std::size_t>(l)]; }
  const RopeTable& rope_of(std::int64_t l) const { return ropes[static_cast<std::size_t>(layer(l).rope)]; }
  // Whether any layer attends through a window (backends that cannot are refused).
  bool has_sliding_window() const;
  bool is_moe(std::int64_t l) const { return layer(l).mlp == MlpKind::moe; }
  std::int64_t moe_layers() const;
  // Checks the sizes (positive, GQA-compatible, even head_dim, table length) and that every
  // derived size fits in 64 bits; InputError naming `label` otherwise. make_decoder_model calls it.
  void check(const std::string& label) const;
  // Elements of all tensors the spec reads; InputError naming `label` if the sum does not fit.
  std::int64_t checked_parameter_count(const std::string& label) const;
  std::int64_t parameter_count() const;
  // The parameters one decode step of one token reads: each tensor once, except the embedding
  // table behind an untied head (one row) and the experts of a mixture (top_k of them per layer).
  std::int64_t decode_parameter_count() const;
  // K and V cache elements for `max_context` tokens (both caches, all layers); InputError naming
  // max_context when it is out of range or the size does not fit in 64 bits.
  std::int64_t kv_cache_elements(std::int64_t max_context, const std::string& label) const;
  std::string summary() const;
  std::string rope_summary() const;  // "default", "yarn x4 + default" (one entry per table)

  // Checkpoint names, derived from `names`.
  std::string layer_tensor(std::int64_t layer, const std::string& module, const char* kind = "weight") const;
  // An expert's module of layer `layer`: "<layer prefix><expert prefix><module>.weight".
  std::string expert_tensor(std::int64_t layer, std::int64_t expert, const std::string& module) const;
  // A parameter of layer `layer` stored under its own name: "<layer prefix><parameter>".
  std::string layer_parameter(std::int64_t layer, const std::string& parameter) const;
  std::string embed_weight() const { return names.embed + ".weight"; }
  std::string final_norm_weight() const { return names.final_norm + ".weight"; }
  std::string lm_head_weight() const { return names.lm_head + ".weight"; }
};

// One layer's parameters in forward order; which exist depends on the spec's switches. post_norm
// is the norm before the MLP (pre and sandwich placements).
// The expert_* parameters come once per expert (LayerTensor::expert); backends stack them per layer.
enum class LayerParam {
  input_norm, q, q_bias, k, k_bias, v, v_bias, o, o_bias, q_norm, k_norm, post_attn_out_norm, post_norm,
  gate, gate_bias, up, up_bias, down, down_bias, router, expert_gate, expert_up, expert_down, shared_gate, shared_up,
  shared_down, shared_expert_gate, post_mlp_norm
};
inline constexpr std::size_t kLayerParamCount = static_cast<std::size_t>(LayerParam::post_mlp_norm) + 1;
// Whether a parameter is a norm's weight (scaled as 1 + w under NormKind::rms_one_plus).
constexpr bool is_norm(LayerParam p) {
  return p == LayerParam::input_norm || p == LayerParam::q_norm || p == LayerParam::k_norm ||
         p == LayerParam::post_attn_out_norm || p == LayerParam::post_norm || p == LayerParam::post_mlp_norm;
}
struct LayerTensor {
  LayerParam param;
  std::string name;  // the stored tensor it is read from
  Shape shape;
  std::int64_t expert = -1;  // the expert_* parameters: which expert
  // A slice of a larger stored tensor (an expert of the fused layout): that tensor's shape, and
  // where the slice starts in it, in elements. Empty: the stored tensor is this one.
  Shape stored_shape;
  std::int64_t offset = 0;
};
// The parameters of layer `layer` that this spec has, with their checkpoint names and shapes.
std::vector<LayerTensor> layer_tensors(const DecoderSpec& spec, std::int64_t layer);
// A tensor of layer_tensors() as a view into `source`'s mapped bytes: the stored tensor, or the
// slice of it (no copy). The load plan has checked the stored shape; InputError if it differs.
TensorView layer_tensor_view(const WeightSource& source, const LayerTensor& tensor);
// Sets each mixture-of-experts layer's ExpertLayout from the tensors `weights` holds. InputError
// naming the tensors when a layer holds both layouts or neither; an empty source changes nothing.
void detect_expert_layouts(DecoderSpec& spec, const WeightSource& weights);
// Every tensor the model reads (embedding, layers, final norm, head unless tied), float dtypes.
std::vector<TensorRequirement> decoder_requirements(const DecoderSpec& spec);

// The tap stages layer `layer` emits, in forward order (DESIGN.md; q_norm/k_norm only with a q/k
// norm; input_norm and the pre-MLP norm only where the placement has them, the pre-MLP norm named
// post_attn_norm under NormPlacement::pre and pre_mlp_norm under sandwich; gate_proj .. down_proj
// in a dense layer, router_logits .. moe_output in a mixture-of-experts layer).
std::vector<std::string> layer_stages(const DecoderSpec& spec, std::int64_t layer);

// A Model over `args.weights`: float32 on the CPU, bf16 on CUDA. Checks the spec first, then
// logs through `host` the spec's config_warnings and, when the checkpoint holds layers past
// num_layers, one line naming the tensors that go unused.
std::unique_ptr<Model> make_decoder_model(DecoderSpec spec, const ModelArgs& args, Host& host);

}  // namespace zoo::layers
