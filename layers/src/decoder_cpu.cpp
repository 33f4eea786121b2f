// The decoder on the CPU in float32: the reference backend, and how users without a GPU run small
// models. Weights are widened to float32 once at load; the ops come from kernels/ (cpu_ops.hpp).
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstring>

#include "decoder_backend.hpp"
#include "zoo/error.hpp"
#include "zoo/exclusive_use.hpp"
#include "zoo/sampling.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::layers {
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

// Hands tensors to a DiagnosticHook under their tap names; free when there is no hook.
class Taps {
 public:
  explicit Taps(DiagnosticHook* hook) : hook_(hook) {}
  void put(const std::string& name, const float* data, Shape shape) {
    if (!hook_ || !hook_->wants(name)) return;
    hook_->record(name, TensorView{data, DType::F32, std::move(shape), Device{}});
  }
  void layer(std::int64_t l, const char* stage, const float* data, Shape shape) {
    if (hook_) put(fmt::format("layer.{}.{}", l, stage), data, std::move(shape));
  }
  bool wants(const std::string& name) const { return hook_ && hook_->wants(name); }

 private:
  DiagnosticHook* hook_;
};

class CpuSession : public Session {
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
    const std::int64_t H = c_.hidden_size, D = c_.head_dim, nh = c_.num_heads, nkv = c_.num_kv_heads;
    const std::int64_t qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate_size, V = c_.vocab_size;
    ensure_cache(pos_ + T);
    Taps taps(hook);

    std::vector<float> h(static_cast<std::size_t>(T * H));
    for (std::int64_t t = 0; t < T; ++t)
      std::memcpy(&h[t * H], w_.embed.as<float>() + step.ids[static_cast<std::size_t>(t)] * H, H * sizeof(float));
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
    taps.put("embed", h.data(), {T, H});

    std::vector<std::int64_t> positions(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) positions[t] = pos_ + t;
    std::vector<float> x(T * H), q(T * qd), k(T * kvd), v(T * kvd), attn(T * qd), tmp(T * H);
    std::vector<float> gate(T * I), up(T * I);
    const float eps = static_cast<float>(c_.rms_norm_eps);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const float* inv_freq = c_.rope.inv_freq.data();

    for (std::int64_t l = 0; l < c_.num_layers; ++l) {
      const auto& L = w_.layers[l];
      ops::rms_norm(h.data(), L.get(P::input_norm), x.data(), T, H, eps);
      taps.layer(l, "input_norm", x.data(), {T, H});
      ops::linear(x.data(), L.get(P::q), q.data(), T, qd, H);
      add_bias(q.data(), L.get(P::q_bias), T, qd);
      ops::linear(x.data(), L.get(P::k), k.data(), T, kvd, H);
      add_bias(k.data(), L.get(P::k_bias), T, kvd);
      ops::linear(x.data(), L.get(P::v), v.data(), T, kvd, H);
      add_bias(v.data(), L.get(P::v_bias), T, kvd);
      taps.layer(l, "q_proj", q.data(), {T, qd});
      taps.layer(l, "k_proj", k.data(), {T, kvd});
      taps.layer(l, "v_proj", v.data(), {T, kvd});
      if (c_.qk_norm) {
        ops::rms_norm(q.data(), L.get(P::q_norm), q.data(), T * nh, D, eps);
        ops::rms_norm(k.data(), L.get(P::k_norm), k.data(), T * nkv, D, eps);
        taps.layer(l, "q_norm", q.data(), {T, qd});
        taps.layer(l, "k_norm", k.data(), {T, kvd});
      }
      ops::rope_half_split(q.data(), T, nh, D, positions.data(), inv_freq, c_.rope.attention_scaling);
      ops::rope_half_split(k.data(), T, nkv, D, positions.data(), inv_freq, c_.rope.attention_scaling);
      taps.layer(l, "q_rope", q.data(), {T, qd});
      taps.layer(l, "k_rope", k.data(), {T, kvd});
      std::memcpy(k_cache_[l].data() + pos_ * kvd, k.data(), k.size() * sizeof(float));
      std::memcpy(v_cache_[l].data() + pos_ * kvd, v.data(), v.size() * sizeof(float));
      ops::attention_causal_gqa(q.data(), k_cache_[l].data(), v_cache_[l].data(), attn.data(), T, pos_, nh, nkv, D,
                                scale);
      taps.layer(l, "attn", attn.data(), {T, qd});
      ops::linear(attn.data(), L.get(P::o), tmp.data(), T, H, qd);
      add_bias(tmp.data(), L.get(P::o_bias), T, H);
      taps.layer(l, "o_proj", tmp.data(), {T, H});
      ops::add_inplace(h.data(), tmp.data(), T * H);
      taps.layer(l, "attn_residual", h.data(), {T, H});
      ops::rms_norm(h.data(), L.get(P::post_norm), x.data(), T, H, eps);
      taps.layer(l, "post_attn_norm", x.data(), {T, H});
      ops::linear(x.data(), L.get(P::gate), gate.data(), T, I, H);
      add_bias(gate.data(), L.get(P::gate_bias), T, I);
      ops::linear(x.data(), L.get(P::up), up.data(), T, I, H);
      add_bias(up.data(), L.get(P::up_bias), T, I);
      taps.layer(l, "gate_proj", gate.data(), {T, I});
      taps.layer(l, "up_proj", up.data(), {T, I});
      ops::silu_mul(gate.data(), up.data(), gate.data(), T * I);
      taps.layer(l, "act", gate.data(), {T, I});
      ops::linear(gate.data(), L.get(P::down), tmp.data(), T, H, I);
      add_bias(tmp.data(), L.get(P::down_bias), T, H);
      taps.layer(l, "down_proj", tmp.data(), {T, H});
      ops::add_inplace(h.data(), tmp.data(), T * H);
      taps.layer(l, "output", h.data(), {T, H});
    }
    pos_ += T;

    ops::rms_norm(h.data(), w_.final_norm.as<float>(), x.data(), T, H, eps);
    taps.put("final_norm", x.data(), {T, H});

    // Only the rows someone asked for go through the (vocab-sized) head.
    ForwardResult result;
    const std::int64_t rows = step.outputs.all_positions ? T : 1;
    const float* last = x.data() + (T - rows) * H;
    if (step.outputs.hidden) result.hidden = HostTensor::from_f32({rows, H}, {last, static_cast<std::size_t>(rows * H)});
    // The returned rows get their own product even when a tap computed all of them: the blocked
    // matmul sums in a different order for different row counts, and a hook must not change results.
    if (taps.wants("logits")) {
      HostTensor all(DType::F32, {T, V});
      ops::linear(x.data(), w_.head().as<float>(), all.as<float>(), T, V, H);
      taps.put("logits", all.as<float>(), {T, V});
    }
    if (step.outputs.logits) {
      result.logits = HostTensor(DType::F32, {rows, V});
      ops::linear(last, w_.head().as<float>(), result.logits.as<float>(), rows, V, H);
      if (step.outputs.sample) {
        // The host is this backend's device: the reference rule on the last row is the device path.
        result.sampled = sample_logits(result.logits.span<float>().subspan(static_cast<std::size_t>((rows - 1) * V)),
                                       *step.outputs.sample);
        result.logits = HostTensor();
      }
    }
    if (step.outputs.head_table >= 0) {
      const auto& [name, table] = w_.tables[static_cast<std::size_t>(step.outputs.head_table)];
      HostTensor out(DType::F32, {rows, table.shape()[0]});
      ops::linear(last, table.as<float>(), out.as<float>(), rows, table.shape()[0], H);
      result.extra.emplace_back(name, std::move(out));
    }
    return result;
  }

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
    w_.embed = fetch(c_.embed_weight());
    w_.layers.resize(static_cast<std::size_t>(c_.num_layers));
    for (std::int64_t l = 0; l < c_.num_layers; ++l)
      for (const auto& t : layer_tensors(c_, l)) w_.layers[l][t.param] = fetch(t.name);
    w_.final_norm = fetch(c_.final_norm_weight());
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
