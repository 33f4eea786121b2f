// Qwen3 on the CPU in float32: the reference backend, and how users without a GPU run small models.
// Weights are widened to float32 once at load; the ops come from kernels/ (cpu_ops.hpp).
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "qwen3_backend.hpp"
#include "zoo/error.hpp"
#include "zoo/exclusive_use.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::qwen3 {
namespace {

namespace ops = zoo::kernels::cpu;

struct LayerWeights {
  HostTensor input_norm, q, k, v, o, q_norm, k_norm, post_norm, gate, up, down;
};

struct CpuWeights {
  HostTensor embed, final_norm, lm_head;  // lm_head empty when tied
  std::vector<LayerWeights> layers;
  const HostTensor& head() const { return lm_head.empty() ? embed : lm_head; }
};

// Hands tensors to a DiagnosticHook under their tap names; free when there is no hook.
class Taps {
 public:
  explicit Taps(DiagnosticHook* hook) : hook_(hook) {}
  bool active() const { return hook_ != nullptr; }
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
  // `owner` keeps `config` and `weights` alive for as long as this session lives.
  CpuSession(std::shared_ptr<const void> owner, const Qwen3Config& config, const CpuWeights& weights,
             std::int64_t max_context)
      : owner_(std::move(owner)), c_(config), w_(weights), max_context_(max_context), k_cache_(config.num_layers),
        v_cache_(config.num_layers) {}

  std::int64_t position() const override { return pos_; }
  void reset() override { pos_ = 0; }

  ForwardResult forward(const ForwardStep& step, DiagnosticHook* hook) override {
    const ExclusiveUse::Scope one_thread(in_use_);
    const auto T = static_cast<std::int64_t>(step.ids.size());
    if (T == 0) throw InputError("qwen3: a forward step needs at least one token");
    if (pos_ + T > max_context_)
      throw InputError(fmt::format("qwen3: {} tokens after {} cached exceed max_context {} (raise model.max_context)", T,
                                   pos_, max_context_));
    check_overrides(step, c_.hidden_size);
    const std::int64_t H = c_.hidden_size, D = c_.head_dim, nh = c_.num_heads, nkv = c_.num_kv_heads;
    const std::int64_t qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate_size, V = c_.vocab_size;
    ensure_cache(pos_ + T);
    Taps taps(hook);

    std::vector<float> h(static_cast<std::size_t>(T * H));
    for (std::int64_t t = 0; t < T; ++t) {
      const auto id = step.ids[static_cast<std::size_t>(t)];
      if (id < 0 || id >= V) throw InputError(fmt::format("qwen3: token id {} is outside the vocabulary [0, {})", id, V));
      std::memcpy(&h[t * H], w_.embed.as<float>() + id * H, H * sizeof(float));
    }
    for (std::size_t i = 0; i < step.override_positions.size(); ++i)
      std::memcpy(&h[step.override_positions[i] * H], &step.override_rows[i * H], H * sizeof(float));
    taps.put("embed", h.data(), {T, H});

    std::vector<std::int64_t> positions(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) positions[t] = pos_ + t;
    std::vector<float> x(T * H), q(T * qd), k(T * kvd), v(T * kvd), attn(T * qd), tmp(T * H);
    std::vector<float> gate(T * I), up(T * I);
    const float eps = static_cast<float>(c_.rms_norm_eps);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));

    for (std::int64_t l = 0; l < c_.num_layers; ++l) {
      const auto& L = w_.layers[l];
      ops::rms_norm(h.data(), L.input_norm.as<float>(), x.data(), T, H, eps);
      taps.layer(l, "input_norm", x.data(), {T, H});
      ops::linear(x.data(), L.q.as<float>(), q.data(), T, qd, H);
      ops::linear(x.data(), L.k.as<float>(), k.data(), T, kvd, H);
      ops::linear(x.data(), L.v.as<float>(), v.data(), T, kvd, H);
      taps.layer(l, "q_proj", q.data(), {T, qd});
      taps.layer(l, "k_proj", k.data(), {T, kvd});
      taps.layer(l, "v_proj", v.data(), {T, kvd});
      ops::rms_norm(q.data(), L.q_norm.as<float>(), q.data(), T * nh, D, eps);
      ops::rms_norm(k.data(), L.k_norm.as<float>(), k.data(), T * nkv, D, eps);
      taps.layer(l, "q_norm", q.data(), {T, qd});
      taps.layer(l, "k_norm", k.data(), {T, kvd});
      ops::rope_half_split(q.data(), T, nh, D, positions.data(), static_cast<float>(c_.rope_theta));
      ops::rope_half_split(k.data(), T, nkv, D, positions.data(), static_cast<float>(c_.rope_theta));
      taps.layer(l, "q_rope", q.data(), {T, qd});
      taps.layer(l, "k_rope", k.data(), {T, kvd});
      std::memcpy(k_cache_[l].data() + pos_ * kvd, k.data(), k.size() * sizeof(float));
      std::memcpy(v_cache_[l].data() + pos_ * kvd, v.data(), v.size() * sizeof(float));
      ops::attention_causal_gqa(q.data(), k_cache_[l].data(), v_cache_[l].data(), attn.data(), T, pos_, nh, nkv, D,
                                scale);
      taps.layer(l, "attn", attn.data(), {T, qd});
      ops::linear(attn.data(), L.o.as<float>(), tmp.data(), T, H, qd);
      taps.layer(l, "o_proj", tmp.data(), {T, H});
      ops::add_inplace(h.data(), tmp.data(), T * H);
      taps.layer(l, "attn_residual", h.data(), {T, H});
      ops::rms_norm(h.data(), L.post_norm.as<float>(), x.data(), T, H, eps);
      taps.layer(l, "post_attn_norm", x.data(), {T, H});
      ops::linear(x.data(), L.gate.as<float>(), gate.data(), T, I, H);
      ops::linear(x.data(), L.up.as<float>(), up.data(), T, I, H);
      taps.layer(l, "gate_proj", gate.data(), {T, I});
      taps.layer(l, "up_proj", up.data(), {T, I});
      ops::silu_mul(gate.data(), up.data(), gate.data(), T * I);
      taps.layer(l, "act", gate.data(), {T, I});
      ops::linear(gate.data(), L.down.as<float>(), tmp.data(), T, H, I);
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
  const Qwen3Config& c_;
  const CpuWeights& w_;
  std::int64_t max_context_;
  std::int64_t pos_ = 0;
  std::vector<std::vector<float>> k_cache_, v_cache_;
  ExclusiveUse in_use_{"a qwen3 CPU session (its KV cache)"};
};

class CpuBackend : public Qwen3Backend {
 public:
  CpuBackend(const Qwen3Config& config, const ModelArgs& args) : c_(config), max_context_(args.max_context) {}

  void load(const WeightSource& source, const ProgressFn& progress) override {
    std::size_t total = 0, done = 0;
    for (const auto& req : qwen3_requirements(c_)) total += source.info(req.name)->nbytes;
    auto fetch = [&](const std::string& name) {
      const TensorView view = source.view(name);
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
    w_.embed = fetch(kEmbedTokens);
    w_.layers.resize(static_cast<std::size_t>(c_.num_layers));
    for (std::int64_t l = 0; l < c_.num_layers; ++l) {
      auto& L = w_.layers[l];
      L.input_norm = fetch(layer_tensor(l, "input_layernorm.weight"));
      L.q = fetch(layer_tensor(l, "self_attn.q_proj.weight"));
      L.k = fetch(layer_tensor(l, "self_attn.k_proj.weight"));
      L.v = fetch(layer_tensor(l, "self_attn.v_proj.weight"));
      L.o = fetch(layer_tensor(l, "self_attn.o_proj.weight"));
      L.q_norm = fetch(layer_tensor(l, "self_attn.q_norm.weight"));
      L.k_norm = fetch(layer_tensor(l, "self_attn.k_norm.weight"));
      L.post_norm = fetch(layer_tensor(l, "post_attention_layernorm.weight"));
      L.gate = fetch(layer_tensor(l, "mlp.gate_proj.weight"));
      L.up = fetch(layer_tensor(l, "mlp.up_proj.weight"));
      L.down = fetch(layer_tensor(l, "mlp.down_proj.weight"));
    }
    w_.final_norm = fetch(kFinalNorm);
    if (!c_.tie_word_embeddings) w_.lm_head = fetch(kLmHead);
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
      for (const HostTensor* t : {&L.input_norm, &L.q, &L.k, &L.v, &L.o, &L.q_norm, &L.k_norm, &L.post_norm, &L.gate,
                                  &L.up, &L.down})
        bytes += t->nbytes();
    return {{"decode_weight_bytes", bytes}};
  }

 private:
  Qwen3Config c_;
  std::int64_t max_context_;
  CpuWeights w_;
};

}  // namespace

std::shared_ptr<Qwen3Backend> make_cpu_backend(const Qwen3Config& config, const ModelArgs& args) {
  return std::make_shared<CpuBackend>(config, args);
}

}  // namespace zoo::qwen3
