// DecoderSpec: checks, derived sizes, and the names and shapes of the tensors a spec reads.
#include <fmt/format.h>

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
  if (static_cast<std::int64_t>(rope.inv_freq.size()) != head_dim / 2)
    throw InputError(fmt::format("{}: the RoPE table has {} frequencies, head_dim {} needs {}", label,
                                 rope.inv_freq.size(), head_dim, head_dim / 2));
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

std::int64_t DecoderSpec::kv_cache_elements(std::int64_t max_context, const std::string& label) const {
  check_range(max_context, 1, kMaxContextTokens, label + ": max_context");
  return checked_product({2, num_layers, max_context, kv_dim()},
                         label + ": KV cache of max_context " + std::to_string(max_context) + " tokens");
}

std::string DecoderSpec::summary() const {
  std::string extras;
  if (qk_norm) extras += ", q/k norm";
  if (qkv_bias || o_bias || mlp_bias) extras += ", biases";
  if (tie_word_embeddings) extras += ", tied head";
  return fmt::format("{} {:.2f}B params: {} layers, hidden {}, {} heads / {} kv x {}, ffn {}, vocab {}, rope {}{}", family,
                     static_cast<double>(parameter_count()) / 1e9, num_layers, hidden_size, num_heads, num_kv_heads,
                     head_dim, intermediate_size, vocab_size, rope.summary, extras);
}

std::string DecoderSpec::layer_tensor(std::int64_t layer, const std::string& module, const char* kind) const {
  std::string prefix = names.layer_prefix;
  if (const auto at = prefix.find("{}"); at != std::string::npos) prefix.replace(at, 2, std::to_string(layer));
  return prefix + module + "." + kind;
}

std::vector<LayerTensor> layer_tensors(const DecoderSpec& c, std::int64_t l) {
  const auto& n = c.names;
  const std::int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  std::vector<LayerTensor> out;
  auto add = [&](LayerParam p, const std::string& module, Shape shape, bool bias = false) {
    out.push_back({p, c.layer_tensor(l, module, bias ? "bias" : "weight"), std::move(shape)});
  };
  using P = LayerParam;
  add(P::input_norm, n.input_norm, {H});
  add(P::q, n.q_proj, {c.q_dim(), H});
  if (c.qkv_bias) add(P::q_bias, n.q_proj, {c.q_dim()}, true);
  add(P::k, n.k_proj, {c.kv_dim(), H});
  if (c.qkv_bias) add(P::k_bias, n.k_proj, {c.kv_dim()}, true);
  add(P::v, n.v_proj, {c.kv_dim(), H});
  if (c.qkv_bias) add(P::v_bias, n.v_proj, {c.kv_dim()}, true);
  add(P::o, n.o_proj, {H, c.q_dim()});
  if (c.o_bias) add(P::o_bias, n.o_proj, {H}, true);
  if (c.qk_norm) {
    add(P::q_norm, n.q_norm, {D});
    add(P::k_norm, n.k_norm, {D});
  }
  add(P::post_norm, n.post_attention_norm, {H});
  add(P::gate, n.gate_proj, {I, H});
  if (c.mlp_bias) add(P::gate_bias, n.gate_proj, {I}, true);
  add(P::up, n.up_proj, {I, H});
  if (c.mlp_bias) add(P::up_bias, n.up_proj, {I}, true);
  add(P::down, n.down_proj, {H, I});
  if (c.mlp_bias) add(P::down_bias, n.down_proj, {H}, true);
  return out;
}

std::vector<TensorRequirement> decoder_requirements(const DecoderSpec& c) {
  const std::vector<DType> floats{DType::BF16, DType::F16, DType::F32};
  std::vector<TensorRequirement> reqs;
  auto add = [&](std::string name, Shape shape) { reqs.push_back({std::move(name), std::move(shape), floats, false}); };
  add(c.embed_weight(), {c.vocab_size, c.hidden_size});
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    for (auto& t : layer_tensors(c, l)) add(std::move(t.name), std::move(t.shape));
  add(c.final_norm_weight(), {c.hidden_size});
  // With tied embeddings the head is embed_tokens, even when the file also holds an lm_head.
  if (!c.tie_word_embeddings) add(c.lm_head_weight(), {c.vocab_size, c.hidden_size});
  return reqs;
}

}  // namespace zoo::layers
