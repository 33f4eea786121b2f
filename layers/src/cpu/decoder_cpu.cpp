// The decoder on the CPU in float32: the reference backend, and how users without a GPU run small
// models. Weights are widened to float32 once at load; the ops come from kernels/ (cpu_ops.hpp).
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstring>

#include "../decoder_backend.hpp"
#include "../graph/decoder_graph.hpp"
#include "zoo/error.hpp"
#include "zoo/exclusive_use.hpp"
#include "zoo/sampling.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {
namespace {

namespace ops = zoo::kernels::cpu;
using P = LayerParam;

// One layer's float32 parameters by role; absent ones (biases, q/k norm) are empty.
struct LayerWeights {
  std::array<HostTensor, kLayerParamCount> t;
  HostTensor& operator[](LayerParam p) { return t[static_cast<std::size_t>(p)]; }
  const float* get(LayerParam p) const {
    const HostTensor& x = t[static_cast<std::size_t>(p)];
    return x.empty() ? nullptr : x.as<float>();
  }
};

struct CpuWeights {
  HostTensor embed, final_norm, lm_head;  // lm_head empty when tied
  std::vector<LayerWeights> layers;
  std::vector<std::pair<std::string, HostTensor>> tables;  // Model::add_row_table, [rows, hidden]
  std::vector<std::int64_t> table_rows;
  const HostTensor& head() const { return lm_head.empty() ? embed : lm_head; }
};

// y[r, :] += bias for r < rows (a Linear's bias); nothing when the layer has none.
void add_bias(float* y, const float* bias, std::int64_t rows, std::int64_t n) {
  if (!bias) return;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < n; ++i) y[r * n + i] += bias[i];
}

class CpuSession : public Session, private DecoderOps {
 public:
  // `owner` keeps `spec` and `weights` alive for as long as this session lives.
  CpuSession(std::shared_ptr<const void> owner, const DecoderSpec& spec, const CpuWeights& weights,
             std::int64_t max_context)
      : owner_(std::move(owner)), c_(spec), w_(weights), max_context_(max_context), k_cache_(spec.num_layers),
        v_cache_(spec.num_layers), in_use_(fmt::format("a {} CPU session (its KV cache)", spec.family)) {}

  std::int64_t position() const override { return pos_; }
  void reset() override { pos_ = 0; }

  ForwardResult forward(const ForwardStep& step, DiagnosticHook* hook) override {
    const ExclusiveUse::Scope one_thread(in_use_);
    check_step(c_, step, pos_, max_context_, w_.table_rows);
    const auto T = static_cast<std::int64_t>(step.ids.size());
    const std::int64_t H = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate_size;
    ensure_cache(pos_ + T);
    step_ = &step;
    T_ = T;
    positions_.resize(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) positions_[t] = pos_ + t;
    for (auto* buffer : {&h_, &x_, &tmp_}) buffer->assign(static_cast<std::size_t>(T * H), 0.0f);
    for (auto* buffer : {&q_, &attn_}) buffer->assign(static_cast<std::size_t>(T * qd), 0.0f);
    for (auto* buffer : {&k_, &v_}) buffer->assign(static_cast<std::size_t>(T * kvd), 0.0f);
    for (auto* buffer : {&gate_, &up_}) buffer->assign(static_cast<std::size_t>(T * I), 0.0f);
    result_ = ForwardResult{};

    const OutputRequest& out = step.outputs;
    const std::int64_t rows = out.all_positions ? T : 1;
    run_decoder_graph(c_, *this, T, {rows, out.logits, out.logits && out.sample.has_value(), out.head_table, false},
                      hook);
    pos_ += T;
    // The host is this backend's device: the reference rule on the last row is the device path.
    if (out.hidden) result_.hidden = HostTensor::from_f32({rows, H}, {last_rows(rows), static_cast<std::size_t>(rows * H)});
    if (out.logits && !result_.sampled) result_.logits = std::move(logits_);
    step_ = nullptr;
    return std::move(result_);
  }

 private:
  // ---- DecoderOps: the ops of the step in forward(), float32, from kernels/cpu_ops.hpp ----
  void embed() override {
    const ForwardStep& step = *step_;
    const std::int64_t H = c_.hidden_size;
    float* h = h_.data();
    for (std::int64_t t = 0; t < T_; ++t)
      std::memcpy(&h[t * H], w_.embed.as<float>() + step.ids[static_cast<std::size_t>(t)] * H, H * sizeof(float));
    // The scale is the embedding module's (transformers' ScaledWordEmbedding): token rows only.
    if (c_.embed_scale > 0) ops::scale_inplace(h, T_ * H, static_cast<float>(c_.embed_scale));
    for (std::size_t i = 0; i < step.override_positions.size(); ++i)
      std::memcpy(&h[step.override_positions[i] * H], &step.override_rows[i * H], H * sizeof(float));
    if (const TableRows& r = step.table_rows; r.table >= 0) {
      const float* table = w_.tables[static_cast<std::size_t>(r.table)].second.as<float>();
      for (std::size_t i = 0; i < r.positions.size(); ++i) {
        float* row = &h[r.positions[i] * H];
        std::fill(row, row + H, 0.0f);
        for (std::int64_t j = 0; j < r.per_position; ++j)
          ops::add_inplace(row, table + r.ids[i * r.per_position + j] * H, H);
      }
    }
  }
  void input_norm() override { norm(w_.layers[0].get(P::input_norm)); }  // a copy without one
  void qkv(std::int64_t l) override {
    const auto& L = w_.layers[l];
    const std::int64_t H = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim();
    linear(x_.data(), L.get(P::q), L.get(P::q_bias), q_.data(), qd, H);
    linear(x_.data(), L.get(P::k), L.get(P::k_bias), k_.data(), kvd, H);
    linear(x_.data(), L.get(P::v), L.get(P::v_bias), v_.data(), kvd, H);
  }
  void qk_norm_rope_cache(std::int64_t l, bool keep_normed) override {
    const auto& L = w_.layers[l];
    const std::int64_t D = c_.head_dim, nh = c_.num_heads, nkv = c_.num_kv_heads, kvd = c_.kv_dim();
    if (c_.qk_norm != QkNorm::none) {
      // Per head: rows of head_dim; whole: one row per token over the projection.
      const bool per_head = c_.qk_norm == QkNorm::per_head;
      ops::rms_norm(q_.data(), L.get(P::q_norm), q_.data(), per_head ? T_ * nh : T_, per_head ? D : c_.q_dim(), eps());
      ops::rms_norm(k_.data(), L.get(P::k_norm), k_.data(), per_head ? T_ * nkv : T_, per_head ? D : kvd, eps());
      if (keep_normed) {
        q_normed_ = q_;
        k_normed_ = k_;
      }
    }
    const RopeTable& rope = c_.rope_of(l);
    ops::rope_half_split(q_.data(), T_, nh, D, c_.rotary(), positions_.data(), rope.inv_freq.data(),
                         rope.attention_scaling);
    ops::rope_half_split(k_.data(), T_, nkv, D, c_.rotary(), positions_.data(), rope.inv_freq.data(),
                         rope.attention_scaling);
    std::memcpy(k_cache_[l].data() + pos_ * kvd, k_.data(), k_.size() * sizeof(float));
    std::memcpy(v_cache_[l].data() + pos_ * kvd, v_.data(), v_.size() * sizeof(float));
  }
  void attention(std::int64_t l) override {
    const LayerSpec layer = c_.layer(l);
    const ops::AttentionOptions options{.scale = c_.attention_scale(),
                                        .softcap = static_cast<float>(c_.attn_softcap),
                                        .window = layer.attention == AttentionKind::sliding ? layer.window : 0};
    ops::attention_causal_gqa(q_.data(), k_cache_[l].data(), v_cache_[l].data(), attn_.data(), T_, pos_, c_.num_heads,
                              c_.num_kv_heads, c_.head_dim, options);
  }
  void o_proj(std::int64_t l) override {
    const auto& L = w_.layers[l];
    linear(attn_.data(), L.get(P::o), L.get(P::o_bias), tmp_.data(), c_.hidden_size, c_.q_dim());
  }
  void out_norm(std::int64_t l, OutNorm which) override {
    const float* weight = w_.layers[l].get(which == OutNorm::attention ? P::post_attn_out_norm : P::post_mlp_norm);
    ops::rms_norm(tmp_.data(), weight, tmp_.data(), T_, c_.hidden_size, eps());
  }
  void add_norm(std::int64_t l, NextNorm next) override {
    ops::add_inplace(h_.data(), tmp_.data(), T_ * c_.hidden_size);
    if (next == NextNorm::pre_mlp) norm(w_.layers[l].get(P::post_norm));
    else norm(l + 1 < c_.num_layers ? w_.layers[l + 1].get(P::input_norm) : w_.final_norm.as<float>());
  }
  void gate_up(std::int64_t l) override {
    const auto& L = w_.layers[l];
    const std::int64_t H = c_.hidden_size, I = c_.intermediate_size;
    linear(x_.data(), L.get(P::gate), L.get(P::gate_bias), gate_.data(), I, H);
    linear(x_.data(), L.get(P::up), L.get(P::up_bias), up_.data(), I, H);
  }
  void act() override {
    const std::int64_t n = T_ * c_.intermediate_size;
    switch (c_.activation) {
      case Activation::silu: ops::silu_mul(gate_.data(), up_.data(), gate_.data(), n); break;
      case Activation::gelu_tanh: ops::gelu_tanh_mul(gate_.data(), up_.data(), gate_.data(), n); break;
      case Activation::gelu: ops::gelu_mul(gate_.data(), up_.data(), gate_.data(), n); break;
    }
  }
  void gate_up_act(std::int64_t l) override {
    gate_up(l);
    act();
  }
  void down(std::int64_t l) override {
    const auto& L = w_.layers[l];
    linear(gate_.data(), L.get(P::down), L.get(P::down_bias), tmp_.data(), c_.hidden_size, c_.intermediate_size);
  }
  void logits(std::int64_t rows) override {
    const std::int64_t V = c_.vocab_size, H = c_.hidden_size;
    logits_ = HostTensor(DType::F32, {rows, V});
    ops::linear(last_rows(rows), w_.head().as<float>(), logits_.as<float>(), rows, V, H);
    if (c_.final_softcap > 0) ops::softcap_inplace(logits_.as<float>(), rows * V, static_cast<float>(c_.final_softcap));
  }
  void sample(std::int64_t row) override {
    const std::int64_t V = c_.vocab_size;
    result_.sampled =
        sample_logits(logits_.span<float>().subspan(static_cast<std::size_t>(row * V), static_cast<std::size_t>(V)),
                      *step_->outputs.sample);
  }
  void head(int table, std::int64_t rows) override {
    const auto& [name, rows_table] = w_.tables[static_cast<std::size_t>(table)];
    HostTensor out(DType::F32, {rows, rows_table.shape()[0]});
    ops::linear(last_rows(rows), rows_table.as<float>(), out.as<float>(), rows, rows_table.shape()[0], c_.hidden_size);
    result_.extra.emplace_back(name, std::move(out));
  }
  void sample_head(int, std::int64_t) override {}  // the caller samples the head output (OutputRequest)
  void tap(DiagnosticHook& hook, const std::string& name, Value value, std::int64_t l) override {
    const std::int64_t H = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate_size;
    const auto [data, cols] = [&]() -> std::pair<const float*, std::int64_t> {
      switch (value) {
        case Value::embed: case Value::attn_residual: case Value::output: return {h_.data(), H};
        case Value::input_norm: case Value::post_attn_norm: case Value::pre_mlp_norm: case Value::final_norm:
          return {x_.data(), H};
        case Value::q_proj: case Value::q_rope: return {q_.data(), qd};
        case Value::k_proj: case Value::k_rope: return {k_.data(), kvd};
        case Value::v_proj: return {v_.data(), kvd};
        case Value::q_norm: return {q_normed_.data(), qd};
        case Value::k_norm: return {k_normed_.data(), kvd};
        case Value::attn: return {attn_.data(), qd};
        case Value::o_proj: case Value::down_proj: case Value::post_attn_out_norm: case Value::post_mlp_norm:
          return {tmp_.data(), H};
        case Value::gate_proj: case Value::act: return {gate_.data(), I};
        case Value::up_proj: return {up_.data(), I};
        case Value::logits: return {logits_.as<float>(), c_.vocab_size};
      }
      return {nullptr, 0};
    }();
    (void)l;
    const std::int64_t rows = value == Value::logits ? logits_.shape()[0] : T_;
    hook.record(name, TensorView{data, DType::F32, {rows, cols}, Device{}});
  }

  float eps() const { return static_cast<float>(c_.rms_norm_eps); }
  // x = rms_norm(h) with `weight`; x = h where the placement has no norm (weight null).
  void norm(const float* weight) {
    if (weight) ops::rms_norm(h_.data(), weight, x_.data(), T_, c_.hidden_size, eps());
    else x_ = h_;
  }
  // y = in @ W^T (+ bias) over the step's rows.
  void linear(const float* in, const float* weight, const float* bias, float* out, std::int64_t n, std::int64_t k) {
    ops::linear(in, weight, out, T_, n, k);
    add_bias(out, bias, T_, n);
  }
  const float* last_rows(std::int64_t rows) const { return x_.data() + (T_ - rows) * c_.hidden_size; }

 private:
  // The cache grows geometrically up to max_context, so short sessions stay small.
  void ensure_cache(std::int64_t tokens) {
    const auto needed = static_cast<std::size_t>(tokens * c_.kv_dim());
    if (k_cache_[0].size() >= needed) return;
    const auto capacity = std::min<std::size_t>(std::max(needed, 2 * k_cache_[0].size()),
                                                static_cast<std::size_t>(max_context_ * c_.kv_dim()));
    for (auto* cache : {&k_cache_, &v_cache_})
      for (auto& layer : *cache) layer.resize(capacity);
  }

  std::shared_ptr<const void> owner_;  // first member: destroyed last
  const DecoderSpec& c_;
  const CpuWeights& w_;
  std::int64_t max_context_;
  std::int64_t pos_ = 0;
  std::vector<std::vector<float>> k_cache_, v_cache_;
  ExclusiveUse in_use_;
  // The step in flight (forward() to its return) and its activations.
  const ForwardStep* step_ = nullptr;
  std::int64_t T_ = 0;
  std::vector<std::int64_t> positions_;
  std::vector<float> h_, x_, q_, k_, v_, q_normed_, k_normed_, attn_, tmp_, gate_, up_;
  HostTensor logits_;
  ForwardResult result_;
};

class CpuBackend : public DecoderBackend {
 public:
  CpuBackend(const DecoderSpec& spec, const ModelArgs& args) : c_(spec), max_context_(args.max_context) {}

  void load(const WeightSource& source, const std::vector<RowTableSource>& tables, const ProgressFn& progress) override {
    std::size_t total = 0, done = 0;
    for (const auto& req : decoder_requirements(c_)) total += source.info(req.name)->nbytes;
    for (const auto& t : tables) total += t.rows.nbytes();
    auto widen = [&](const TensorView& view) {
      HostTensor out(DType::F32, view.shape);
      const auto n = view.numel();
      const auto elem = dtype_size(view.dtype);
      kernels::ThreadPool::global().parallel_for(n, 1 << 16, [&](std::int64_t b, std::int64_t e) {
        TensorView part{static_cast<const std::byte*>(view.data) + b * elem, view.dtype, {e - b}, Device{}};
        to_f32(part, std::span<float>(out.as<float>() + b, static_cast<std::size_t>(e - b)));
      });
      done += view.nbytes();
      if (progress) progress(done, total);
      return out;
    };
    auto fetch = [&](const std::string& name) { return widen(source.view(name)); };
    // A 1 + w norm scales by 1 + w computed in float32, as transformers does: folded here once.
    auto fetch_norm = [&](const std::string& name) {
      HostTensor w = fetch(name);
      if (c_.norm == NormKind::rms_one_plus)
        for (float& v : std::span(w.as<float>(), static_cast<std::size_t>(w.numel()))) v = 1.0f + v;
      return w;
    };
    w_.embed = fetch(c_.embed_weight());
    w_.layers.resize(static_cast<std::size_t>(c_.num_layers));
    for (std::int64_t l = 0; l < c_.num_layers; ++l)
      for (const auto& t : layer_tensors(c_, l))
        w_.layers[l][t.param] = is_norm(t.param) ? fetch_norm(t.name) : fetch(t.name);
    w_.final_norm = fetch_norm(c_.final_norm_weight());
    if (!c_.tie_word_embeddings) w_.lm_head = fetch(c_.lm_head_weight());
    for (const auto& t : tables) {
      w_.tables.emplace_back(t.name, widen(t.rows));
      w_.table_rows.push_back(t.rows.shape[0]);
    }
  }

  std::unique_ptr<Session> new_session() override {
    return std::make_unique<CpuSession>(shared_from_this(), c_, w_, max_context_);
  }

  // What one decode step reads (for `zoo bench`'s weight GB/s): every float32 weight once, except
  // an untied embedding table, of which a step reads one row.
  nlohmann::json runtime_stats() const override {
    std::size_t bytes = w_.final_norm.nbytes() + w_.head().nbytes();
    if (!w_.lm_head.empty()) bytes += static_cast<std::size_t>(c_.hidden_size) * sizeof(float);
    for (const auto& L : w_.layers)
      for (const auto& tensor : L.t) bytes += tensor.empty() ? 0 : tensor.nbytes();
    return {{"decode_weight_bytes", bytes}};
  }

 private:
  DecoderSpec c_;
  std::int64_t max_context_;
  CpuWeights w_;
};

}  // namespace

std::shared_ptr<DecoderBackend> make_cpu_backend(const DecoderSpec& spec, const ModelArgs& args) {
  return std::make_shared<CpuBackend>(spec, args);
}

}  // namespace zoo::layers
