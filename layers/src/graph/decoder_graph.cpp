#include "decoder_graph.hpp"

#include <fmt/format.h>

#include <array>

namespace zoo::layers::inline ZOO_LAYERS_ABI {
namespace {

// The per-layer values in the order a layer computes them: its tap stages.
constexpr std::array kLayerValues = {
    Value::input_norm,    Value::q_proj,         Value::k_proj,         Value::v_proj,    Value::q_norm,
    Value::k_norm,        Value::q_rope,         Value::k_rope,         Value::attn,      Value::o_proj,
    Value::post_attn_out_norm, Value::attn_residual, Value::post_attn_norm, Value::pre_mlp_norm,
    Value::gate_proj,     Value::up_proj,        Value::act,            Value::down_proj, Value::router_logits,
    Value::router_topk_ids, Value::router_topk_weights, Value::moe_output, Value::post_mlp_norm, Value::output};

bool has_value(const DecoderSpec& spec, Value value, std::int64_t layer) {
  const NormPlacement placement = spec.norm_placement;
  const bool moe = spec.is_moe(layer);
  switch (value) {
    case Value::gate_proj: case Value::up_proj: case Value::act: case Value::down_proj: return !moe;
    case Value::router_logits: case Value::router_topk_ids: case Value::router_topk_weights: case Value::moe_output:
      return moe;
    case Value::q_norm: case Value::k_norm: return spec.qk_norm != QkNorm::none;
    case Value::input_norm: return placement != NormPlacement::post;
    case Value::post_attn_norm: return placement == NormPlacement::pre;
    case Value::pre_mlp_norm: return placement == NormPlacement::sandwich;
    case Value::post_attn_out_norm: case Value::post_mlp_norm: return placement != NormPlacement::pre;
    default: return true;
  }
}

// Taps of one step: free when there is no hook.
class Taps {
 public:
  Taps(const DecoderSpec& spec, DecoderOps& ops, DiagnosticHook* hook) : spec_(spec), ops_(ops), hook_(hook) {}
  bool on() const { return hook_ != nullptr; }
  bool wants(const char* name) const { return hook_ && hook_->wants(name); }
  void put(Value value) {
    if (hook_ && hook_->wants(value_name(value))) ops_.tap(*hook_, value_name(value), value, -1);
  }
  // The per-layer values the spec has, among `values`.
  void layer(std::int64_t l, std::initializer_list<Value> values) {
    if (!hook_) return;
    for (Value value : values) {
      if (!has_value(spec_, value, l)) continue;
      const std::string name = fmt::format("layer.{}.{}", l, value_name(value));
      if (hook_->wants(name)) ops_.tap(*hook_, name, value, l);
    }
  }

 private:
  const DecoderSpec& spec_;
  DecoderOps& ops_;
  DiagnosticHook* hook_;
};

}  // namespace

const char* value_name(Value value) {
  switch (value) {
    case Value::embed: return "embed";
    case Value::input_norm: return "input_norm";
    case Value::q_proj: return "q_proj";
    case Value::k_proj: return "k_proj";
    case Value::v_proj: return "v_proj";
    case Value::q_norm: return "q_norm";
    case Value::k_norm: return "k_norm";
    case Value::q_rope: return "q_rope";
    case Value::k_rope: return "k_rope";
    case Value::attn: return "attn";
    case Value::o_proj: return "o_proj";
    case Value::post_attn_out_norm: return "post_attn_out_norm";
    case Value::attn_residual: return "attn_residual";
    case Value::post_attn_norm: return "post_attn_norm";
    case Value::pre_mlp_norm: return "pre_mlp_norm";
    case Value::gate_proj: return "gate_proj";
    case Value::up_proj: return "up_proj";
    case Value::act: return "act";
    case Value::down_proj: return "down_proj";
    case Value::router_logits: return "router_logits";
    case Value::router_topk_ids: return "router_topk_ids";
    case Value::router_topk_weights: return "router_topk_weights";
    case Value::moe_output: return "moe_output";
    case Value::post_mlp_norm: return "post_mlp_norm";
    case Value::output: return "output";
    case Value::final_norm: return "final_norm";
    case Value::logits: return "logits";
  }
  return "?";
}

std::vector<std::string> layer_stages(const DecoderSpec& spec, std::int64_t layer) {
  std::vector<std::string> stages;
  for (Value value : kLayerValues)
    if (has_value(spec, value, layer)) stages.emplace_back(value_name(value));
  return stages;
}

void run_decoder_graph(const DecoderSpec& spec, DecoderOps& ops, const GraphOutputs& outputs, DiagnosticHook* hook) {
  Taps taps(spec, ops, hook);
  const bool out_norms = spec.norm_placement != NormPlacement::pre;
  const bool qk_norm = spec.qk_norm != QkNorm::none;
  // A sublayer's output joins the residual stream: its own norm first where the placement has one
  // (tapped as `tapped`), the add, the next norm; one fused op when nothing is tapped in between.
  const auto residual = [&](std::int64_t l, OutNorm which, Value tapped, NextNorm next) {
    if (out_norms && !taps.on()) return ops.out_norm_add_norm(l, which, next);
    if (out_norms) {
      ops.out_norm(l, which);
      taps.layer(l, {tapped});
    }
    ops.add_norm(l, next);
  };
  ops.embed();
  taps.put(Value::embed);
  ops.input_norm();
  for (std::int64_t l = 0; l < spec.num_layers; ++l) {
    taps.layer(l, {Value::input_norm});
    ops.qkv(l);
    taps.layer(l, {Value::q_proj, Value::k_proj, Value::v_proj});
    ops.qk_norm_rope_cache(l, taps.on() && qk_norm);
    taps.layer(l, {Value::q_norm, Value::k_norm, Value::q_rope, Value::k_rope});
    ops.attention(l);
    taps.layer(l, {Value::attn});
    ops.o_proj(l);
    ops.reduce_proj();
    taps.layer(l, {Value::o_proj});
    residual(l, OutNorm::attention, Value::post_attn_out_norm, NextNorm::pre_mlp);
    taps.layer(l, {Value::attn_residual, Value::post_attn_norm, Value::pre_mlp_norm});
    if (spec.is_moe(l)) {
      ops.router(l);
      taps.layer(l, {Value::router_logits, Value::router_topk_ids, Value::router_topk_weights});
      ops.experts(l);
      ops.reduce_proj();
      taps.layer(l, {Value::moe_output});
    } else {
      if (taps.on()) {
        ops.gate_up(l);
        taps.layer(l, {Value::gate_proj, Value::up_proj});
        ops.act();
      } else {
        ops.gate_up_act(l);
      }
      taps.layer(l, {Value::act});
      ops.down(l);
      ops.reduce_proj();
      taps.layer(l, {Value::down_proj});
    }
    residual(l, OutNorm::mlp, Value::post_mlp_norm, NextNorm::next_input);
    taps.layer(l, {Value::output});
  }
  taps.put(Value::final_norm);
  // The returned rows get their own product even when the tap computed all of them: a matmul
  // sums in a different order for different row counts, and a hook must not change results.
  if (taps.wants("logits")) {
    ops.logits(true);
    taps.put(Value::logits);
  }
  if (outputs.logits) {
    ops.logits(false);
    if (outputs.sample) ops.sample();
  }
  if (outputs.head_table >= 0) {
    ops.head(outputs.head_table);
    if (outputs.head_sample) ops.sample_head(outputs.head_table);
  }
}

}  // namespace zoo::layers
