// DecoderSpec: checks, derived sizes, and the names and shapes of the tensors a spec reads.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <set>

#include "zoo/checked.hpp"
#include "zoo/error.hpp"
#include "zoo/layers/decoder.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

void DecoderSpec::check(const std::string& label) const {
  for (auto [value, name] : {std::pair{vocab_size, "vocab_size"}, {hidden_size, "hidden_size"},
                             {intermediate_size, "intermediate_size"}, {num_layers, "num_hidden_layers"},
                             {num_heads, "num_attention_heads"}, {num_kv_heads, "num_key_value_heads"},
                             {head_dim, "head_dim"}})
    if (value <= 0) throw InputError(fmt::format("{}: field '{}' must be positive (got {})", label, name, value));
  // Every derived size, checked once here so that no later product can wrap around.
  checked_mul(num_heads, head_dim, label + ": num_attention_heads x head_dim");
  (void)checked_product({vocab_size, hidden_size, 2}, label + ": parameter count");
  if (head_dim % 2 != 0) throw InputError(fmt::format("{}: head_dim {} must be even for rotary embeddings", label, head_dim));
  if (num_heads % num_kv_heads != 0)
    throw InputError(fmt::format("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", label,
                                 num_heads, num_kv_heads));
  if (rotary_dim < 0 || rotary_dim % 2 != 0 || rotary_dim > head_dim)
    throw InputError(fmt::format("{}: the rotary dimension {} must be even and at most head_dim {}", label, rotary_dim,
                                 head_dim));
  if (ropes.empty()) throw InputError(fmt::format("{}: no RoPE table", label));
  if (norm_placement != NormPlacement::pre && (names.post_attn_out_norm.empty() || names.post_mlp_norm.empty()))
    throw InputError(fmt::format("{}: sandwich and post norms need the names of the attention and MLP output norms", label));
  if (norm_placement == NormPlacement::sandwich && names.pre_mlp_norm.empty())
    throw InputError(fmt::format("{}: sandwich norms need the name of the pre-MLP norm", label));
  for (const auto& rope : ropes)
    if (static_cast<std::int64_t>(rope.inv_freq.size()) != rotary() / 2)
      throw InputError(fmt::format("{}: the RoPE table has {} frequencies, {} rotary dimensions need {}", label,
                                   rope.inv_freq.size(), rotary(), rotary() / 2));
  if (!layers.empty() && static_cast<std::int64_t>(layers.size()) != num_layers)
    throw InputError(fmt::format("{}: {} layer specs for {} layers", label, layers.size(), num_layers));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerSpec& s = layers[l];
    if (s.rope < 0 || s.rope >= static_cast<int>(ropes.size()))
      throw InputError(fmt::format("{}: layer {} uses RoPE table {} of {}", label, l, s.rope, ropes.size()));
    if (s.attention == AttentionKind::sliding && s.window <= 0)
      throw InputError(fmt::format("{}: layer {} slides with a window of {} tokens", label, l, s.window));
  }
  if (moe_layers() > 0) {
    for (auto [value, name] : {std::pair{moe.experts, "num_experts"}, {moe.top_k, "num_experts_per_tok"},
                               {moe.intermediate_size, "moe_intermediate_size"}})
      if (value <= 0) throw InputError(fmt::format("{}: field '{}' must be positive (got {})", label, name, value));
    if (moe.top_k > moe.experts)
      throw InputError(fmt::format("{}: num_experts_per_tok {} exceeds num_experts {}", label, moe.top_k, moe.experts));
    if (mlp_bias) throw InputError(fmt::format("{}: mlp_bias with mixture-of-experts layers is not supported", label));
    if (moe.shared_intermediate_size < 0)
      throw InputError(fmt::format("{}: field 'shared_expert_intermediate_size' must be positive (got {})", label,
                                   moe.shared_intermediate_size));
  }
  for (auto [value, name] : {std::pair{query_scale, "query scale"}, {attn_softcap, "attention softcap"},
                             {final_softcap, "final logit softcap"}, {embed_scale, "embedding scale"}})
    if (!(value >= 0.0) || !std::isfinite(value))
      throw InputError(fmt::format("{}: the {} must be a finite number >= 0, got {}", label, name, value));
  if (checked_parameter_count(label) <= 0) throw InputError(fmt::format("{}: the model has no parameters", label));
}

std::int64_t DecoderSpec::checked_parameter_count(const std::string& label) const {
  const std::string what = label + ": parameter count";
  std::int64_t total = 0;
  for (const auto& r : decoder_requirements(*this)) {
    std::int64_t n = 1;
    for (auto d : r.shape) n = checked_mul(n, d, what);
    total = checked_add(total, n, what);
  }
  return total;
}

std::int64_t DecoderSpec::parameter_count() const { return checked_parameter_count(family); }

std::int64_t DecoderSpec::decode_parameter_count() const {
  std::int64_t total = 0;
  for (const auto& r : decoder_requirements(*this)) {
    std::int64_t n = 1;
    for (auto d : r.shape) n *= d;
    if (r.name == embed_weight() && !tie_word_embeddings) n = hidden_size;
    total += n;
  }
  // The routed experts were counted for every expert; a token reads top_k of them.
  for (std::int64_t l = 0; l < num_layers; ++l)
    if (is_moe(l)) total -= (moe.experts - moe.top_k) * 3 * moe.intermediate_size * hidden_size;
  return total;
}

std::int64_t DecoderSpec::kv_cache_elements(std::int64_t max_context, const std::string& label) const {
  check_range(max_context, 1, kMaxContextTokens, label + ": max_context");
  return checked_product({2, num_layers, max_context, kv_dim()},
                         label + ": KV cache of max_context " + std::to_string(max_context) + " tokens");
}

std::int64_t DecoderSpec::moe_layers() const {
  std::int64_t n = 0;
  for (const auto& s : layers) n += s.mlp == MlpKind::moe ? 1 : 0;
  return n;
}

bool DecoderSpec::has_sliding_window() const {
  for (const auto& s : layers)
    if (s.attention == AttentionKind::sliding) return true;
  return false;
}

std::string DecoderSpec::summary() const {
  std::string extras;
  if (qk_norm != QkNorm::none) extras += qk_norm == QkNorm::per_head ? ", q/k norm" : ", q/k norm (whole)";
  if (norm == NormKind::rms_one_plus) extras += ", norm 1+w";
  if (norm_placement != NormPlacement::pre)
    extras += norm_placement == NormPlacement::sandwich ? ", sandwich norms" : ", post norms";
  if (activation != Activation::silu) extras += activation == Activation::gelu_tanh ? ", gelu_tanh" : ", gelu";
  if (has_sliding_window()) {
    std::int64_t sliding = 0, window = 0;
    for (const auto& s : layers)
      if (s.attention == AttentionKind::sliding) ++sliding, window = s.window;
    extras += fmt::format(", sliding window {} on {}/{} layers", window, sliding, num_layers);
  }
  if (const std::int64_t sparse = moe_layers(); sparse > 0) {
    extras += fmt::format(", {} experts top-{}{} (ffn {}{}) on {}/{} layers", moe.experts, moe.top_k,
                          moe.normalize_top_k ? " normalized" : "", moe.intermediate_size,
                          moe.shared_intermediate_size > 0 ? fmt::format(", shared {}", moe.shared_intermediate_size) : "",
                          sparse, num_layers);
    std::int64_t fused = 0;
    for (const auto& s : layers) fused += s.mlp == MlpKind::moe && s.experts == ExpertLayout::fused ? 1 : 0;
    // Which layout the checkpoint's experts came in (`zoo plan` prints this line above the table).
    extras += fused == 0 ? ", experts stored per expert"
              : fused == sparse
                  ? fmt::format(", experts stored fused ({}, {})", names.experts_gate_up, names.experts_down)
                  : fmt::format(", experts stored fused on {} of {} layers", fused, sparse);
  }
  if (rotary_dim > 0 && rotary_dim != head_dim) extras += fmt::format(", rotary {}/{}", rotary_dim, head_dim);
  if (attn_softcap > 0) extras += fmt::format(", attn softcap {}", attn_softcap);
  if (final_softcap > 0) extras += fmt::format(", logit softcap {}", final_softcap);
  if (qkv_bias || o_bias || mlp_bias) extras += ", biases";
  if (tie_word_embeddings) extras += ", tied head";
  return fmt::format("{} {:.2f}B params: {} layers, hidden {}, {} heads / {} kv x {}, ffn {}, vocab {}, rope {}{}", family,
                     static_cast<double>(parameter_count()) / 1e9, num_layers, hidden_size, num_heads, num_kv_heads,
                     head_dim, intermediate_size, vocab_size, rope_summary(), extras);
}

std::string DecoderSpec::rope_summary() const {
  std::string s;
  for (const auto& rope : ropes) s += (s.empty() ? "" : " + ") + rope.summary;
  return s;
}

std::string DecoderSpec::layer_tensor(std::int64_t layer, const std::string& module, const char* kind) const {
  std::string prefix = names.layer_prefix;
  if (const auto at = prefix.find("{}"); at != std::string::npos) prefix.replace(at, 2, std::to_string(layer));
  return prefix + module + "." + kind;
}

std::string DecoderSpec::layer_parameter(std::int64_t layer, const std::string& parameter) const {
  std::string prefix = names.layer_prefix;
  if (const auto at = prefix.find("{}"); at != std::string::npos)
    prefix.replace(at, 2, std::to_string(layer));
  return prefix + parameter;
}

std::string DecoderSpec::expert_tensor(std::int64_t layer, std::int64_t expert, const std::string& module) const {
  std::string prefix = names.expert_prefix;
  if (const auto at = prefix.find("{}"); at != std::string::npos) prefix.replace(at, 2, std::to_string(expert));
  return layer_tensor(layer, prefix + module);
}

std::vector<LayerTensor> layer_tensors(const DecoderSpec& c, std::int64_t l) {
  const auto& n = c.names;
  const std::int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  std::vector<LayerTensor> out;
  auto add = [&](LayerParam p, const std::string& module, Shape shape, bool bias = false) {
    out.push_back({p, c.layer_tensor(l, module, bias ? "bias" : "weight"), std::move(shape)});
  };
  using P = LayerParam;
  const bool pre_norms = c.norm_placement != NormPlacement::post;
  const bool out_norms = c.norm_placement != NormPlacement::pre;
  if (pre_norms) add(P::input_norm, n.input_norm, {H});
  add(P::q, n.q_proj, {c.q_dim(), H});
  if (c.qkv_bias) add(P::q_bias, n.q_proj, {c.q_dim()}, true);
  add(P::k, n.k_proj, {c.kv_dim(), H});
  if (c.qkv_bias) add(P::k_bias, n.k_proj, {c.kv_dim()}, true);
  add(P::v, n.v_proj, {c.kv_dim(), H});
  if (c.qkv_bias) add(P::v_bias, n.v_proj, {c.kv_dim()}, true);
  add(P::o, n.o_proj, {H, c.q_dim()});
  if (c.o_bias) add(P::o_bias, n.o_proj, {H}, true);
  if (c.qk_norm != QkNorm::none) {
    const bool whole = c.qk_norm == QkNorm::whole;
    add(P::q_norm, n.q_norm, {whole ? c.q_dim() : D});
    add(P::k_norm, n.k_norm, {whole ? c.kv_dim() : D});
  }
  if (out_norms) add(P::post_attn_out_norm, n.post_attn_out_norm, {H});
  if (pre_norms) add(P::post_norm, c.norm_placement == NormPlacement::pre ? n.post_attention_norm : n.pre_mlp_norm, {H});
  if (c.is_moe(l)) {
    // The router, then each expert's gate, up and down (named by the expert table, not an enum each).
    const std::int64_t E = c.moe.experts, Ie = c.moe.intermediate_size;
    add(P::router, n.router, {E, H});
    if (c.layer(l).experts == ExpertLayout::fused) {
      // Each expert a slice of the two stacked tensors: its gate rows, then its up rows, of
      // gate_up [E, 2Ie, H]; its [H, Ie] of down [E, H, Ie].
      const std::string gate_up = c.layer_parameter(l, n.experts_gate_up),
                        down = c.layer_parameter(l, n.experts_down);
      for (std::int64_t e = 0; e < E; ++e) {
        out.push_back({P::expert_gate, gate_up, {Ie, H}, e, {E, 2 * Ie, H}, e * 2 * Ie * H});
        out.push_back({P::expert_up, gate_up, {Ie, H}, e, {E, 2 * Ie, H}, (e * 2 + 1) * Ie * H});
        out.push_back({P::expert_down, down, {H, Ie}, e, {E, H, Ie}, e * H * Ie});
      }
    } else {
      for (std::int64_t e = 0; e < E; ++e) {
        out.push_back({P::expert_gate, c.expert_tensor(l, e, n.expert_gate), {Ie, H}, e});
        out.push_back({P::expert_up, c.expert_tensor(l, e, n.expert_up), {Ie, H}, e});
        out.push_back({P::expert_down, c.expert_tensor(l, e, n.expert_down), {H, Ie}, e});
      }
    }
    if (const std::int64_t Is = c.moe.shared_intermediate_size; Is > 0) {
      add(P::shared_gate, n.shared_expert + n.expert_gate, {Is, H});
      add(P::shared_up, n.shared_expert + n.expert_up, {Is, H});
      add(P::shared_down, n.shared_expert + n.expert_down, {H, Is});
      add(P::shared_expert_gate, n.shared_expert_gate, {1, H});
    }
  } else {
    add(P::gate, n.gate_proj, {I, H});
    if (c.mlp_bias) add(P::gate_bias, n.gate_proj, {I}, true);
    add(P::up, n.up_proj, {I, H});
    if (c.mlp_bias) add(P::up_bias, n.up_proj, {I}, true);
    add(P::down, n.down_proj, {H, I});
    if (c.mlp_bias) add(P::down_bias, n.down_proj, {H}, true);
  }
  if (out_norms) add(P::post_mlp_norm, n.post_mlp_norm, {H});
  return out;
}

std::vector<TensorRequirement> decoder_requirements(const DecoderSpec& c) {
  const std::vector<DType> floats{DType::BF16, DType::F16, DType::F32};
  std::vector<TensorRequirement> reqs;
  auto add = [&](std::string name, Shape shape) { reqs.push_back({std::move(name), std::move(shape), floats, false}); };
  add(c.embed_weight(), {c.vocab_size, c.hidden_size});
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    std::set<std::string> sliced;  // a fused tensor is required once, whole, however many slices it feeds
    for (auto& t : layer_tensors(c, l)) {
      if (t.stored_shape.empty())
        add(std::move(t.name), std::move(t.shape));
      else if (sliced.insert(t.name).second)
        add(std::move(t.name), std::move(t.stored_shape));
    }
  }
  add(c.final_norm_weight(), {c.hidden_size});
  // With tied embeddings the head is embed_tokens, even when the file also holds an lm_head.
  if (!c.tie_word_embeddings) add(c.lm_head_weight(), {c.vocab_size, c.hidden_size});
  return reqs;
}

TensorView layer_tensor_view(const WeightSource& source, const LayerTensor& t) {
  TensorView view = source.view(t.name);
  if (t.stored_shape.empty()) return view;
  if (view.shape != t.stored_shape)
    throw InputError(
        fmt::format("{}: shape {}, expected {}", t.name, shape_str(view.shape), shape_str(t.stored_shape)));
  view.data =
      static_cast<const std::byte*>(view.data) + static_cast<std::size_t>(t.offset) * dtype_size(view.dtype);
  view.shape = t.shape;
  return view;
}

void detect_expert_layouts(DecoderSpec& c, const WeightSource& weights) {
  // A source with no tensors declares a checkpoint yet to be written (`zoo synth` lists the
  // requirements through one): the layers keep the layout the spec gives them.
  if (weights.names().empty()) return;
  const auto& n = c.names;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.is_moe(l)) continue;
    std::vector<std::string> fused, per_expert;
    for (const auto& name : {c.layer_parameter(l, n.experts_gate_up), c.layer_parameter(l, n.experts_down)})
      if (weights.contains(name)) fused.push_back(name);
    for (std::int64_t e = 0; e < c.moe.experts && per_expert.empty(); ++e)
      for (const auto* module : {&n.expert_gate, &n.expert_up, &n.expert_down})
        if (const auto name = c.expert_tensor(l, e, *module); weights.contains(name)) {
          per_expert.push_back(name);
          break;
        }
    if (!fused.empty() && !per_expert.empty())
      throw InputError(
          fmt::format("{}: layer {} stores its experts in two layouts, fused ({}) and one module per "
                      "expert ({}); a checkpoint holds one of them",
                      c.family, l, fmt::join(fused, ", "), per_expert.front()));
    if (fused.empty() && per_expert.empty())
      throw InputError(fmt::format(
          "{}: layer {} has no expert weights: neither {} and {} (fused) nor {} .. {} (one "
          "module per expert)",
          c.family, l, c.layer_parameter(l, n.experts_gate_up), c.layer_parameter(l, n.experts_down),
          c.expert_tensor(l, 0, n.expert_gate), c.expert_tensor(l, c.moe.experts - 1, n.expert_down)));
    c.layers[static_cast<std::size_t>(l)].experts =
        fused.empty() ? ExpertLayout::per_expert : ExpertLayout::fused;
  }
}

}  // namespace zoo::layers
