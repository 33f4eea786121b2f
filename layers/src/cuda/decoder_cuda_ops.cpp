// The layer graph's ops on CUDA (graph/decoder_graph.hpp): which kernel runs each op of a step,
// the fusions (bias in the GEMM epilogue, q/k norm + RoPE + cache write in one kernel, the
// residual add with the next norm, gate|up with SiLU-and-multiply at m = 1) and where each tapped
// value lives on the device; under tensor parallelism the reduce points, the vocabulary-split head
// and the gathered taps.
#include "decoder_cuda.hpp"

#include <vector>

#include "../parallel/rank_shares.hpp"

#include "zoo/dtype.hpp"
#include "zoo/kernels/cuda/grouped_gemm.hpp"
#include "zoo/kernels/cuda/moe.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {

HostTensor CudaRows::download_f32(const Bf16* src, std::int64_t rows, std::int64_t cols, std::int64_t stride) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(rows * cols));
  ZOO_CUDA_CHECK(cudaMemcpy2DAsync(bits.data(), cols * 2, src, stride * 2, cols * 2, rows, cudaMemcpyDeviceToHost,
                                   *b_.stream_));
  b_.stream_->synchronize();
  HostTensor out(DType::F32, {rows, cols});
  for (std::size_t i = 0; i < bits.size(); ++i) out.as<float>()[i] = bf16_to_f32(bits[i]);
  return out;
}

cu::NormWeight CudaRows::norm_kind() const {
  return c_.norm == NormKind::rms_one_plus ? cu::NormWeight::one_plus : cu::NormWeight::times_w;
}

void CudaRows::input_norm() {
  const Bf16* weight = b_.w_.layers[0].input_norm;
  if (!weight) {  // norms after the sublayers only: layer 0 reads the embeddings as they are
    ZOO_CUDA_CHECK(cudaMemcpyAsync(a_.x.data(), a_.h.data(), static_cast<std::size_t>(T_ * c_.hidden_size) * 2,
                                   cudaMemcpyDeviceToDevice, *b_.stream_));
    return;
  }
  cu::rms_norm(a_.h.as<Bf16>(), weight, a_.x.as<Bf16>(), T_, c_.hidden_size, static_cast<float>(c_.rms_norm_eps),
               *b_.stream_, norm_kind());
  profile_.mark("norm");
}

void CudaRows::qkv(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  // Biases go through the GEMM epilogue: one rounding of (x @ W^T + b), as torch does.
  b_.gemm_->linear_bias(a_.x.as<Bf16>(), L.qkv, L.qkv_bias, a_.qkv.as<Bf16>(), T_, c_.q_dim() + 2 * c_.kv_dim(),
                        c_.hidden_size, *b_.stream_);
  profile_.mark("gemm qkv");
}

cu::QkNormRopeArgs CudaRows::rope_args(std::int64_t l, bool keep_normed) {
  const LayerPtrs& L = b_.w_.layers[l];
  const std::int64_t qd = c_.q_dim(), kvd = c_.kv_dim(), qkv_cols = qd + 2 * kvd;
  auto* qkv = a_.qkv.as<Bf16>();
  const bool whole = c_.qk_norm == QkNorm::whole;
  const auto eps = static_cast<float>(c_.rms_norm_eps);
  if (whole && rank_.collectives) {
    // The projection is split over the ranks, so is its mean of squares: each rank's sums, gathered
    // and added in rank order; a kv head held by several ranks (kv_replicas) counts once.
    const int ranks = rank_.collectives->size();
    const auto split_norm = [&](Bf16* x, const Bf16* w, std::int64_t cols, int replicas) {
      cu::row_sum_squares(x, a_.norm_sums.as<float>(), T_, cols, qkv_cols, *b_.stream_);
      rank_.collectives->all_gather(a_.norm_sums.as<float>(), T_, a_.norm_pieces.as<float>(), *b_.stream_);
      cu::rms_norm_split(x, w, x, T_, cols, qkv_cols, qkv_cols, a_.norm_pieces.as<float>(), ranks,
                         static_cast<float>(replicas), static_cast<float>(cols * ranks / replicas), eps,
                         *b_.stream_, norm_kind());
    };
    split_norm(qkv, L.q_norm, qd, 1);
    split_norm(qkv + qd, L.k_norm, kvd, rank_.shard->kv_replicas);
  } else if (whole) {  // over each token's whole q and k projections, in place; the fused kernel only rotates
    cu::rms_norm(qkv, L.q_norm, qkv, T_, qd, eps, *b_.stream_, norm_kind(), qkv_cols, qkv_cols);
    cu::rms_norm(qkv + qd, L.k_norm, qkv + qd, T_, kvd, eps, *b_.stream_, norm_kind(), qkv_cols, qkv_cols);
  }
  cu::QkNormRopeArgs rope;
  rope.q = qkv;
  rope.q_stride = qkv_cols;
  rope.k = qkv + qd;
  rope.k_stride = qkv_cols;
  rope.v = qkv + qd + kvd;
  rope.v_stride = qkv_cols;
  rope.q_norm_weight = whole ? nullptr : L.q_norm;
  rope.k_norm_weight = whole ? nullptr : L.k_norm;
  rope.one_plus = c_.norm == NormKind::rms_one_plus;
  rope.rotary_dim = static_cast<int>(c_.rotary());
  rope.q_out = a_.q.as<Bf16>();
  rope.q_normed = keep_normed && !whole ? a_.q_normed.as<Bf16>() : nullptr;
  rope.k_normed = keep_normed && !whole ? a_.k_normed.as<Bf16>() : nullptr;
  rope.positions = positions_dev_.as<std::int32_t>();
  rope.tokens = T_;
  rope.q_heads = static_cast<int>(c_.num_heads);
  rope.kv_heads = static_cast<int>(c_.num_kv_heads);
  rope.head_dim = static_cast<int>(c_.head_dim);
  rope.eps = eps;
  rope.inv_freq = b_.w_.inv_freq[static_cast<std::size_t>(c_.layer(l).rope)];
  rope.attention_scaling = c_.rope_of(l).attention_scaling;
  return rope;
}

void CudaRows::o_proj(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  b_.gemm_->linear_bias(a_.attn.as<Bf16>(), L.o, L.o_bias, a_.tmp.as<Bf16>(), T_, c_.hidden_size, c_.q_dim(),
                        *b_.stream_);
  profile_.mark("gemm o");
}

void CudaRows::out_norm(std::int64_t l, OutNorm which) {
  const LayerPtrs& L = b_.w_.layers[l];
  cu::rms_norm(a_.tmp.as<Bf16>(), which == OutNorm::attention ? L.post_attn_out_norm : L.post_mlp_norm,
               a_.tmp.as<Bf16>(), T_, c_.hidden_size, static_cast<float>(c_.rms_norm_eps), *b_.stream_, norm_kind());
  profile_.mark("norm");
}

// The norm after a residual add; null where the placement has none (NormPlacement::post: x = h).
const Bf16* CudaRows::next_norm_weight(std::int64_t l, NextNorm next) const {
  return next == NextNorm::pre_mlp ? b_.w_.layers[l].post_norm
         : l + 1 < c_.num_layers   ? b_.w_.layers[l + 1].input_norm
                                   : b_.w_.final_norm;
}

// The residual add fused with the norm that follows it.
void CudaRows::add_norm(std::int64_t l, NextNorm next) {
  cu::add_rms_norm(a_.h.as<Bf16>(), a_.tmp.as<Bf16>(), next_norm_weight(l, next), a_.x.as<Bf16>(), T_,
                   c_.hidden_size, static_cast<float>(c_.rms_norm_eps), *b_.stream_, norm_kind());
  profile_.mark("add+norm");
}

// The sublayer's output norm, the residual add and the next norm in one kernel (sandwich and post
// placements: two launches fewer per layer); the same roundings as out_norm then add_norm.
void CudaRows::out_norm_add_norm(std::int64_t l, OutNorm which, NextNorm next) {
  const LayerPtrs& L = b_.w_.layers[l];
  cu::norm_add_rms_norm(a_.tmp.as<Bf16>(), which == OutNorm::attention ? L.post_attn_out_norm : L.post_mlp_norm,
                        a_.h.as<Bf16>(), next_norm_weight(l, next), a_.x.as<Bf16>(), T_, c_.hidden_size,
                        static_cast<float>(c_.rms_norm_eps), *b_.stream_, norm_kind());
  profile_.mark("norm+add+norm");
}

void CudaRows::gate_up(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  b_.gemm_->linear_bias(a_.x.as<Bf16>(), L.gate_up, L.gate_up_bias, a_.gate_up.as<Bf16>(), T_,
                        2 * c_.intermediate_size, c_.hidden_size, *b_.stream_);
  profile_.mark("gemm gate_up");
}

cu::GatedActivation CudaRows::gated_activation() const {
  return c_.activation == Activation::silu        ? cu::GatedActivation::silu
         : c_.activation == Activation::gelu_tanh ? cu::GatedActivation::gelu_tanh
                                                  : cu::GatedActivation::gelu;
}

void CudaRows::act() {
  cu::act_and_mul(gated_activation(), a_.gate_up.as<Bf16>(), a_.act.as<Bf16>(), T_, c_.intermediate_size, *b_.stream_);
  profile_.mark("act*mul");
}

void CudaRows::gate_up_act(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  if (L.gate_up_bias) {  // the bias goes in before the activation: cuBLASLt's epilogue, then act_and_mul
    gate_up(l);
    act();
    return;
  }
  // One kernel at m = 1 (the projection is never stored), the two kernels otherwise.
  b_.gemm_->linear_act_mul(gated_activation(), a_.x.as<Bf16>(), L.gate_up, a_.gate_up.as<Bf16>(), a_.act.as<Bf16>(),
                           T_, c_.intermediate_size, c_.hidden_size, *b_.stream_);
  profile_.mark("gemm gate_up+act");
}

void CudaRows::down(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  b_.gemm_->linear_bias(a_.act.as<Bf16>(), L.down, L.down_bias, a_.tmp.as<Bf16>(), T_, c_.hidden_size,
                        c_.intermediate_size, *b_.stream_);
  profile_.mark("gemm down");
}

// The router GEMM in float32, then on the device: its logits rounded to bf16 (transformers' bf16
// router), the softmax, top k and renormalization (kernels/cuda/moe.hpp).
void CudaRows::router(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  const auto E = static_cast<int>(c_.moe.experts), k = static_cast<int>(c_.moe.top_k);
  b_.gemm_->linear(a_.x.as<Bf16>(), L.router, a_.router_logits.as<float>(), T_, E, c_.hidden_size, *b_.stream_);
  cu::moe_route(a_.router_logits.as<float>(), T_, E, k, c_.moe.normalize_top_k, a_.topk_ids.as<std::int32_t>(),
                a_.topk_weights.as<float>(), *b_.stream_);
  profile_.mark("moe router");
}

// Few rows: kernels that stream only each row's chosen experts (decode). Many rows: grouped by
// expert on the device into one grouped GEMM per projection that reads the group sizes there
// (grouped_gemm.hpp). Both are graph-capturable. ZOO_MOE_CUBLAS=1: cuBLAS's grouped GEMM instead,
// whose sizes come from the counts read back to the host (one synchronization per layer).
void CudaRows::experts(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  const auto E = static_cast<int>(c_.moe.experts), k = static_cast<int>(c_.moe.top_k);
  const std::int64_t H = c_.hidden_size, Ie = c_.moe.intermediate_size, A = T_ * k;
  cudaStream_t s = *b_.stream_;
  const int sms = cu::device_properties(b_.device_).multiprocessors;
  const auto* ids = a_.topk_ids.as<std::int32_t>();
  const auto* weights = a_.topk_weights.as<float>();
  if (T_ <= kMoeStreamRows) {
    cu::moe_gate_up_act(gated_activation(), a_.x.as<Bf16>(), L.experts_gate_up, ids, T_, k, Ie, H,
                        a_.expert_act.as<Bf16>(), sms, s);
    cu::moe_down_sum(a_.expert_act.as<Bf16>(), L.experts_down, ids, weights, T_, k, H, Ie, a_.tmp.as<Bf16>(), sms, s);
    profile_.mark("moe experts");
    return;
  }
  cu::moe_group(ids, T_, k, E, a_.expert_counts.as<std::int32_t>(), a_.expert_offsets.as<std::int32_t>(),
                a_.row_of.as<std::int32_t>(), a_.token_of.as<std::int32_t>(), s);
  cu::gather_rows(a_.x.as<Bf16>(), a_.token_of.as<std::int32_t>(), A, H, a_.sorted_x.as<Bf16>(), s);
  // One grouped projection y = x @ W_e^T over every expert's rows.
  const std::int32_t* counts = nullptr;
  if (moe_cublas_) {
    ZOO_CUDA_CHECK(cudaMemcpyAsync(a_.counts_host.data(), a_.expert_counts.data(),
                                   static_cast<std::size_t>(E) * sizeof(std::int32_t), cudaMemcpyDeviceToHost,
                                   s));
    b_.stream_->synchronize();
    counts = a_.counts_host.as<std::int32_t>();
  }
  const auto project = [&](const Bf16* x, const Bf16* w, std::int64_t w_stride, Bf16* y, std::int64_t n,
                           std::int64_t kk) {
    if (counts)
      b_.gemm_->grouped_linear(x, w, w_stride, counts, E, y, n, kk, s);
    else
      cu::grouped_gemm(x, w, w_stride, a_.expert_offsets.as<std::int32_t>(), E, A, n, kk, y, s);
  };
  project(a_.sorted_x.as<Bf16>(), L.experts_gate_up, 2 * Ie * H, a_.sorted_gate_up.as<Bf16>(), 2 * Ie, H);
  cu::act_and_mul(gated_activation(), a_.sorted_gate_up.as<Bf16>(), a_.expert_act.as<Bf16>(), A, Ie, s);
  project(a_.expert_act.as<Bf16>(), L.experts_down, H * Ie, a_.sorted_y.as<Bf16>(), H, Ie);
  cu::moe_combine(a_.sorted_y.as<Bf16>(), a_.row_of.as<std::int32_t>(), ids, weights, T_, k, H, a_.tmp.as<Bf16>(), s);
  profile_.mark("moe experts (grouped)");
}

void CudaRows::reduce_proj() {
  if (!rank_.collectives) return;
  rank_.collectives->all_reduce(a_.tmp.as<Bf16>(), T_ * c_.hidden_size, *b_.stream_);
  profile_.mark("all-reduce");
}

void CudaRows::head_logits(const Bf16* x_rows, std::int64_t rows) {
  ensure_logits(rows);
  const std::int64_t V = c_.vocab_size, H = c_.hidden_size;
  cudaStream_t s = *b_.stream_;
  const auto softcap = [&](float* logits, std::int64_t n) {
    if (c_.final_softcap > 0) cu::softcap(logits, n, static_cast<float>(c_.final_softcap), s);
  };
  logits_computed_ = rows;
  if (!rank_.shard) {
    b_.gemm_->linear(x_rows, b_.w_.head, logits_dev_.as<float>(), rows, V, H, s);
    softcap(logits_dev_.as<float>(), rows * V);
    profile_.mark("gemm head");
    return;
  }
  // This rank's vocabulary rows (the head is held whole), then every rank's piece side by side:
  // every rank holds the same logits and picks the same token.
  const std::int64_t begin = rank_.shard->vocab_begin, Vr = rank_.shard->vocab_end - begin;
  const int ranks = rank_.collectives->size();
  const auto piece_bytes = static_cast<std::size_t>(rows * Vr) * sizeof(float);
  if (head_piece_.size() < piece_bytes) {
    head_piece_ = cu::DeviceBuffer(piece_bytes);
    head_pieces_ = cu::DeviceBuffer(piece_bytes * static_cast<std::size_t>(ranks));
    buffers_moved();
  }
  b_.gemm_->linear(x_rows, b_.w_.head + begin * H, head_piece_.as<float>(), rows, Vr, H, s);
  softcap(head_piece_.as<float>(), rows * Vr);
  rank_.collectives->all_gather(head_piece_.as<float>(), rows * Vr, head_pieces_.as<float>(), s);
  for (int r = 0; r < ranks; ++r)
    ZOO_CUDA_CHECK(cudaMemcpy2DAsync(
        logits_dev_.as<float>() + r * Vr, static_cast<std::size_t>(V) * sizeof(float),
        head_pieces_.as<float>() + r * rows * Vr, static_cast<std::size_t>(Vr) * sizeof(float),
        static_cast<std::size_t>(Vr) * sizeof(float), static_cast<std::size_t>(rows),
        cudaMemcpyDeviceToDevice, s));
  profile_.mark("gemm head");
}

void CudaRows::record_tap(DiagnosticHook& hook, const std::string& name, Value value, const Bf16* k_rope) {
  const std::int64_t H = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate_size;
  const std::int64_t qkv_cols = qd + 2 * kvd;
  if (value == Value::router_logits || value == Value::router_topk_weights) {
    const bool logits = value == Value::router_logits;
    HostTensor out(DType::F32, {T_, logits ? c_.moe.experts : c_.moe.top_k});
    ZOO_CUDA_CHECK(cudaMemcpyAsync(out.data(), (logits ? a_.router_logits : a_.topk_weights).data(), out.nbytes(),
                                   cudaMemcpyDeviceToHost, *b_.stream_));
    b_.stream_->synchronize();
    hook.record(name, out.view());
    return;
  }
  if (value == Value::router_topk_ids) {
    std::vector<std::int32_t> ids(static_cast<std::size_t>(T_ * c_.moe.top_k));
    ZOO_CUDA_CHECK(cudaMemcpyAsync(ids.data(), a_.topk_ids.data(), ids.size() * 4, cudaMemcpyDeviceToHost, *b_.stream_));
    b_.stream_->synchronize();
    HostTensor out(DType::I64, {T_, c_.moe.top_k});
    std::copy(ids.begin(), ids.end(), out.as<std::int64_t>());
    hook.record(name, out.view());
    return;
  }
  if (value == Value::logits) {
    HostTensor all(DType::F32, {logits_computed_, c_.vocab_size});
    ZOO_CUDA_CHECK(cudaMemcpyAsync(all.data(), logits_dev_.data(), all.nbytes(), cudaMemcpyDeviceToHost, *b_.stream_));
    b_.stream_->synchronize();
    hook.record(name, all.view());
    return;
  }
  struct Where {
    const Bf16* data;
    std::int64_t cols, stride;
  };
  const Where w = [&]() -> Where {
    switch (value) {
      case Value::embed: case Value::attn_residual: case Value::output: return {a_.h.as<Bf16>(), H, H};
      case Value::input_norm: case Value::post_attn_norm: case Value::pre_mlp_norm: case Value::final_norm:
        return {a_.x.as<Bf16>(), H, H};
      case Value::q_proj: return {a_.qkv.as<Bf16>(), qd, qkv_cols};
      case Value::k_proj: return {a_.qkv.as<Bf16>() + qd, kvd, qkv_cols};
      case Value::v_proj: return {a_.qkv.as<Bf16>() + qd + kvd, kvd, qkv_cols};
      // A whole-projection norm is done in place in the q|k|v buffer (the projections are tapped before).
      case Value::q_norm:
        return c_.qk_norm == QkNorm::whole ? Where{a_.qkv.as<Bf16>(), qd, qkv_cols} : Where{a_.q_normed.as<Bf16>(), qd, qd};
      case Value::k_norm:
        return c_.qk_norm == QkNorm::whole ? Where{a_.qkv.as<Bf16>() + qd, kvd, qkv_cols}
                                           : Where{a_.k_normed.as<Bf16>(), kvd, kvd};
      case Value::q_rope: return {a_.q.as<Bf16>(), qd, qd};
      case Value::k_rope:
        return {k_rope, kvd, kvd};
      case Value::attn: return {a_.attn.as<Bf16>(), qd, qd};
      case Value::o_proj: case Value::down_proj: case Value::post_attn_out_norm: case Value::post_mlp_norm:
      case Value::moe_output:
        return {a_.tmp.as<Bf16>(), H, H};
      case Value::gate_proj: return {a_.gate_up.as<Bf16>(), I, 2 * I};
      case Value::up_proj: return {a_.gate_up.as<Bf16>() + I, I, 2 * I};
      case Value::act: return {a_.act.as<Bf16>(), I, I};
      case Value::router_logits: case Value::router_topk_ids: case Value::router_topk_weights:  // above
      case Value::logits: break;
    }
    return {nullptr, 0, 0};
  }();
  HostTensor rows = download_f32(w.data, T_, w.cols, w.stride);
  const int replicas = rank_.comm ? split_replicas(value, *rank_.shard) : 0;
  if (replicas == 0) return hook.record(name, rows.view());
  // Each rank holds its heads' or units' columns: the tap is all of them, in rank order.
  HostTensor whole(DType::F32, {T_, w.cols * rank_.comm->size() / replicas});
  std::vector<float> scratch;
  gather_columns(*rank_.comm, rows.as<float>(), T_, w.cols, replicas, scratch, whole.as<float>());
  hook.record(name, whole.view());
}

}  // namespace zoo::layers::cuda_backend
