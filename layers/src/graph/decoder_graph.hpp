#pragma once
// The dense decoder's forward step, written once: the order of ops and the tap points a step
// emits, over a small interface each backend implements (CPU float32 in decoder_cpu.cpp, CUDA bf16
// in cuda/decoder_cuda.cpp). A backend owns its buffers and weights and decides how an op runs
// (which kernels, which fusions); it never decides what runs in which order, nor which taps.
#include <cstdint>
#include <string>
#include <vector>

#include "zoo/diagnostic_hook.hpp"
#include "zoo/layers/decoder.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

// A value the graph names: what a tap records (DESIGN.md tap names) and what a backend must be
// able to show at the moment the graph taps it.
enum class Value {
  embed, input_norm, q_proj, k_proj, v_proj, q_norm, k_norm, q_rope, k_rope, attn, o_proj, post_attn_out_norm,
  attn_residual, post_attn_norm, pre_mlp_norm, gate_proj, up_proj, act, down_proj, router_logits, router_topk_ids,
  router_topk_weights, moe_output, post_mlp_norm, output, final_norm, logits
};
const char* value_name(Value value);

// The norm that follows a residual add: the layer's pre-MLP norm, or the next layer's input norm
// (the final norm after the last layer). Where the placement has no such norm (NormPlacement::post)
// the normed value is the residual stream itself.
enum class NextNorm { pre_mlp, next_input };
// A norm of a sublayer's output before its residual add (sandwich and post placements).
enum class OutNorm { attention, mlp };

// What a step computes after the layers, on the step's output rows: the rows the backend returns
// (per sequence of a batch: its last row, or all of its rows when asked).
struct GraphOutputs {
  bool logits = true;
  bool sample = false;       // pick a token from the last logits row on the device
  int head_table = -1;       // a row table as a head, -1: none
  bool head_sample = false;  // pick one id per segment of the head's last row on the device
};

// The ops of one step over the backend's current step (its tokens, positions, cache). `x` is the
// normed hidden state, `h` the residual stream, `proj` an attention or MLP output.
class DecoderOps {
 public:
  virtual ~DecoderOps() = default;
  virtual void embed() = 0;       // h = token rows, then override rows and summed table rows
  virtual void input_norm() = 0;  // x = norm(h) with layer 0's input norm (x = h without one)
  virtual void qkv(std::int64_t layer) = 0;
  // q/k norm (per head or whole, when the spec has one; its results kept for taps when
  // keep_normed), RoPE on q and k (the rotary part; the layer's table), k and v into the cache.
  virtual void qk_norm_rope_cache(std::int64_t layer, bool keep_normed) = 0;
  // Causal GQA attention over the cache: the spec's scale and softcap, the layer's window.
  virtual void attention(std::int64_t layer) = 0;
  virtual void o_proj(std::int64_t layer) = 0;
  // Under tensor parallelism a row-parallel projection (o_proj, the MLP's down or experts) leaves
  // each rank a partial sum: proj = its sum over the ranks. Nothing on one rank.
  virtual void reduce_proj() {}
  virtual void out_norm(std::int64_t layer, OutNorm which) = 0;  // proj = norm(proj)
  virtual void add_norm(std::int64_t layer, NextNorm next) = 0;  // h += proj; x = norm(h)
  // Both, fused where the backend can (no taps in between): proj = norm(proj); h += proj; x = norm(h).
  virtual void out_norm_add_norm(std::int64_t layer, OutNorm which, NextNorm next) {
    out_norm(layer, which);
    add_norm(layer, next);
  }
  virtual void gate_up(std::int64_t layer) = 0;
  virtual void act() = 0;                        // act = activation(gate) * up
  virtual void gate_up_act(std::int64_t layer) = 0;  // both, fused where the backend can: no taps
  virtual void down(std::int64_t layer) = 0;
  // A mixture-of-experts MLP (MlpKind::moe layers), in place of gate_up .. down: the router's
  // logits, top-k expert ids and weights of every row; then proj = the weighted sum of the chosen
  // experts' gated MLPs on x.
  virtual void router(std::int64_t layer) = 0;
  virtual void experts(std::int64_t layer) = 0;
  // The head on x's output rows (every row of the step when `every_row`: the logits tap), soft-capped.
  virtual void logits(bool every_row) = 0;
  virtual void sample() = 0;  // a token from each output row whose sequence asked to sample
  virtual void head(int table) = 0;  // a row table as a head on the output rows
  virtual void sample_head(int table) = 0;
  // Records `value` (of `layer`, for per-layer values) under `name`; called only when the hook
  // wants the name.
  virtual void tap(DiagnosticHook& hook, const std::string& name, Value value, std::int64_t layer) = 0;
};

// One forward step over the backend's rows: embedding, the layers, the final norm, the head and
// the outputs asked for, emitting every tap point the hook wants.
void run_decoder_graph(const DecoderSpec& spec, DecoderOps& ops, const GraphOutputs& outputs, DiagnosticHook* hook);

}  // namespace zoo::layers
