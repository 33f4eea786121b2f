#pragma once
// The decoder's CUDA backend in bf16. decoder_cuda.cpp: the backend and the buffers every step
// shares; decoder_cuda_ops.cpp: the graph's row-wise ops (which kernels, which fusions) and
// where each tapped value lives; decoder_cuda_runner.cpp: the runner of many sequences over paged
// KV, which also serves sessions (a batch of one); device_weights.cpp: weight placement and
// upload. Rounding follows transformers in bf16 (see kernels/include/zoo/kernels/cuda/ops.hpp).
#include <fmt/format.h>

#include <memory>
#include <tuple>

#include "../decoder_backend.hpp"
#include "../graph/decoder_graph.hpp"
#include "../kv_sequences.hpp"
#include "device_collectives.hpp"
#include "device_weights.hpp"
#include "zoo/exclusive_use.hpp"
#include "zoo/kernels/cuda/attention.hpp"
#include "zoo/kernels/cuda/common.hpp"
#include "zoo/kernels/cuda/event_profiler.hpp"
#include "zoo/kernels/cuda/gemm.hpp"
#include "zoo/kernels/cuda/moe.hpp"
#include "zoo/kernels/cuda/ops.hpp"
#include "zoo/kernels/env.hpp"
#include "zoo/layers/tensor_parallel.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {

// Sampling the head on the device (OutputRequest::head_sample): at most this many segments are
// picked there; more fall back to returning the head output.
inline constexpr std::int64_t kMaxHeadSegments = 256;
// Steps up to this many rows run a mixture-of-experts layer through the kernels that stream only
// the chosen experts per row (graph-capturable); longer ones group the rows by expert for grouped
// GEMMs, which reads the expert counts back to the host (a synchronization per layer, no graphs).
inline constexpr std::int64_t kMoeStreamRows = 8;

// What a decode step computes besides the layers; a graph is captured per variant, batch bucket
// and kv bucket.
struct StepVariant {
  int table = -1;               // sum rows of this table into position 0
  std::int64_t per_position = 0;
  bool logits = true;
  int head_table = -1;
  int sample = 0;  // pick a token from the logits (OutputRequest::sample): 0 no, else 1 + cu::SampleMode
  // Pick one id per segment of the head output (OutputRequest::head_sample), 0: no. Greedy or not
  // is read on the device, so one graph serves every setting of a segment count.
  std::int64_t head_segments = 0;
  auto key() const { return std::tuple(table, per_position, logits, head_table, sample, head_segments); }
};

class CudaBackend;

// One rank of a tensor-parallel group (all null on one rank): its share of the model, the host
// communicator that gathers taps, and the device collectives of the reduce points and the head.
struct CudaRank {
  const DecoderShard* shard = nullptr;
  Communicator* comm = nullptr;
  DeviceCollectives* collectives = nullptr;
};

// What every step shares: the backend, the step's activations over its T_ rows, the row-wise ops
// of the layer graph (projections, norms, the MLP), which do not care which sequence a row belongs
// to, and where a tapped value lives. The sequence-aware ops (embedding extras, q/k/RoPE and the
// cache write, attention, the head and sampling) are the runner's.
class CudaRows : protected DecoderOps {
 protected:
  explicit CudaRows(std::shared_ptr<CudaBackend> backend, CudaRank rank = {});
  virtual ~CudaRows();
  // Called when a buffer moved (its old address may be in a captured graph).
  virtual void buffers_moved() {}

  struct Activations {
    std::int64_t tokens = 0;
    cu::DeviceBuffer h, x, qkv, q, attn, tmp, gate_up, act, q_normed, k_normed;
    // Mixture-of-experts layers: the router's logits (float32 [T, E]), top-k ids (int32 [T, k]) and
    // weights (float32), the experts' activations [T * k, I]; for the grouped path the per-expert
    // counts and offsets, each assignment's sorted row, each row's token, and the sorted rows.
    // A q/k norm over a projection split across ranks: this rank's sums of squares [T], every rank's [ranks,
    // T].
    cu::DeviceBuffer norm_sums, norm_pieces;
    cu::DeviceBuffer router_logits, topk_ids, topk_weights, expert_act, expert_counts, expert_offsets, row_of,
        token_of, sorted_x, sorted_gate_up, sorted_y;
    cu::PinnedBuffer counts_host;
  };
  void input_norm() override;
  void qkv(std::int64_t layer) override;
  void o_proj(std::int64_t layer) override;
  void out_norm(std::int64_t layer, OutNorm which) override;
  void add_norm(std::int64_t layer, NextNorm next) override;
  void out_norm_add_norm(std::int64_t layer, OutNorm which, NextNorm next) override;
  void gate_up(std::int64_t layer) override;
  void act() override;
  void gate_up_act(std::int64_t layer) override;
  void down(std::int64_t layer) override;
  void reduce_proj() override;  // under tensor parallelism: the sum of the ranks' partial outputs
  void router(std::int64_t layer) override;
  void experts(std::int64_t layer) override;

  cu::NormWeight norm_kind() const;
  const Bf16* next_norm_weight(std::int64_t layer, NextNorm next) const;
  cu::GatedActivation gated_activation() const;
  // The fused q/k norm + RoPE + cache-write call of layer `layer` over the step's rows, with the
  // whole-projection norms (QkNorm::whole) already applied in place; the caller sets the cache
  // pointers (and rows), positions and token count.
  cu::QkNormRopeArgs rope_args(std::int64_t layer, bool keep_normed);
  // Layer `layer`'s attention call over the step's q and attn buffers with the model's heads,
  // scale, soft-cap and the layer's window; the caller sets the cache, lengths and rows.
  template <class Args>
  Args attention_args(std::int64_t layer) {
    const LayerSpec spec = c_.layer(layer);
    Args args;
    args.q = a_.q.as<Bf16>();
    args.out = a_.attn.as<Bf16>();
    args.q_heads = static_cast<int>(c_.num_heads);
    args.kv_heads = static_cast<int>(c_.num_kv_heads);
    args.head_dim = static_cast<int>(c_.head_dim);
    args.scale = c_.attention_scale();
    args.softcap = static_cast<float>(c_.attn_softcap);
    args.window = spec.attention == AttentionKind::sliding ? spec.window : 0;
    return args;
  }
  // Records the step's `value` (every row) under `name`; k_rope: its rows as gathered from the cache.
  void record_tap(DiagnosticHook& hook, const std::string& name, Value value, const Bf16* k_rope);
  // The head over `rows` contiguous rows of x starting at `x_rows`, soft-capped, into logits_dev_
  // (under tensor parallelism: this rank's vocabulary rows, then every rank's side by side).
  void head_logits(const Bf16* x_rows, std::int64_t rows);
  void ensure_activations(std::int64_t tokens);
  void ensure_logits(std::int64_t rows);
  // Copies a [rows, cols] bf16 slice (row stride `stride` elements) to a float32 host tensor.
  HostTensor download_f32(const Bf16* src, std::int64_t rows, std::int64_t cols, std::int64_t stride);

  std::shared_ptr<CudaBackend> owner_;  // first member: the backend outlives every buffer here
  CudaBackend& b_;
  const DecoderSpec& c_;
  Activations a_;
  cu::DeviceBuffer ids_dev_, positions_dev_;
  std::int64_t T_ = 0;  // rows of the step in flight
  cu::DeviceBuffer logits_dev_;
  std::int64_t logits_rows_ = 0;
  std::int64_t logits_computed_ = 0;  // rows of logits_dev_ the last head_logits() wrote
  CudaRank rank_;
  cu::DeviceBuffer head_piece_, head_pieces_;  // a rank's vocabulary rows of the logits, and every rank's
  cu::EventProfiler profile_{kernels::env_flag("ZOO_CUDA_PROFILE", false)};
  // ZOO_MOE_CUBLAS=1: a MoE step of many rows takes cuBLAS's grouped GEMM with the counts read back
  // to the host (no CUDA graph for such steps), the path before grouped_gemm.hpp, for A/B runs.
  bool moe_cublas_ = kernels::env_flag("ZOO_MOE_CUBLAS", false);
};

// Bytes for a KV pool on the current device when the options give no size: 90% of the memory free
// after the weights, or with a memory fraction that share of the total less what is in use now,
// split between `share` ranks on the device, each less 2 GiB for a step's activations and logits.
double kv_device_budget(const RunnerOptions& options, int share = 1);

// A runner of many sequences over paged KV (decoder_cuda_runner.cpp).
// `rank`: one rank of a tensor-parallel group (CudaTensorParallelBackend).
std::unique_ptr<KvRunner> make_cuda_runner(std::shared_ptr<CudaBackend> backend, const RunnerOptions& options,
                                           CudaRank rank = {});

// `args.tensor_parallel` ranks, each a CudaBackend over its share (decoder_cuda_tp.cpp).
std::shared_ptr<DecoderBackend> make_cuda_tensor_parallel_backend(const DecoderSpec& spec,
                                                                  const ModelArgs& args);

// Owns what the sessions of one model share: the weights, the stream, the GEMM plans.
class CudaBackend : public DecoderBackend {
 public:
  // `shard`: this backend is one rank of a tensor-parallel group (`spec` is the rank's share).
  CudaBackend(const DecoderSpec& spec, const ModelArgs& args, const DecoderShard* shard = nullptr);
  void load(const WeightSource& source, const std::vector<RowTableSource>& tables, const ProgressFn& progress) override;
  std::unique_ptr<Session> new_session() override;  // a runner of one sequence (runner_session.hpp)
  std::unique_ptr<Runner> new_runner(const RunnerOptions& options) override;
  nlohmann::json runtime_stats() const override;
  void note_memory();  // the peak device memory in use, for runtime_stats

  const DecoderSpec c_;
  // All sessions of this model launch on one stream and share one Gemm plan cache, neither of which
  // is thread-safe: forward() from two threads at once is refused, not raced.
  ExclusiveUse in_use_;
  int device_;
  std::int64_t max_context_;
  // ModelArgs::batch_invariant: GEMMs with one algorithm per shape, every attention row through
  // the paged prefill kernel without key splits (decoder_cuda_runner.cpp).
  bool batch_invariant_;
  const DecoderShard* shard_;
  std::unique_ptr<cu::Stream> stream_;
  std::unique_ptr<cu::Gemm> gemm_;
  std::unique_ptr<cu::PrefillAttention> prefill_attention_;  // cuDNN's plans and workspace, or Zoo's kernel
  DeviceWeights w_;
  std::size_t peak_used_ = 0;
};

}  // namespace zoo::layers::cuda_backend
