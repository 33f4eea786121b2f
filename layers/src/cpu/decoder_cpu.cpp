// The decoder on the CPU in float32: the reference backend, and how users without a GPU run small
// models. Weights are widened to float32 once at load; the ops come from kernels/ (cpu_ops.hpp).
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "../decoder_backend.hpp"
#include "../graph/decoder_graph.hpp"
#include "../kv_sequences.hpp"
#include "../parallel/rank_group.hpp"
#include "../parallel/rank_shares.hpp"
#include "../runner_session.hpp"
#include "zoo/batch.hpp"
#include "zoo/communicator.hpp"
#include "zoo/error.hpp"
#include "zoo/exclusive_use.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/thread_pool.hpp"
#include "zoo/layers/tensor_parallel.hpp"
#include "zoo/sampling.hpp"
#include "zoo/sharded_weight_source.hpp"

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

// One rank of a tensor-parallel group: its communicator and its share (the runner's spec is the
// share's). Empty on one rank.
struct CpuRank {
  Communicator* comm = nullptr;
  const DecoderShard* shard = nullptr;
};

// The CPU runner: many sequences per forward pass over a paged KV cache. Pages are bookkept from
// the pool's capacity but stored as used (page ids in use stay below the peak count in use, since
// the pool hands out the lowest free ids first), so a pool sized for the worst case costs host
// memory only as sequences grow.
class CpuRunner : public KvRunner, private DecoderOps {
 public:
  // `owner` keeps `spec` and `weights` alive for as long as this runner lives.
  CpuRunner(std::shared_ptr<const void> owner, const DecoderSpec& spec, const CpuWeights& weights,
            const RunnerOptions& options, std::int64_t model_max_context, const char* what = "runner",
            CpuRank rank = {}, bool batch_invariant = false)
      : KvRunner(spec, options, model_max_context, page_bytes_for(spec, spec.num_layers),
                 host_budget(spec, options)),
        owner_(std::move(owner)),
        c_(spec),
        w_(weights),
        rank_(rank),
        invariant_(batch_invariant),
        k_(spec.num_layers),
        v_(spec.num_layers),
        stored_(kv_.groups().size(), 0),
        in_use_(fmt::format("a {} CPU {} (its KV cache)", spec.family, what)) {}

  // ---- Runner ----
  nlohmann::json stats() const override {
    return {{"rows", T_},
            {"linear_calls", linear_calls_},
            {"linear_rows_min", linear_rows_min_},
            {"linear_rows_max", linear_rows_max_},
            {"batch_invariant", invariant_}};
  }

  void check(const ForwardBatch& batch) const override { kv_.check(batch, w_.table_rows); }

  void submit(const ForwardBatch& batch, DiagnosticHook* hook) override {
    const ExclusiveUse::Scope one_thread(in_use_);
    if (pending_) throw std::logic_error(c_.family + ": submit() before wait() of the previous batch");
    check(batch);
    kv_.append(batch, [&](std::size_t g, const PageCopy& copy) {
      grow_storage(g, std::max(copy.from, copy.to));
      copy_page(g, copy);
    });
    slices_.clear();
    T_ = 0;
    for (const auto& slice : batch.slices) {
      const auto n = static_cast<std::int64_t>(slice.step->ids.size());
      const auto& tables = std::as_const(kv_).tables(slice.sequence);
      for (std::size_t g = 0; g < tables.size(); ++g)
        for (PageId page : tables[g].pages()) grow_storage(g, page);
      slices_.push_back({slice.step, &tables, kv_.token_ids(slice.sequence), T_, n, slice.start, {}});
      T_ += n;
    }
    run(hook);
    pending_ = true;
  }

  std::vector<ForwardResult> wait() override {
    if (!pending_) throw std::logic_error(c_.family + ": wait() without a submitted batch");
    pending_ = false;
    std::vector<ForwardResult> results;
    for (auto& slice : slices_) results.push_back(std::move(slice.result));
    slices_.clear();
    return results;
  }

 private:
  // A slice of the step in flight: its rows are row .. row + tokens - 1.
  struct Slice {
    const ForwardStep* step;
    const std::vector<KvPageTable>* tables;  // the sequence's, one per group
    std::span<const std::int32_t> held;      // its tokens, this slice's included
    std::int64_t row, tokens, start;
    ForwardResult result;
  };

  static std::int64_t page_bytes_for(const DecoderSpec& c, std::int64_t layers) {
    return 2 * layers * kKvPageTokens * c.kv_dim() * static_cast<std::int64_t>(sizeof(float));
  }
  // A default pool within a quarter of the host's memory (stored only as used).
  static double host_budget(const DecoderSpec& spec, const RunnerOptions& options) {
    if (options.kv_memory_fraction > 0)
      throw InputError(fmt::format("{}: a KV memory fraction sizes a device's pool; the CPU runner's pages come from "
                                   "host memory as they are used (give KV bytes or pages instead)",
                                   spec.family));
    return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 4;
  }
  // Storage for the group's layers up to page `page`, grown geometrically within the pool.
  void grow_storage(std::size_t g, PageId page) {
    if (page < stored_[g]) return;
    const std::int64_t capacity = kv_.groups()[g].pool->capacity();
    const std::int64_t pages = std::min(capacity, std::max<std::int64_t>(page + 1, 2 * stored_[g]));
    const auto elements = static_cast<std::size_t>(pages * kKvPageTokens * c_.kv_dim());
    for (std::int64_t l : kv_.groups()[g].layers) {
      k_[l].resize(elements);
      v_[l].resize(elements);
    }
    stored_[g] = pages;
  }
  void copy_page(std::size_t g, const PageCopy& copy) {
    const auto page = static_cast<std::size_t>(kKvPageTokens * c_.kv_dim());
    for (std::int64_t l : kv_.groups()[g].layers)
      for (auto* cache : {&k_[l], &v_[l]})
        std::copy_n(cache->data() + copy.from * page, page, cache->data() + copy.to * page);
  }

  void run(DiagnosticHook* hook) {
    const std::int64_t H = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate_size;
    positions_.resize(static_cast<std::size_t>(T_));
    const std::size_t groups = kv_.groups().size();
    slots_.assign(groups, std::vector<std::int64_t>(static_cast<std::size_t>(T_)));
    out_rows_.clear();
    bool logits = false, sample = false;
    int head_table = -1;
    for (const auto& slice : slices_) {
      for (std::int64_t t = 0; t < slice.tokens; ++t) {
        const std::int64_t position = slice.start + t;
        positions_[slice.row + t] = position;
        for (std::size_t g = 0; g < groups; ++g) slots_[g][slice.row + t] = (*slice.tables)[g].slot(position);
      }
      const OutputRequest& out = slice.step->outputs;
      for (std::int64_t t = out.all_positions ? 0 : slice.tokens - 1; t < slice.tokens; ++t)
        out_rows_.push_back(slice.row + t);
      logits = logits || out.logits;
      sample = sample || (out.logits && out.sample);
      if (out.head_table >= 0) head_table = out.head_table;
    }
    for (auto* buffer : {&h_, &x_, &tmp_}) buffer->assign(static_cast<std::size_t>(T_ * H), 0.0f);
    for (auto* buffer : {&q_, &attn_}) buffer->assign(static_cast<std::size_t>(T_ * qd), 0.0f);
    for (auto* buffer : {&k_new_, &v_new_}) buffer->assign(static_cast<std::size_t>(T_ * kvd), 0.0f);
    for (auto* buffer : {&gate_, &up_}) buffer->assign(static_cast<std::size_t>(T_ * I), 0.0f);
    linear_calls_ = 0;
    linear_rows_min_ = linear_rows_max_ = 0;
    run_decoder_graph(c_, *this, {logits, sample, head_table, false}, hook);
    // Each slice's share of the output rows.
    std::size_t first_out = 0;
    for (auto& slice : slices_) {
      const OutputRequest& out = slice.step->outputs;
      const std::int64_t rows = out.all_positions ? slice.tokens : 1;
      if (out.hidden) {
        HostTensor hidden(DType::F32, {rows, H});
        for (std::int64_t r = 0; r < rows; ++r)
          std::copy_n(&x_[static_cast<std::size_t>(out_rows_[first_out + r] * H)], H, hidden.as<float>() + r * H);
        slice.result.hidden = std::move(hidden);
      }
      if (!out.score_ids.empty()) {
        const std::int64_t V = c_.vocab_size;
        for (std::size_t r = 0; r < out.score_ids.size(); ++r) {
          const auto row = logits_.span<float>().subspan((first_out + r) * V, static_cast<std::size_t>(V));
          SampledToken& scored = slice.result.scores.emplace_back();
          scored.id = out.score_ids[r];
          scored.logit = row[static_cast<std::size_t>(scored.id)];
          fill_logprobs(row, scored, out.score_top);
        }
      } else if (out.logits && !slice.result.sampled) {
        slice.result.logits = take_rows(logits_, first_out, rows);
      }
      if (out.head_table >= 0) slice.result.extra.emplace_back(w_.tables[out.head_table].first, take_rows(head_, first_out, rows));
      first_out += static_cast<std::size_t>(rows);
    }
  }
  // Rows first .. first + rows - 1 of a [out rows, cols] tensor.
  static HostTensor take_rows(const HostTensor& all, std::size_t first, std::int64_t rows) {
    const std::int64_t cols = all.shape()[1];
    HostTensor out(DType::F32, {rows, cols});
    std::copy_n(all.as<float>() + first * cols, rows * cols, out.as<float>());
    return out;
  }

  // ---- DecoderOps: the ops of the step in flight, float32, from kernels/cpu_ops.hpp ----
  void embed() override {
    const std::int64_t H = c_.hidden_size;
    float* h = h_.data();
    for (const auto& slice : slices_) {
      const ForwardStep& step = *slice.step;
      float* rows = h + slice.row * H;
      for (std::int64_t t = 0; t < slice.tokens; ++t)
        std::memcpy(&rows[t * H], w_.embed.as<float>() + step.ids[static_cast<std::size_t>(t)] * H, H * sizeof(float));
      // The scale is the embedding module's (transformers' ScaledWordEmbedding): token rows only.
      if (c_.embed_scale > 0) ops::scale_inplace(rows, slice.tokens * H, static_cast<float>(c_.embed_scale));
      for (std::size_t i = 0; i < step.override_positions.size(); ++i)
        std::memcpy(&rows[step.override_positions[i] * H], &step.override_rows[i * H], H * sizeof(float));
      if (const TableRows& r = step.table_rows; r.table >= 0) {
        const float* table = w_.tables[static_cast<std::size_t>(r.table)].second.as<float>();
        for (std::size_t i = 0; i < r.positions.size(); ++i) {
          float* row = &rows[r.positions[i] * H];
          std::fill(row, row + H, 0.0f);
          for (std::int64_t j = 0; j < r.per_position; ++j)
            ops::add_inplace(row, table + r.ids[i * r.per_position + j] * H, H);
        }
      }
    }
  }
  void input_norm() override { norm(w_.layers[0].get(P::input_norm)); }  // a copy without one
  void qkv(std::int64_t l) override {
    const auto& L = w_.layers[l];
    const std::int64_t H = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim();
    linear(x_.data(), L.get(P::q), L.get(P::q_bias), q_.data(), qd, H);
    linear(x_.data(), L.get(P::k), L.get(P::k_bias), k_new_.data(), kvd, H);
    linear(x_.data(), L.get(P::v), L.get(P::v_bias), v_new_.data(), kvd, H);
  }
  void qk_norm_rope_cache(std::int64_t l, bool keep_normed) override {
    const auto& L = w_.layers[l];
    const std::int64_t D = c_.head_dim, nh = c_.num_heads, nkv = c_.num_kv_heads, kvd = c_.kv_dim();
    if (c_.qk_norm == QkNorm::whole && rank_.comm) {
      // The projection is split over the ranks, so is its mean of squares.
      norm_across_ranks(q_.data(), L.get(P::q_norm), c_.q_dim(), 1);
      norm_across_ranks(k_new_.data(), L.get(P::k_norm), kvd, rank_.shard->kv_replicas);
    } else if (c_.qk_norm != QkNorm::none) {
      // Per head: rows of head_dim; whole: one row per token over the projection.
      const bool per_head = c_.qk_norm == QkNorm::per_head;
      ops::rms_norm(q_.data(), L.get(P::q_norm), q_.data(), per_head ? T_ * nh : T_, per_head ? D : c_.q_dim(), eps());
      ops::rms_norm(k_new_.data(), L.get(P::k_norm), k_new_.data(), per_head ? T_ * nkv : T_, per_head ? D : kvd, eps());
    }
    if (c_.qk_norm != QkNorm::none) {
      if (keep_normed) {
        q_normed_ = q_;
        k_normed_ = k_new_;
      }
    }
    const RopeTable& rope = c_.rope_of(l);
    ops::rope_half_split(q_.data(), T_, nh, D, c_.rotary(), positions_.data(), rope.inv_freq.data(),
                         rope.attention_scaling);
    ops::rope_half_split(k_new_.data(), T_, nkv, D, c_.rotary(), positions_.data(), rope.inv_freq.data(),
                         rope.attention_scaling);
    // Each row into its slot of the layer's pages.
    const std::vector<std::int64_t>& slots = slots_[kv_.group_of(l)];
    for (std::int64_t t = 0; t < T_; ++t) {
      std::memcpy(k_[l].data() + slots[t] * kvd, k_new_.data() + t * kvd, kvd * sizeof(float));
      std::memcpy(v_[l].data() + slots[t] * kvd, v_new_.data() + t * kvd, kvd * sizeof(float));
    }
  }
  void attention(std::int64_t l) override {
    const LayerSpec layer = c_.layer(l);
    const ops::AttentionOptions options{.scale = c_.attention_scale(),
                                        .softcap = static_cast<float>(c_.attn_softcap),
                                        .window = layer.attention == AttentionKind::sliding ? layer.window : 0};
    const std::size_t g = kv_.group_of(l);
    attention_slices_.clear();
    for (const auto& slice : slices_)
      attention_slices_.push_back({slice.row, slice.tokens, slice.start, (*slice.tables)[g].pages().data()});
    ops::attention_paged_gqa(q_.data(), k_[l].data(), v_[l].data(), attn_.data(), attention_slices_, c_.num_heads,
                             c_.num_kv_heads, c_.head_dim, options);
  }
  void o_proj(std::int64_t l) override {
    const auto& L = w_.layers[l];
    linear(attn_.data(), L.get(P::o), L.get(P::o_bias), tmp_.data(), c_.hidden_size, c_.q_dim());
  }
  void reduce_proj() override {
    if (rank_.comm)
      rank_.comm->all_reduce_sum(std::span(tmp_.data(), static_cast<std::size_t>(T_ * c_.hidden_size)));
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
  void act() override { act_mul(gate_.data(), up_.data(), T_ * c_.intermediate_size); }
  // gate = activation(gate) * up over n values.
  void act_mul(float* gate, const float* up, std::int64_t n) const {
    switch (c_.activation) {
      case Activation::silu: ops::silu_mul(gate, up, gate, n); break;
      case Activation::gelu_tanh: ops::gelu_tanh_mul(gate, up, gate, n); break;
      case Activation::gelu: ops::gelu_mul(gate, up, gate, n); break;
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
  // transformers' router: float32 softmax over the logits, the top k by probability (ties: the
  // lower expert first), renormalized when the spec says so.
  void router(std::int64_t l) override {
    const std::int64_t E = c_.moe.experts, k = c_.moe.top_k;
    router_logits_.assign(static_cast<std::size_t>(T_ * E), 0.0f);
    linear(x_.data(), w_.layers[l].get(P::router), nullptr, router_logits_.data(), E, c_.hidden_size);
    topk_ids_.resize(static_cast<std::size_t>(T_ * k));
    topk_weights_.resize(static_cast<std::size_t>(T_ * k));
    std::vector<float> probs(static_cast<std::size_t>(E));
    std::vector<std::int64_t> order(static_cast<std::size_t>(E));
    for (std::int64_t t = 0; t < T_; ++t) {
      const float* logits = &router_logits_[static_cast<std::size_t>(t * E)];
      const float top = *std::max_element(logits, logits + E);
      float sum = 0.0f;
      for (std::int64_t e = 0; e < E; ++e) sum += probs[e] = std::exp(logits[e] - top);
      for (float& p : probs) p /= sum;
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int64_t a, std::int64_t b) {
        return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
      });
      float chosen = 0.0f;
      for (std::int64_t j = 0; j < k; ++j) chosen += probs[order[j]];
      for (std::int64_t j = 0; j < k; ++j) {
        topk_ids_[t * k + j] = order[j];
        topk_weights_[t * k + j] = c_.moe.normalize_top_k ? probs[order[j]] / chosen : probs[order[j]];
      }
    }
  }
  // Expert by expert in ascending order over the rows that chose it (one linear call per expert
  // and weight), each row's weighted output added as transformers' index_add_ does: a token's
  // experts are summed in ascending order. Then the shared expert, where the spec has one.
  void experts(std::int64_t l) override {
    const std::int64_t E = c_.moe.experts, k = c_.moe.top_k, H = c_.hidden_size, Ie = c_.moe.intermediate_size;
    const auto& L = w_.layers[l];
    std::fill(tmp_.begin(), tmp_.end(), 0.0f);
    // Each expert's assignments (token * k + j), in one pass over the step's choices.
    std::vector<std::vector<std::int64_t>> chosen(static_cast<std::size_t>(E));
    for (std::int64_t a = 0; a < T_ * k; ++a) chosen[static_cast<std::size_t>(topk_ids_[static_cast<std::size_t>(a)])].push_back(a);
    for (std::int64_t e = 0; e < E; ++e) {
      const std::vector<std::int64_t>& rows = chosen[static_cast<std::size_t>(e)];
      if (rows.empty()) continue;
      const auto n = static_cast<std::int64_t>(rows.size());
      expert_x_.resize(static_cast<std::size_t>(n * H));
      for (std::int64_t r = 0; r < n; ++r)
        std::copy_n(&x_[static_cast<std::size_t>(rows[r] / k * H)], H, &expert_x_[static_cast<std::size_t>(r * H)]);
      expert_gate_.resize(static_cast<std::size_t>(n * Ie));
      expert_up_.resize(static_cast<std::size_t>(n * Ie));
      expert_y_.resize(static_cast<std::size_t>(n * H));
      ops::linear(expert_x_.data(), L.get(P::expert_gate) + e * Ie * H, expert_gate_.data(), n, Ie, H);
      ops::linear(expert_x_.data(), L.get(P::expert_up) + e * Ie * H, expert_up_.data(), n, Ie, H);
      act_mul(expert_gate_.data(), expert_up_.data(), n * Ie);
      ops::linear(expert_gate_.data(), L.get(P::expert_down) + e * H * Ie, expert_y_.data(), n, H, Ie);
      for (std::int64_t r = 0; r < n; ++r) {
        const float weight = topk_weights_[static_cast<std::size_t>(rows[r])];
        float* out = &tmp_[static_cast<std::size_t>(rows[r] / k * H)];
        const float* y = &expert_y_[static_cast<std::size_t>(r * H)];
        for (std::int64_t i = 0; i < H; ++i) out[i] += y[i] * weight;
      }
    }
    if (const std::int64_t Is = c_.moe.shared_intermediate_size; Is > 0) {
      // The shared expert on every row, scaled by sigmoid(x . gate), added after the routed sum.
      expert_gate_.resize(static_cast<std::size_t>(T_ * Is));
      expert_up_.resize(static_cast<std::size_t>(T_ * Is));
      expert_y_.resize(static_cast<std::size_t>(T_ * H));
      std::vector<float> gate(static_cast<std::size_t>(T_));
      ops::linear(x_.data(), L.get(P::shared_gate), expert_gate_.data(), T_, Is, H);
      ops::linear(x_.data(), L.get(P::shared_up), expert_up_.data(), T_, Is, H);
      act_mul(expert_gate_.data(), expert_up_.data(), T_ * Is);
      ops::linear(expert_gate_.data(), L.get(P::shared_down), expert_y_.data(), T_, H, Is);
      ops::linear(x_.data(), L.get(P::shared_expert_gate), gate.data(), T_, 1, H);
      for (std::int64_t t = 0; t < T_; ++t) {
        const float g = 1.0f / (1.0f + std::exp(-gate[static_cast<std::size_t>(t)]));
        for (std::int64_t i = 0; i < H; ++i) tmp_[static_cast<std::size_t>(t * H + i)] += g * expert_y_[static_cast<std::size_t>(t * H + i)];
      }
    }
  }
  void logits(bool every_row) override {
    const std::int64_t V = c_.vocab_size, H = c_.hidden_size;
    const std::int64_t rows = every_row ? T_ : static_cast<std::int64_t>(out_rows_.size());
    logits_ = HostTensor(DType::F32, {rows, V});
    const float* in = every_row ? x_.data() : output_rows();
    if (!rank_.comm) {
      rows_linear(in, w_.head().as<float>(), logits_.as<float>(), rows, V, H);
      if (c_.final_softcap > 0)
        ops::softcap_inplace(logits_.as<float>(), rows * V, static_cast<float>(c_.final_softcap));
      return;
    }
    // This rank's vocabulary rows, then every rank's side by side.
    const std::int64_t begin = rank_.shard->vocab_begin, Vr = rank_.shard->vocab_end - begin;
    piece_.resize(static_cast<std::size_t>(rows * Vr));
    ops::linear(in, w_.head().as<float>() + begin * H, piece_.data(), rows, Vr, H);
    if (c_.final_softcap > 0)
      ops::softcap_inplace(piece_.data(), rows * Vr, static_cast<float>(c_.final_softcap));
    gather_columns(*rank_.comm, piece_.data(), rows, Vr, 1, pieces_, logits_.as<float>());
  }
  void sample() override {
    // The host is this backend's device: the reference rule on each slice's last row is the device path.
    const std::int64_t V = c_.vocab_size;
    std::size_t first_out = 0;
    for (auto& slice : slices_) {
      const OutputRequest& out = slice.step->outputs;
      const std::int64_t rows = out.all_positions ? slice.tokens : 1;
      if (out.logits && out.sample) {
        const auto row = logits_.span<float>().subspan((first_out + rows - 1) * V, static_cast<std::size_t>(V));
        if (out.sample->penalized()) {
          penalized_.assign(row.begin(), row.end());
          apply_penalties(penalized_, slice.held, *out.sample);
          slice.result.sampled = sample_logits(penalized_, *out.sample, scratch_);
          slice.result.sampled->logit = row[static_cast<std::size_t>(slice.result.sampled->id)];
        } else {
          slice.result.sampled = sample_logits(row, *out.sample, scratch_);
        }
        if (out.top_logprobs >= 0) fill_logprobs(row, *slice.result.sampled, out.top_logprobs);
      }
      first_out += static_cast<std::size_t>(rows);
    }
  }
  void head(int table) override {
    const auto& [name, rows_table] = w_.tables[static_cast<std::size_t>(table)];
    const auto rows = static_cast<std::int64_t>(out_rows_.size());
    head_ = HostTensor(DType::F32, {rows, rows_table.shape()[0]});
    rows_linear(output_rows(), rows_table.as<float>(), head_.as<float>(), rows, rows_table.shape()[0],
                c_.hidden_size);
  }
  void sample_head(int) override {}  // the caller samples the head output (OutputRequest)
  void tap(DiagnosticHook& hook, const std::string& name, Value value, std::int64_t) override {
    const std::int64_t H = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate_size;
    if (value == Value::router_topk_ids) {
      hook.record(name, TensorView{topk_ids_.data(), DType::I64, {T_, c_.moe.top_k}, Device{}});
      return;
    }
    const auto [data, cols] = [&]() -> std::pair<const float*, std::int64_t> {
      switch (value) {
        case Value::embed: case Value::attn_residual: case Value::output: return {h_.data(), H};
        case Value::input_norm: case Value::post_attn_norm: case Value::pre_mlp_norm: case Value::final_norm:
          return {x_.data(), H};
        case Value::q_proj: case Value::q_rope: return {q_.data(), qd};
        case Value::k_proj: case Value::k_rope: return {k_new_.data(), kvd};
        case Value::v_proj: return {v_new_.data(), kvd};
        case Value::q_norm: return {q_normed_.data(), qd};
        case Value::k_norm: return {k_normed_.data(), kvd};
        case Value::attn: return {attn_.data(), qd};
        case Value::o_proj: case Value::down_proj: case Value::post_attn_out_norm: case Value::post_mlp_norm:
        case Value::moe_output:
          return {tmp_.data(), H};
        case Value::gate_proj: case Value::act: return {gate_.data(), I};
        case Value::up_proj: return {up_.data(), I};
        case Value::router_logits: return {router_logits_.data(), c_.moe.experts};
        case Value::router_topk_weights: return {topk_weights_.data(), c_.moe.top_k};
        case Value::router_topk_ids: break;  // above
        case Value::logits: return {logits_.as<float>(), c_.vocab_size};
      }
      return {nullptr, 0};
    }();
    const std::int64_t rows = value == Value::logits ? logits_.shape()[0] : T_;
    if (const int split = rank_.comm ? split_replicas(value, *rank_.shard) : 0; split > 0) {
      // Each rank holds its heads' or units' columns: the tap is all of them, in rank order.
      const std::int64_t width = cols * rank_.comm->size() / split;
      gathered_.resize(static_cast<std::size_t>(rows * width));
      gather_columns(*rank_.comm, data, rows, cols, split, pieces_, gathered_.data());
      hook.record(name, TensorView{gathered_.data(), DType::F32, {rows, width}, Device{}});
      return;
    }
    hook.record(name, TensorView{data, DType::F32, {rows, cols}, Device{}});
  }
  // x = rms_norm(x) over rows of `cols` values that are this rank's share of a projection split
  // over the ranks (`replicas` ranks holding each share), with the rank's slice of the weight.
  void norm_across_ranks(float* x, const float* weight, std::int64_t cols, int replicas) {
    sums_.assign(static_cast<std::size_t>(T_), 0.0f);
    for (std::int64_t t = 0; t < T_; ++t) {
      double sum = 0;
      for (std::int64_t i = 0; i < cols; ++i) sum += static_cast<double>(x[t * cols + i]) * x[t * cols + i];
      sums_[static_cast<std::size_t>(t)] = static_cast<float>(sum);
    }
    rank_.comm->all_reduce_sum(sums_);
    const double whole = static_cast<double>(cols) * rank_.comm->size() / replicas;
    for (std::int64_t t = 0; t < T_; ++t) {
      const double mean = sums_[static_cast<std::size_t>(t)] / replicas / whole;
      const auto scale = static_cast<float>(1.0 / std::sqrt(mean + c_.rms_norm_eps));
      for (std::int64_t i = 0; i < cols; ++i) x[t * cols + i] = x[t * cols + i] * scale * weight[i];
    }
  }

  float eps() const { return static_cast<float>(c_.rms_norm_eps); }
  // y[m, n] = x @ w^T by the kernel linear() picks for m, or in batch-invariant mode by the one that
  // sums every row alike whatever m is.
  void rows_linear(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n,
                   std::int64_t k) const {
    if (invariant_)
      ops::linear_rows_invariant(x, w, y, m, n, k);
    else
      ops::linear(x, w, y, m, n, k);
  }
  // x = rms_norm(h) with `weight`; x = h where the placement has no norm (weight null).
  void norm(const float* weight) {
    if (weight) ops::rms_norm(h_.data(), weight, x_.data(), T_, c_.hidden_size, eps());
    else x_ = h_;
  }
  // y = in @ W^T (+ bias) over every row of the step: one call per weight, whatever the batch.
  void linear(const float* in, const float* weight, const float* bias, float* out, std::int64_t n, std::int64_t k) {
    rows_linear(in, weight, out, T_, n, k);
    add_bias(out, bias, T_, n);
    linear_rows_min_ = linear_calls_ == 0 ? T_ : std::min(linear_rows_min_, T_);
    linear_rows_max_ = std::max(linear_rows_max_, T_);
    ++linear_calls_;
  }
  // x's output rows, contiguous (a view of x when they are its last rows, else gathered).
  const float* output_rows() {
    const std::int64_t H = c_.hidden_size, n = static_cast<std::int64_t>(out_rows_.size());
    if (n > 0 && out_rows_.front() == T_ - n && out_rows_.back() == T_ - 1) return x_.data() + (T_ - n) * H;
    x_out_.resize(static_cast<std::size_t>(n * H));
    for (std::int64_t r = 0; r < n; ++r) std::copy_n(&x_[static_cast<std::size_t>(out_rows_[r] * H)], H, &x_out_[r * H]);
    return x_out_.data();
  }

  std::shared_ptr<const void> owner_;  // first member: destroyed last
  const DecoderSpec& c_;
  const CpuWeights& w_;
  CpuRank rank_;
  bool invariant_;  // ModelArgs::batch_invariant: every linear through ops::linear_rows_invariant
  std::vector<float> piece_, pieces_, gathered_, sums_;  // tensor parallelism: gathers and norm sums
  std::vector<std::vector<float>> k_, v_;  // per layer: [pages][kKvPageTokens][kv_heads][head_dim]
  std::vector<std::int64_t> stored_;       // per group: pages k_ and v_ hold
  ExclusiveUse in_use_;
  bool pending_ = false;
  // The step in flight (submit() to wait()) and its activations.
  std::vector<Slice> slices_;
  std::int64_t T_ = 0;
  std::vector<std::int64_t> positions_, out_rows_;
  std::vector<std::vector<std::int64_t>> slots_;  // per group, per row
  std::vector<ops::PagedAttentionSlice> attention_slices_;
  std::vector<float> h_, x_, x_out_, q_, k_new_, v_new_, q_normed_, k_normed_, attn_, tmp_, gate_, up_;
  HostTensor logits_, head_;
  std::vector<std::pair<float, std::int64_t>> scratch_;
  std::vector<float> penalized_;  // a row with penalties applied (the raw one gives the logprobs)
  // Mixture-of-experts layers: the router's outputs, and one expert's rows at a time.
  std::vector<float> router_logits_, topk_weights_, expert_x_, expert_gate_, expert_up_, expert_y_;
  std::vector<std::int64_t> topk_ids_;
  std::int64_t linear_calls_ = 0, linear_rows_min_ = 0, linear_rows_max_ = 0;
};

class CpuBackend : public DecoderBackend {
 public:
  // `shard`: this backend is one rank of a tensor-parallel group (`spec` is the rank's share).
  CpuBackend(const DecoderSpec& spec, const ModelArgs& args, const DecoderShard* shard = nullptr)
      : c_(spec), max_context_(args.max_context), invariant_(args.batch_invariant), shard_(shard) {}
  const DecoderSpec& spec() const { return c_; }
  const CpuWeights& weights() const { return w_; }

  void load(const WeightSource& source, const std::vector<RowTableSource>& tables, const ProgressFn& progress) override {
    std::size_t total = 0, done = 0;
    for (const auto& req : decoder_requirements(c_)) total += source.info(req.name)->nbytes;
    for (const auto& t : tables) total += t.rows.nbytes();
    auto widen_into = [&](const TensorView& view, float* out) {
      const auto n = view.numel();
      const auto elem = dtype_size(view.dtype);
      kernels::ThreadPool::global().parallel_for(n, 1 << 16, [&](std::int64_t b, std::int64_t e) {
        TensorView part{static_cast<const std::byte*>(view.data) + b * elem, view.dtype, {e - b}, Device{}};
        to_f32(part, std::span<float>(out + b, static_cast<std::size_t>(e - b)));
      });
      done += view.nbytes();
      if (progress) progress(done, total);
    };
    auto widen = [&](const TensorView& view) {
      HostTensor out(DType::F32, view.shape);
      widen_into(view, out.as<float>());
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
      for (const auto& t : layer_tensors(c_, l)) {
        if (t.expert < 0) {
          w_.layers[l][t.param] = is_norm(t.param) ? fetch_norm(t.name) : fetch(t.name);
          continue;
        }
        // Experts stacked per parameter: [experts, rows, cols], expert e at e * rows * cols,
        // widened straight from a view of the mapped file: its own tensor, or its slice of a fused
        // one (either layout gives the same floats).
        HostTensor& stacked = w_.layers[l][t.param];
        if (stacked.empty()) stacked = HostTensor(DType::F32, {c_.moe.experts, t.shape[0], t.shape[1]});
        widen_into(layer_tensor_view(source, t), stacked.as<float>() + t.expert * t.shape[0] * t.shape[1]);
      }
    w_.final_norm = fetch_norm(c_.final_norm_weight());
    if (!c_.tie_word_embeddings) w_.lm_head = fetch(c_.lm_head_weight());
    // A row-parallel bias enters the all-reduce once: one rank adds it.
    if (shard_ && !shard_->adds_row_parallel_bias)
      for (auto& L : w_.layers)
        for (const P bias : {P::o_bias, P::down_bias}) L[bias] = HostTensor();
    for (const auto& t : tables) {
      w_.tables.emplace_back(t.name, widen(t.rows));
      w_.table_rows.push_back(t.rows.shape[0]);
    }
  }

  std::unique_ptr<Session> new_session() override {
    return std::make_unique<RunnerSession>(
        std::make_unique<CpuRunner>(shared_from_this(), c_, w_, session_options(max_context_), max_context_,
                                    "session", CpuRank{}, invariant_));
  }
  std::unique_ptr<Runner> new_runner(const RunnerOptions& options) override {
    return std::make_unique<CpuRunner>(shared_from_this(), c_, w_, options, max_context_, "runner", CpuRank{},
                                       invariant_);
  }

  // What one decode step reads (for `zoo bench`'s weight GB/s): every float32 weight once, except
  // an untied embedding table, of which a step reads one row.
  nlohmann::json runtime_stats() const override {
    // A rank computes its vocabulary rows of the head.
    const std::size_t head_rows = shard_ ? static_cast<std::size_t>(shard_->vocab_end - shard_->vocab_begin)
                                         : static_cast<std::size_t>(c_.vocab_size);
    std::size_t bytes =
        w_.final_norm.nbytes() + head_rows * static_cast<std::size_t>(c_.hidden_size) * sizeof(float);
    if (!w_.lm_head.empty()) bytes += static_cast<std::size_t>(c_.hidden_size) * sizeof(float);
    for (const auto& L : w_.layers)
      for (std::size_t p = 0; p < kLayerParamCount; ++p) {
        const HostTensor& tensor = L.t[p];
        if (tensor.empty()) continue;
        const auto param = static_cast<LayerParam>(p);
        const bool expert = param == P::expert_gate || param == P::expert_up || param == P::expert_down;
        // A step reads the experts it routes to: top_k of them per token at batch 1.
        bytes += expert ? tensor.nbytes() / static_cast<std::size_t>(c_.moe.experts) *
                              static_cast<std::size_t>(c_.moe.top_k)
                        : tensor.nbytes();
      }
    return {{"decode_weight_bytes", bytes}};
  }

 private:
  DecoderSpec c_;
  std::int64_t max_context_;
  bool invariant_;
  const DecoderShard* shard_;
  CpuWeights w_;
};

// Tensor parallelism on the CPU: the ranks are threads of this process over an InProcessGroup, so
// the sharded math is tested without GPUs. Each rank is a CpuBackend over its share of the spec,
// loaded from its slices of the checkpoint (ShardedWeightSource); each runner is a group of rank
// runners with a communicator group of its own.
class CpuTensorParallelBackend : public DecoderBackend {
 public:
  CpuTensorParallelBackend(const DecoderSpec& spec, const ModelArgs& args) : max_context_(args.max_context) {
    const int ranks = args.tensor_parallel;
    for (int r = 0; r < ranks; ++r) shards_.push_back(shard_decoder(spec, r, ranks));
    for (const DecoderShard& shard : shards_)
      ranks_.push_back(std::make_shared<CpuBackend>(shard.spec, args, &shard));
  }

  void load(const WeightSource& source, const std::vector<RowTableSource>& tables,
            const ProgressFn& progress) override {
    load_rank_shares(ranks_, shards_, source, tables, progress);
  }

  std::unique_ptr<Session> new_session() override {
    return std::make_unique<RunnerSession>(make_runner(session_options(max_context_), "session"));
  }
  std::unique_ptr<Runner> new_runner(const RunnerOptions& options) override {
    return make_runner(options, "runner");
  }

  // Every rank's bytes: a step reads all of them, each rank its own.
  nlohmann::json runtime_stats() const override {
    std::size_t bytes = 0;
    nlohmann::json per_rank = nlohmann::json::array();
    for (const auto& rank : ranks_) {
      const std::size_t mine = rank->runtime_stats()["decode_weight_bytes"].get<std::size_t>();
      per_rank.push_back(mine);
      bytes += mine;
    }
    return {{"decode_weight_bytes", bytes},
            {"tensor_parallel", ranks_.size()},
            {"rank_decode_weight_bytes", per_rank}};
  }

 private:
  std::unique_ptr<Runner> make_runner(const RunnerOptions& options, const char* what) {
    auto group = std::make_shared<InProcessGroup>(static_cast<int>(ranks_.size()));
    std::vector<std::unique_ptr<KvRunner>> runners;
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      runners.push_back(std::make_unique<CpuRunner>(shared_from_this(), ranks_[r]->spec(),
                                                    ranks_[r]->weights(), options, max_context_, what,
                                                    CpuRank{&group->rank(static_cast<int>(r)), &shards_[r]}));
    auto abort = [group = group.get()](const std::string& why) { group->abort(why); };
    return std::make_unique<RankGroupRunner>(std::move(group), std::move(runners), std::move(abort));
  }

  std::int64_t max_context_;
  std::vector<DecoderShard> shards_;  // filled once: the ranks point into it
  std::vector<std::shared_ptr<CpuBackend>> ranks_;
};

}  // namespace

std::shared_ptr<DecoderBackend> make_cpu_backend(const DecoderSpec& spec, const ModelArgs& args) {
  if (args.tensor_parallel > 1) return std::make_shared<CpuTensorParallelBackend>(spec, args);
  return std::make_shared<CpuBackend>(spec, args);
}

}  // namespace zoo::layers
