// The CUDA batch runner (zoo/batch.hpp): many sequences per forward pass over paged KV, bf16.
//
// A step's rows are its slices' tokens, one-token slices (decodes) first: the row-wise ops
// (projections, norms, MLP) run once over all of them (CudaRows), k and v go to each row's page
// slot, the decodes attend in one paged decode-attention launch (lengths and page tables read on
// the device), each longer slice (a prefill chunk) in a paged prefill-attention launch from its
// cached prefix, and the head runs on the gathered output rows; picks and logprobs are made on the
// device in a fixed number of launches (picks grouped by sampler mode), and a decode step of greedy
// picks replays a CUDA graph per batch bucket.
//
// Row tables (zoo/row_tables.hpp) serve every slice of a step at once: each table's summed rows
// replace their embeddings in one launch (the slices' positions mapped to batch rows), the head
// table (one per batch) runs as one GEMM over the gathered rows of the slices that ask for it, and
// its picks are made in one launch per segment count, each pick with its own request and uniforms.
// A decode step whose slices all ask alike (a greedy text pick or none, the same table summed at
// their one position, picks from the same head table) replays a graph too: the batched
// text-to-speech step.
//
// A Session is a batch of one here (runner_session.hpp): taps (zoo trace, validate) record the
// step's rows, decodes first, and a lone prefill whose pages run consecutively reads them as one
// contiguous cache, where cuDNN's attention serves long prompts.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <map>
#include <numeric>
#include <span>
#include <utility>
#include <tuple>
#include <vector>

#include "../kv_sequences.hpp"
#include "decoder_cuda.hpp"
#include "zoo/error.hpp"
#include "zoo/sampling.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {
namespace {

class CudaRunner : public KvRunner, private CudaRows {
 public:
  CudaRunner(std::shared_ptr<CudaBackend> backend, const RunnerOptions& options, CudaRank rank)
      : KvRunner(backend->c_, options, backend->max_context_,
                 page_bytes_of(backend->c_, backend->c_.num_layers), kv_device_budget(options)),
        CudaRows(std::move(backend), rank),
        storage_(kv_.groups().size()),
        grows_(options.max_sequences == 1) {
    // Collectives through the host cannot be captured: such a rank runs every step eagerly.
    if (rank.collectives && !rank.collectives->capturable()) graphs_enabled_ = false;
    // A pool of many sequences is allocated whole, up front (it was sized from the memory there
    // is). One sequence's (a Session's) starts at kFirstStoredPages and doubles as the sequence
    // grows: the pool hands out its lowest pages first, so the pages in use never reach past the
    // most ever held at once, and a sliding window's stay at its window.
    for (std::size_t g = 0; g < storage_.size(); ++g) {
      const std::int64_t capacity = kv_.groups()[g].pool->capacity();
      store(g, grows_ ? std::min(capacity, kFirstStoredPages) : capacity);
    }
    b_.note_memory();
  }

  // ---- Runner ----
  nlohmann::json stats() const override {
    return {{"rows", T_},
            {"decode_rows", decodes_},
            {"prefill_slices", static_cast<std::int64_t>(slices_.size()) - decodes_},
            {"device_seconds", device_seconds_},
            {"graph_steps", graph_steps_},
            {"stored_pages", stored_pages()},
            {"prefill_attention", prefill_engine_},
            {"batch_invariant", b_.batch_invariant_}};
  }

  void check(const ForwardBatch& batch) const override { kv_.check(batch, b_.w_.table_rows); }
  // Pages each group's storage holds (its pool's capacity, or for one sequence what it has used).
  std::vector<std::int64_t> stored_pages() const {
    std::vector<std::int64_t> pages;
    for (const Storage& storage : storage_) pages.push_back(storage.pages);
    return pages;
  }

  SequenceId fork_sequence(SequenceId id, std::int64_t tokens) override {
    const SequenceId child = KvRunner::fork_sequence(id, tokens);
    if (history_stride_ > 0) upload_history(child);  // the child's slot gets the tokens it holds
    return child;
  }

  void submit(const ForwardBatch& batch, DiagnosticHook* hook) override {
    const ExclusiveUse::Scope one_thread(b_.in_use_);
    if (pending_) throw std::logic_error(c_.family + ": submit() before wait() of the previous batch");
    check(batch);
    ZOO_CUDA_CHECK(cudaSetDevice(b_.device_));
    cudaStream_t s = *b_.stream_;
    step_begin_.record(s);
    kv_.append(batch, [&](std::size_t g, const PageCopy& copy) {
      reach(g, std::max(copy.from, copy.to));
      copy_page(g, copy, s);
    });
    if (grows_)  // the pages this step wrote (those before them were stored by earlier steps)
      for (const SequenceSlice& slice : batch.slices) {
        const auto& tables = std::as_const(kv_).tables(slice.sequence);
        for (std::size_t g = 0; g < tables.size(); ++g)
          for (const PageId page :
               tables[g].pages().subspan(static_cast<std::size_t>(slice.start / kKvPageTokens)))
            reach(g, page);
      }
    plan(batch, hook != nullptr);
    if (history_stride_ > 0) record_history();
    else if (any_penalized_) start_history();
    upload_step();
    upload_logprob_rows();
    if (graph_batch_ > 0) {
      run_graph();
    } else {
      profile_.begin(s);
      run_decoder_graph(c_, *this, {any_logits_, any_sample_, head_table_, head_picks_ > 0}, hook);
      if (!any_logits_ && any_hidden_) gather_outputs();  // for hidden states asked without logits
      profile_.end(T_);
    }
    if (logprobs_ > 0)
      cu::logprob_rows(logits_dev_.as<float>(), c_.vocab_size, logprob_rows_dev_.as<std::int32_t>(), logprobs_,
                       logprob_top_, lse_dev_.as<double>(), top_ids_dev_.as<std::int32_t>(),
                       top_values_dev_.as<float>(), s, scores_ > 0 ? score_ids_dev_.as<std::int32_t>() : nullptr,
                       id_values_dev_.as<float>());
    download_results();
    step_end_.record(s);
    pending_ = true;
  }

  std::vector<ForwardResult> wait() override {
    if (!pending_) throw std::logic_error(c_.family + ": wait() without a submitted batch");
    pending_ = false;
    b_.stream_->synchronize();
    device_seconds_ += cu::Event::elapsed_ms(step_begin_, step_end_) / 1e3;
    std::vector<ForwardResult> results(slices_.size());
    for (Slice& slice : slices_) {
      ForwardResult& result = results[slice.index];
      const OutputRequest& out = slice.step->outputs;
      if (slice.sample_slot >= 0) {
        const cu::SampleOutput& p = sample_out_host_.as<cu::SampleOutput>()[slice.sample_slot];
        result.sampled = SampledToken{.id = p.id, .logit = p.logit, .bad_index = p.bad_index, .bad_value = p.bad_value,
                                      .all_masked = p.unmasked == 0};
        if (slice.logprob_slot >= 0)
          fill_device_logprobs(static_cast<std::size_t>(slice.logprob_slot), out.top_logprobs, *result.sampled);
      }
      for (std::size_t r = 0; r < out.score_ids.size(); ++r) {
        const auto k = static_cast<std::size_t>(slice.score_slot) + r;
        SampledToken& scored = result.scores.emplace_back();
        scored.id = out.score_ids[r];
        scored.logit = id_values_host_.as<float>()[k];
        fill_device_logprobs(k, out.score_top, scored);
      }
      if (slice.sample_slot < 0 && out.logits && out.score_ids.empty()) {
        result.logits = std::move(slice.logits);
      }
      if (out.hidden) result.hidden = std::move(slice.hidden);
      if (slice.head_pick >= 0) {
        const cu::SampleOutput* picked = pick_out_host_.as<cu::SampleOutput>() + slice.pick_at;
        for (std::int64_t i = 0; i < slice.pick_segments; ++i) {
          const cu::SampleOutput& p = picked[i];
          result.head_sampled.push_back({.id = p.id, .logit = p.logit, .bad_index = p.bad_index,
                                         .bad_value = p.bad_value, .all_masked = p.unmasked == 0});
        }
      } else if (slice.head_row >= 0) {
        result.extra.emplace_back(b_.w_.tables[static_cast<std::size_t>(out.head_table)].name, std::move(slice.head));
      }
    }
    slices_.clear();
    return results;
  }

 private:
  struct GroupArrays;
  // Each group's keys and values: [layers of the group][pages + 1][16][kv_heads][head_dim], bf16;
  // the page after the stored ones is the trash page, where a graph's padding rows write and read
  // and which pages given back behind a window read as (never a sequence's).
  struct Storage {
    cu::DeviceBuffer k, v;
    std::int64_t pages = 0;
  };
  // A growing storage's first pages (4096 tokens: a short prompt and its answer never wait for an
  // allocation in their step).
  static constexpr std::int64_t kFirstStoredPages = 256;
  // Storage for `pages` pages of group g and the trash page, the pages held so far moved over.
  // Zeros elsewhere: the attention kernels read whole tiles and mask, and a masked key's value row
  // is multiplied by 0 (0 * NaN would not vanish).
  void store(std::size_t g, std::int64_t pages) {
    const auto layers = static_cast<std::int64_t>(kv_.groups()[g].layers.size());
    const std::int64_t page = kKvPageTokens * c_.kv_dim();  // elements of one layer's page
    Storage next;
    next.pages = pages;
    const auto bytes = static_cast<std::size_t>(layers * (pages + 1) * page) * sizeof(Bf16);
    next.k = cu::DeviceBuffer(bytes);
    next.v = cu::DeviceBuffer(bytes);
    next.k.fill_bytes(0);
    next.v.fill_bytes(0);
    Storage& held = storage_[g];
    if (held.pages > 0) {
      b_.stream_->synchronize();  // the steps so far wrote the pages that move
      const auto kept = static_cast<std::size_t>(held.pages * page) * sizeof(Bf16);
      for (std::int64_t i = 0; i < layers; ++i)
        for (auto [to, from] : {std::pair{next.k.as<Bf16>(), held.k.as<Bf16>()},
                                std::pair{next.v.as<Bf16>(), held.v.as<Bf16>()}})
          ZOO_CUDA_CHECK(cudaMemcpy(to + i * (pages + 1) * page, from + i * (held.pages + 1) * page, kept,
                                    cudaMemcpyDeviceToDevice));
    }
    held = std::move(next);
    buffers_moved();  // graphs captured the old addresses
  }
  // A growing pool's storage up to page `page` (doubling, within the pool).
  void reach(std::size_t g, PageId page) {
    if (!grows_ || page == kNoPage || page < storage_[g].pages) return;
    store(g, std::min(kv_.groups()[g].pool->capacity(),
                      std::max<std::int64_t>(page + 1, 2 * storage_[g].pages)));
    b_.note_memory();
  }
  // A slice of the step: its rows are row .. row + tokens - 1; `index` is its place in the batch.
  struct Slice {
    std::size_t index;
    const ForwardStep* step;
    const std::vector<KvPageTable>* tables;
    std::int64_t row, tokens, start;
    std::int64_t out_row = 0, out_count = 0;  // its rows among the gathered output rows
    int sample_slot = -1;                     // its pick among the device's sample outputs
    int logprob_slot = -1;                    // its row among the device's logprob rows
    int score_slot = -1;                      // the first of its scored rows among them
    std::int64_t head_row = -1;               // its first row among the head table's rows; -1: no head
    int head_pick = -1;                       // its slot among the head picks; -1: the head output comes back
    std::int64_t pick_at = 0, pick_segments = 0;  // its first segment among the picks' uniforms and outputs
    HostTensor logits, hidden, head;
    SequenceId sequence = -1;
  };

  static std::int64_t page_bytes_of(const DecoderSpec& c, std::int64_t layers) {
    return 2 * layers * kKvPageTokens * c.kv_dim() * static_cast<std::int64_t>(sizeof(Bf16));
  }
  std::int64_t page_bytes(std::int64_t layers) const { return page_bytes_of(c_, layers); }
  Bf16* layer_k(std::int64_t l) {
    const std::size_t g = kv_.group_of(l);
    return storage_[g].k.as<Bf16>() + kv_.index_in_group(l) * layer_elements(g);
  }
  Bf16* layer_v(std::int64_t l) {
    const std::size_t g = kv_.group_of(l);
    return storage_[g].v.as<Bf16>() + kv_.index_in_group(l) * layer_elements(g);
  }
  std::int64_t layer_elements(std::size_t g) const {
    return (storage_[g].pages + 1) * kKvPageTokens * c_.kv_dim();
  }
  // A sequence's page table as the kernels read it: pages given back behind a window (kNoPage)
  // read as the trash page (zeros, masked anyway).
  void append_pages(std::vector<std::int32_t>& blob, std::span<const PageId> pages, std::size_t g) const {
    for (PageId page : pages) blob.push_back(page == kNoPage ? trash_page(g) : page);
  }
  // The first page of `pages` when they run consecutively upward (none given back), else -1.
  static std::int64_t first_of_run(std::span<const PageId> pages) {
    for (std::size_t i = 0; i < pages.size(); ++i)
      if (pages[i] == kNoPage || pages[i] != pages[0] + static_cast<PageId>(i)) return -1;
    return pages.empty() ? -1 : pages[0];
  }
  std::int32_t trash_page(std::size_t g) const { return static_cast<std::int32_t>(storage_[g].pages); }
  void copy_page(std::size_t g, const PageCopy& copy, cudaStream_t s) {
    const std::int64_t page = kKvPageTokens * c_.kv_dim();
    for (std::int64_t l : kv_.groups()[g].layers)
      for (Bf16* base : {layer_k(l), layer_v(l)})
        ZOO_CUDA_CHECK(cudaMemcpyAsync(base + copy.to * page, base + copy.from * page, page * sizeof(Bf16),
                                       cudaMemcpyDeviceToDevice, s));
  }

  // Rows in order (decodes first), output rows, sampling slots, and the int32 arrays the step's
  // kernels read: ids, positions, each group's cache rows, page tables and lengths.
  void plan(const ForwardBatch& batch, bool taps) {
    slices_.clear();
    std::vector<std::size_t> order(batch.slices.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_partition(order.begin(), order.end(),
                          [&](std::size_t i) { return batch.slices[i].step->ids.size() == 1; });
    T_ = 0;
    decodes_ = 0;
    any_logits_ = any_sample_ = any_hidden_ = false;
    any_penalized_ = std::any_of(batch.slices.begin(), batch.slices.end(), [](const SequenceSlice& s) {
      return s.step->outputs.logits && s.step->outputs.sample && s.step->outputs.sample->penalized();
    });
    std::int64_t out_rows = 0;
    int samples = 0;
    for (std::size_t i : order) {
      const SequenceSlice& s = batch.slices[i];
      const auto n = static_cast<std::int64_t>(s.step->ids.size());
      Slice slice{i, s.step, &std::as_const(kv_).tables(s.sequence), T_, n, s.start};
      slice.sequence = s.sequence;
      const OutputRequest& out = s.step->outputs;
      slice.out_row = out_rows;
      slice.out_count = out.all_positions ? n : 1;
      out_rows += slice.out_count;
      any_logits_ = any_logits_ || out.logits;
      any_hidden_ = any_hidden_ || out.hidden;
      // Picks take slots grouped by sampler mode (greedy first), one set of launches per mode.
      if (out.logits && out.sample && out.sample->temperature == 0.0f) slice.sample_slot = samples++;
      decodes_ += n == 1 ? 1 : 0;
      T_ += n;
      slices_.push_back(std::move(slice));
    }
    plan_row_tables();
    // A decode step whose slices all ask alike replays a CUDA graph captured for its batch bucket.
    graph_batch_ = 0;
    // Mixture-of-experts layers of more rows than kMoeStreamRows read counts back mid-step under
    // ZOO_MOE_CUBLAS=1: eager.
    const bool moe_graphable =
        c_.moe_layers() == 0 || !moe_cublas_ || batch_bucket(decodes_) <= kMoeStreamRows;
    if (graphs_enabled_ && moe_graphable && !taps && !profile_.enabled() && alike_decodes())
      graph_batch_ = batch_bucket(decodes_);
    mode_begin_[0] = 0;
    for (const cu::SampleMode mode : {cu::SampleMode::select, cu::SampleMode::sort}) {
      mode_begin_[static_cast<int>(mode)] = samples;
      for (Slice& slice : slices_) {
        const OutputRequest& out = slice.step->outputs;
        if (slice.sample_slot < 0 && out.logits && out.sample &&
            cu::sample_mode(out.sample->temperature, out.sample->top_k) == mode)
          slice.sample_slot = samples++;
      }
    }
    mode_begin_[3] = samples;
    // Logprob rows: the picks that ask, then every scored row.
    logprobs_ = logprob_top_ = 0;
    for (Slice& slice : slices_) {
      any_sample_ = any_sample_ || slice.sample_slot >= 0;
      if (slice.sample_slot >= 0 && slice.step->outputs.top_logprobs >= 0) {
        slice.logprob_slot = logprobs_++;
        logprob_top_ = std::max(logprob_top_, slice.step->outputs.top_logprobs);
      }
    }
    scores_ = 0;
    for (Slice& slice : slices_) {
      const OutputRequest& out = slice.step->outputs;
      if (out.score_ids.empty()) continue;
      slice.score_slot = logprobs_;
      logprobs_ += static_cast<int>(out.score_ids.size());
      scores_ += static_cast<int>(out.score_ids.size());
      logprob_top_ = std::max(logprob_top_, out.score_top);
    }
    out_rows_count_ = out_rows;
    samples_ = samples;
  }

  // Whether the head table's picks of `out` can be made on the device (CudaSession's limits); a
  // request they cannot serve gets the head output back, for the caller to sample.
  bool device_head_pick(const OutputRequest& out) const {
    if (!out.head_sample || out.head_table < 0) return false;
    const std::int64_t count = b_.w_.tables[static_cast<std::size_t>(out.head_table)].count;
    const std::int64_t segments = out.head_sample->segments;
    return segments <= kMaxHeadSegments && count / segments <= cu::kSegmentSampleMaxWidth;
  }

  // The head table's rows (the output rows of the slices that ask for it, in slice order) and its
  // picks: slots grouped by segment count (one launch per group), each pick's uniforms and outputs
  // at its first segment. KvSequences::check allows one head table per batch.
  void plan_row_tables() {
    head_table_ = -1;
    head_rows_ = 0;
    head_picks_ = 0;
    pick_segments_ = 0;
    pick_groups_.clear();
    table_sums_.clear();
    overrides_ = 0;
    for (Slice& slice : slices_) {
      const OutputRequest& out = slice.step->outputs;
      if (out.head_table < 0) continue;
      head_table_ = out.head_table;
      slice.head_row = head_rows_;
      head_rows_ += slice.out_count;
    }
    for (const Slice& slice : slices_) {
      const OutputRequest& out = slice.step->outputs;
      if (!device_head_pick(out)) continue;
      const std::int64_t segments = out.head_sample->segments;
      if (std::none_of(pick_groups_.begin(), pick_groups_.end(),
                       [&](const PickGroup& g) { return g.segments == segments; }))
        pick_groups_.push_back({segments, 0, 0, 0});
    }
    for (PickGroup& group : pick_groups_) {
      group.first = head_picks_;
      group.at = pick_segments_;
      for (Slice& slice : slices_) {
        const OutputRequest& out = slice.step->outputs;
        if (!device_head_pick(out) || out.head_sample->segments != group.segments) continue;
        slice.head_pick = head_picks_++;
        slice.pick_at = pick_segments_;
        slice.pick_segments = group.segments;
        pick_segments_ += group.segments;
        ++group.count;
      }
    }
  }

  // Whether this is a decode step whose slices all ask the same of it, which a graph captured per
  // variant replays: each a text pick of one sampler mode (greedy, select or sort: the requests
  // and draws are read on the device) or none; each one position summed from the same row
  // table (the same number of rows) or none; each picks from the same head table in as many
  // segments, or no head. Penalized picks read the sequences' tokens and a copy row each, hidden
  // states and every position's outputs go to the host, overrides are host rows: those run eagerly.
  bool alike_decodes() {
    if (any_penalized_ || decodes_ != static_cast<std::int64_t>(slices_.size())) return false;
    bool first = true;
    for (const Slice& slice : slices_) {
      const ForwardStep& step = *slice.step;
      const OutputRequest& out = step.outputs;
      const TableRows& tr = step.table_rows;
      const bool pick = out.logits && out.sample.has_value();
      if (out.hidden || out.all_positions || !step.override_positions.empty() || (out.logits && !pick) ||
          (out.head_table >= 0 && slice.head_pick < 0) || (tr.table >= 0 && tr.positions.size() != 1))
        return false;
      const StepVariant v{
          tr.table,
          tr.table >= 0 ? tr.per_position : 0,
          out.logits,
          out.head_table,
          pick ? 1 + static_cast<int>(cu::sample_mode(out.sample->temperature, out.sample->top_k)) : 0,
          slice.pick_segments};
      if (first) graph_variant_ = v;
      else if (v.key() != graph_variant_.key()) return false;
      first = false;
    }
    return graph_variant_.logits || graph_variant_.head_segments > 0;
  }

  // Batch buckets of decode graphs: 1, 2, 4, 8, then multiples of 8 to 256, then of 64.
  static std::int64_t batch_bucket(std::int64_t n) {
    if (n <= 8) return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8;
    if (n <= 256) return (n + 7) / 8 * 8;
    return (n + 63) / 64 * 64;
  }

  // A graph step's inputs at fixed addresses: B = graph_batch_ rows (the decodes, then padding
  // rows that write and read only the trash page), per group the cache rows and page tables of a
  // fixed stride (the context limit's pages), the lengths, the output, pick and head rows 0 .. B - 1,
  // and for a variant with table rows each row's ids (a padding row's add nothing: its embedding is
  // zeros) and its row. Padding picks of the head are greedy; their outputs are never read.
  void upload_graph_step() {
    const StepVariant& v = graph_variant_;
    const std::size_t G = kv_.groups().size();
    const std::int64_t B = graph_batch_, real = decodes_;
    // The kv-length bucket sizes the attention grid (the true lengths are read on the device) and
    // the page tables' stride: both are fixed per graph.
    std::int64_t longest = 1;
    for (std::int64_t i = 0; i < real; ++i) longest = std::max(longest, slices_[static_cast<std::size_t>(i)].start + 1);
    max_decode_len_ = 256;
    while (max_decode_len_ < longest) max_decode_len_ *= 2;
    max_decode_len_ = std::min(max_decode_len_, kv_.max_context());
    const std::int64_t stride = (max_decode_len_ + kKvPageTokens - 1) / kKvPageTokens;
    T_ = B;
    ensure_activations(B);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(B), 0), positions(static_cast<std::size_t>(B), 0), blob;
    for (std::int64_t i = 0; i < real; ++i) {
      ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(slices_[static_cast<std::size_t>(i)].step->ids[0]);
      positions[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(slices_[static_cast<std::size_t>(i)].start);
    }
    ids_dev_.upload(ids.data(), ids.size() * 4);
    positions_dev_.upload(positions.data(), positions.size() * 4);
    group_at_.assign(G, {});
    for (std::size_t g = 0; g < G; ++g) {
      GroupArrays& at = group_at_[g];
      at.cache_rows = blob.size();
      for (std::int64_t i = 0; i < B; ++i)
        blob.push_back(i < real ? static_cast<std::int32_t>((*slices_[static_cast<std::size_t>(i)].tables)[g].slot(
                                      slices_[static_cast<std::size_t>(i)].start))
                                : trash_page(g) * static_cast<std::int32_t>(kKvPageTokens));
      at.decode_stride = stride;
      at.decode_pages = blob.size();
      for (std::int64_t i = 0; i < B; ++i) {
        const std::size_t row = blob.size();
        blob.resize(row + static_cast<std::size_t>(stride), trash_page(g));
        if (i >= real) continue;
        const auto pages = (*slices_[static_cast<std::size_t>(i)].tables)[g].pages();
        for (std::size_t p = 0; p < pages.size(); ++p) blob[row + p] = pages[p] == kNoPage ? trash_page(g) : pages[p];
      }
      if (b_.batch_invariant_) {
        // Row i as a prefill tile of one token over its page table row (a padding row: position 0
        // of the trash page); the tiles' count and place are fixed per bucket, their values per step.
        at.prefill_tiles = blob.size();
        at.prefill_tile_count = B;
        for (std::int64_t i = 0; i < B; ++i) {
          const std::int64_t start = i < real ? slices_[static_cast<std::size_t>(i)].start : 0;
          blob.insert(blob.end(),
                      {static_cast<std::int32_t>(i), 1, static_cast<std::int32_t>(start),
                       static_cast<std::int32_t>(at.decode_pages + static_cast<std::size_t>(i * stride)), 0,
                       0, 0, -1});
        }
      }
    }
    lens_at_ = blob.size();
    for (std::int64_t i = 0; i < B; ++i)
      blob.push_back(static_cast<std::int32_t>(i < real ? slices_[static_cast<std::size_t>(i)].start + 1 : 1));
    out_rows_at_ = pick_rows_at_ = head_rows_at_ = pick_head_rows_at_ = blob.size();
    for (std::int64_t i = 0; i < B; ++i) blob.push_back(static_cast<std::int32_t>(i));
    if (v.table >= 0) {
      // Row i's one position is row i: its rows are the output rows' identity.
      const TableSum sum{v.table, v.per_position, B, blob.size(), out_rows_at_};
      for (std::int64_t i = 0; i < B; ++i) {
        const auto ids = i < real ? slices_[static_cast<std::size_t>(i)].step->table_rows.ids
                                  : std::span<const std::int64_t>{};
        for (std::size_t j = 0; j < static_cast<std::size_t>(v.per_position); ++j)
          blob.push_back(i < real ? static_cast<std::int32_t>(ids[j]) : -1);
      }
      table_sums_.push_back(sum);
    }
    const std::size_t bytes = blob.size() * 4;
    if (graph_blob_.size() < bytes) {
      graph_blob_ = cu::DeviceBuffer(std::max<std::size_t>(bytes, 1 << 16));
      graphs_.clear();
    }
    graph_blob_.upload(blob.data(), bytes);
    blob_base_ = graph_blob_.as<std::int32_t>();
    decodes_ = B;  // the attention's batch; slices_ keeps the real ones
    out_rows_count_ = B;
    ensure_decode_workspace(B);
    if (v.logits) {
      // B picks of the variant's one mode; the padding rows' repeat the first request.
      const int mode = v.sample - 1, picks = static_cast<int>(B);
      samples_ = picks;
      for (int m = 0; m < 4; ++m) mode_begin_[static_cast<std::size_t>(m)] = m <= mode ? 0 : picks;
      ensure_pick_buffers(B);
      if (mode != static_cast<int>(cu::SampleMode::greedy)) {  // a greedy pick reads no request
        std::vector<cu::SampleParams> params(static_cast<std::size_t>(B));
        for (std::int64_t i = 0; i < B; ++i) {
          const SampleRequest& r = *slices_[static_cast<std::size_t>(i < real ? i : 0)].step->outputs.sample;
          params[static_cast<std::size_t>(i)] = {r.u, r.temperature, r.top_k, r.top_p, r.min_p};
        }
        sample_params_dev_.upload(params.data(), params.size() * sizeof(cu::SampleParams));
      }
      if (x_out_rows_ < B) {
        x_out_ = cu::DeviceBuffer(static_cast<std::size_t>(B * c_.hidden_size) * sizeof(Bf16));
        x_out_rows_ = B;
        graphs_.clear();
      }
      ensure_logits(B);
    }
    if (v.head_table >= 0) {
      head_rows_ = B;
      // One group of B picks (the real ones hold slots 0 .. real - 1, in slice order).
      head_picks_ = static_cast<int>(B);
      pick_segments_ = B * v.head_segments;
      pick_groups_ = {{v.head_segments, 0, static_cast<int>(B), 0}};
      ensure_head(B);
      upload_head_picks();
    }
  }

  // The graph of this bucket: captured after one eager pass at its shape (so GEMM plans exist and
  // nothing allocates while capturing), replayed after.
  void run_graph() {
    cudaStream_t s = *b_.stream_;
    const StepVariant& v = graph_variant_;
    const auto key = std::tuple(graph_batch_, max_decode_len_, v.key());
    ++graph_steps_;
    if (const auto found = graphs_.find(key); found != graphs_.end() && found->second.ready()) {
      found->second.launch(s);
      return;
    }
    const auto step = [&] {
      run_decoder_graph(c_, *this, {v.logits, v.sample > 0, v.head_table, v.head_segments > 0}, nullptr);
    };
    step();  // may reallocate (and so clear graphs_): before taking the entry
    auto& graph = graphs_[key];
    graph.begin_capture(s);
    step();
    graph.end_capture(s);
  }

  void ensure_pick_buffers(std::int64_t count) {
    if (sample_slots_ >= count) return;
    const std::size_t ws = cu::sample_workspace_bytes(c_.vocab_size);
    sample_params_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(count) * sizeof(cu::SampleParams));
    sample_out_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(count) * sizeof(cu::SampleOutput));
    sample_out_host_ = cu::PinnedBuffer(static_cast<std::size_t>(count) * sizeof(cu::SampleOutput));
    sample_workspace_ = cu::DeviceBuffer(static_cast<std::size_t>(count) * ws);
    sample_workspace_.fill_bytes(0);  // the sampling kernels' tickets start at zero
    sample_slots_ = static_cast<int>(count);
    graphs_.clear();
  }
  void ensure_decode_workspace(std::int64_t batch) {
    const std::size_t need = cu::decode_attention_workspace_bytes(static_cast<int>(std::max<std::int64_t>(batch, 1)),
                                                                  static_cast<int>(c_.num_heads),
                                                                  static_cast<int>(c_.head_dim));
    if (decode_workspace_.size() >= need) return;
    decode_workspace_ = cu::DeviceBuffer(need);
    decode_workspace_.fill_bytes(0);  // its merge tickets start at zero
    graphs_.clear();
  }
  void buffers_moved() override { graphs_.clear(); }

  void upload_step() {
    if (graph_batch_ > 0) return upload_graph_step();
    const std::size_t G = kv_.groups().size();
    ensure_activations(T_);
    std::vector<std::int32_t> ids, positions, blob;
    ids.reserve(static_cast<std::size_t>(T_));
    positions.reserve(static_cast<std::size_t>(T_));
    for (const Slice& slice : slices_)
      for (std::int64_t t = 0; t < slice.tokens; ++t) {
        ids.push_back(static_cast<std::int32_t>(slice.step->ids[static_cast<std::size_t>(t)]));
        positions.push_back(static_cast<std::int32_t>(slice.start + t));
      }
    ids_dev_.upload(ids.data(), ids.size() * 4);
    positions_dev_.upload(positions.data(), positions.size() * 4);
    // The blob: per group the cache rows [T], the decodes' page tables [decodes, stride] and each
    // prefill slice's pages; then the decodes' lengths and the output rows.
    group_at_.assign(G, {});
    for (std::size_t g = 0; g < G; ++g) {
      GroupArrays& at = group_at_[g];
      at.cache_rows = blob.size();
      for (const Slice& slice : slices_)
        for (std::int64_t t = 0; t < slice.tokens; ++t)
          blob.push_back(static_cast<std::int32_t>((*slice.tables)[g].slot(slice.start + t)));
      at.decode_stride = 1;
      for (std::int64_t i = 0; i < decodes_; ++i)
        at.decode_stride = std::max<std::int64_t>(at.decode_stride, static_cast<std::int64_t>((*slices_[i].tables)[g].pages().size()));
      at.decode_pages = blob.size();
      for (std::int64_t i = 0; i < decodes_; ++i) {
        append_pages(blob, (*slices_[i].tables)[g].pages(), g);
        blob.resize(blob.size() + static_cast<std::size_t>(at.decode_stride) - (*slices_[i].tables)[g].pages().size(),
                    trash_page(g));
      }
      // Each tiled slice's pages; batch-invariant, the decodes are tiled too (their page tables above).
      const std::size_t first = b_.batch_invariant_ ? 0 : static_cast<std::size_t>(decodes_);
      std::vector<std::size_t> tile_pages;
      for (std::size_t i = first; i < static_cast<std::size_t>(decodes_); ++i)
        tile_pages.push_back(at.decode_pages + i * static_cast<std::size_t>(at.decode_stride));
      for (std::size_t i = static_cast<std::size_t>(decodes_); i < slices_.size(); ++i) {
        tile_pages.push_back(blob.size());
        append_pages(blob, (*slices_[i].tables)[g].pages(), g);
      }
      plan_prefill_tiles(at, blob, tile_pages, first);
      if (decodes_ == 0 && slices_.size() == 1 && !b_.batch_invariant_)
        at.contiguous_page = first_of_run((*slices_.front().tables)[g].pages());
    }
    lens_at_ = blob.size();
    max_decode_len_ = 0;
    for (std::int64_t i = 0; i < decodes_; ++i) {
      const std::int64_t length = slices_[static_cast<std::size_t>(i)].start + 1;
      blob.push_back(static_cast<std::int32_t>(length));
      max_decode_len_ = std::max(max_decode_len_, length);
    }
    out_rows_at_ = blob.size();
    for (const Slice& slice : slices_)
      for (std::int64_t r = slice.tokens - slice.out_count; r < slice.tokens; ++r)
        blob.push_back(static_cast<std::int32_t>(slice.row + r));
    // The logits row of each pick, by slot.
    pick_rows_at_ = blob.size();
    blob.resize(blob.size() + static_cast<std::size_t>(samples_), 0);
    for (const Slice& slice : slices_)
      if (slice.sample_slot >= 0)
        blob[pick_rows_at_ + static_cast<std::size_t>(slice.sample_slot)] =
            static_cast<std::int32_t>(slice.out_row + slice.out_count - 1);
    upload_row_tables(blob);
    plan_penalties(blob);
    if (blob_dev_.size() < blob.size() * 4) blob_dev_ = cu::DeviceBuffer(std::max<std::size_t>(blob.size() * 4, 4096));
    blob_dev_.upload(blob.data(), blob.size() * 4);
    blob_base_ = blob_dev_.as<std::int32_t>();
    // Sampling: each slot's request (with its draw) up, the picks back after the step.
    if (samples_ > 0) {
      std::vector<cu::SampleParams> params(static_cast<std::size_t>(samples_));
      for (const Slice& slice : slices_)
        if (slice.sample_slot >= 0) {
          const SampleRequest& r = *slice.step->outputs.sample;
          params[static_cast<std::size_t>(slice.sample_slot)] = {r.u, r.temperature, r.top_k, r.top_p, r.min_p};
        }
      ensure_pick_buffers(samples_);
      sample_params_dev_.upload(params.data(), params.size() * sizeof(cu::SampleParams));
    }
    ensure_decode_workspace(decodes_);
  }
  const std::int32_t* blob(std::size_t at) const { return blob_base_ + at; }

  // An eager step's row-table inputs, into the blob: per table used, its slices' ids (each
  // position's padded with -1, which adds nothing, to the most rows per position among them) and
  // batch rows; the overrides' batch rows (their float32 rows uploaded beside); the head table's
  // rows and each pick's row among them; then the picks' requests and uniforms. Nothing for a step
  // that uses none of them.
  void upload_row_tables(std::vector<std::int32_t>& blob) {
    for (const Slice& slice : slices_) {
      const TableRows& tr = slice.step->table_rows;
      if (tr.table < 0) continue;
      auto sum = std::find_if(table_sums_.begin(), table_sums_.end(),
                              [&](const TableSum& t) { return t.table == tr.table; });
      if (sum == table_sums_.end()) sum = table_sums_.insert(table_sums_.end(), {tr.table, 0, 0, 0, 0});
      sum->per_position = std::max(sum->per_position, tr.per_position);
      sum->count += static_cast<std::int64_t>(tr.positions.size());
    }
    for (TableSum& sum : table_sums_) {
      sum.ids_at = blob.size();
      for (const Slice& slice : slices_) {
        const TableRows& tr = slice.step->table_rows;
        if (tr.table != sum.table) continue;
        const auto per = static_cast<std::size_t>(tr.per_position);
        for (std::size_t i = 0; i < tr.positions.size(); ++i)
          for (std::size_t j = 0; j < static_cast<std::size_t>(sum.per_position); ++j)
            blob.push_back(j < per ? static_cast<std::int32_t>(tr.ids[i * per + j]) : -1);
      }
      sum.rows_at = blob.size();
      for (const Slice& slice : slices_)
        if (slice.step->table_rows.table == sum.table)
          for (const std::int64_t p : slice.step->table_rows.positions)
            blob.push_back(static_cast<std::int32_t>(slice.row + p));
    }
    override_rows_at_ = blob.size();
    override_host_.clear();
    for (const Slice& slice : slices_) {
      const ForwardStep& step = *slice.step;
      for (const std::int64_t p : step.override_positions) blob.push_back(static_cast<std::int32_t>(slice.row + p));
      override_host_.insert(override_host_.end(), step.override_rows.begin(), step.override_rows.end());
    }
    overrides_ = static_cast<std::int64_t>(blob.size() - override_rows_at_);
    if (overrides_ > 0) {
      const std::size_t bytes = override_host_.size() * sizeof(float);
      if (override_dev_.size() < bytes) override_dev_ = cu::DeviceBuffer(bytes);
      override_dev_.upload(override_host_.data(), bytes);
    }
    if (head_table_ < 0) return;
    head_rows_at_ = blob.size();
    for (const Slice& slice : slices_)
      if (slice.head_row >= 0)
        for (std::int64_t r = slice.tokens - slice.out_count; r < slice.tokens; ++r)
          blob.push_back(static_cast<std::int32_t>(slice.row + r));
    pick_head_rows_at_ = blob.size();
    blob.resize(blob.size() + static_cast<std::size_t>(head_picks_), 0);
    for (const Slice& slice : slices_)
      if (slice.head_pick >= 0)
        blob[pick_head_rows_at_ + static_cast<std::size_t>(slice.head_pick)] =
            static_cast<std::int32_t>(slice.head_row + slice.out_count - 1);
    ensure_head(head_rows_);
    if (head_picks_ > 0) upload_head_picks();
  }

  // Room for the head table's rows: the gathered hidden rows and the float32 output.
  void ensure_head(std::int64_t rows) {
    const std::int64_t count = b_.w_.tables[static_cast<std::size_t>(head_table_)].count;
    if (x_head_rows_ < rows) {
      x_head_ = cu::DeviceBuffer(static_cast<std::size_t>(rows * c_.hidden_size) * sizeof(Bf16));
      x_head_rows_ = rows;
      graphs_.clear();  // they captured the old buffer's address
    }
    if (head_elements_ < rows * count) {
      head_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(rows * count) * sizeof(float));
      head_elements_ = rows * count;
      graphs_.clear();
    }
  }

  // The head picks' requests up in one copy: parameters [picks], then the uniforms [segments] at
  // each pick's first segment (zeros for a greedy pick, which reads none; a graph's padding picks
  // are greedy); the outputs [segments] follow in the same device buffer. The layout depends only
  // on the picks and segments, so a graph's addresses hold from step to step.
  void upload_head_picks() {
    const auto picks = static_cast<std::size_t>(head_picks_), segments = static_cast<std::size_t>(pick_segments_);
    pick_u_at_ = picks * sizeof(cu::SegmentSampleParams);
    pick_out_at_ = pick_u_at_ + segments * sizeof(double);
    const std::size_t bytes = pick_out_at_ + segments * sizeof(cu::SampleOutput);
    if (pick_dev_.size() < bytes) {
      pick_dev_ = cu::DeviceBuffer(std::max<std::size_t>(bytes, 4096));
      graphs_.clear();
    }
    if (pick_out_host_.size() < segments * sizeof(cu::SampleOutput))
      pick_out_host_ = cu::PinnedBuffer(segments * sizeof(cu::SampleOutput));
    pick_host_.assign(pick_out_at_, std::byte{0});
    auto* params = reinterpret_cast<cu::SegmentSampleParams*>(pick_host_.data());
    auto* u = reinterpret_cast<double*>(pick_host_.data() + pick_u_at_);
    for (const Slice& slice : slices_) {
      if (slice.head_pick < 0) continue;
      const HeadSampleRequest& r = *slice.step->outputs.head_sample;
      params[slice.head_pick] = {r.temperature, r.top_k, r.top_p, 0};
      if (r.temperature != 0.0f) std::copy(r.u.begin(), r.u.end(), u + slice.pick_at);
    }
    pick_dev_.upload(pick_host_.data(), pick_host_.size());
  }

  // ---- Penalties: each sequence's tokens on the device, a penalized copy row per pick ----
  // The first step with a penalized pick gives every sequence slot a row of the context limit's
  // length on the device (4 bytes a token) and uploads the tokens every open sequence holds; from
  // then on each step appends its tokens there (one scatter launch).
  void start_history() {
    history_stride_ = kv_.max_context();
    history_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(kv_.max_sequences() * history_stride_) * 4);
    for (const SequenceId id : kv_.open_sequences()) upload_history(id);
    b_.note_memory();
  }
  // A sequence's tokens, as the host holds them, into its slot's row.
  void upload_history(SequenceId id) {
    const auto held = kv_.token_ids(id);
    history_dev_.upload(held.data(), held.size() * 4, static_cast<std::size_t>(kv_.slot(id) * history_stride_) * 4);
  }
  void record_history() {
    std::vector<std::int32_t> pairs;
    std::int64_t count = 0;
    for (const Slice& slice : slices_) count += slice.tokens;
    pairs.resize(static_cast<std::size_t>(2 * count));
    std::size_t k = 0;
    for (const Slice& slice : slices_) {
      const std::int64_t base = kv_.slot(slice.sequence) * history_stride_ + slice.start;
      for (std::int64_t t = 0; t < slice.tokens; ++t, ++k) {
        pairs[k] = static_cast<std::int32_t>(base + t);
        pairs[static_cast<std::size_t>(count) + k] = static_cast<std::int32_t>(slice.step->ids[static_cast<std::size_t>(t)]);
      }
    }
    if (history_pairs_dev_.size() < pairs.size() * 4)
      history_pairs_dev_ = cu::DeviceBuffer(std::max<std::size_t>(pairs.size() * 4, 4096));
    history_pairs_dev_.upload(pairs.data(), pairs.size() * 4);
    cu::scatter_tokens(history_dev_.as<std::int32_t>(), history_pairs_dev_.as<std::int32_t>(), count, *b_.stream_);
  }
  // Each penalized pick reads a copy of its row (after the step's output rows) with the penalties
  // applied; the raw row keeps the logprobs.
  void plan_penalties(std::vector<std::int32_t>& blob) {
    penalty_rows_.clear();
    std::vector<cu::LogitBias> biases;
    if (!any_penalized_) return;
    for (const Slice& slice : slices_) {
      if (slice.sample_slot < 0 || !slice.step->outputs.sample->penalized()) continue;
      const SampleRequest& r = *slice.step->outputs.sample;
      const std::int64_t length = slice.start + slice.tokens;
      cu::PenaltyRow row;
      row.tokens_at = kv_.slot(slice.sequence) * history_stride_;
      row.from_row = static_cast<std::int32_t>(slice.out_row + slice.out_count - 1);
      row.to_row = static_cast<std::int32_t>(out_rows_count_ + static_cast<std::int64_t>(penalty_rows_.size()));
      row.length = static_cast<std::int32_t>(length);
      row.output_start = static_cast<std::int32_t>(std::min(r.output_start, length));
      row.repetition = r.repetition_penalty;
      row.frequency = r.frequency_penalty;
      row.presence = r.presence_penalty;
      row.pick = slice.sample_slot;
      row.bias_at = static_cast<std::int32_t>(biases.size());
      row.bias_count = static_cast<std::int32_t>(r.logit_bias.size());
      for (const auto& [id, bias] : r.logit_bias) biases.push_back({static_cast<std::int32_t>(id), bias});
      blob[pick_rows_at_ + static_cast<std::size_t>(slice.sample_slot)] = row.to_row;
      penalty_rows_.push_back(row);
    }
    const std::size_t n = penalty_rows_.size();
    if (penalty_rows_dev_.size() < n * sizeof(cu::PenaltyRow)) {
      penalty_rows_dev_ = cu::DeviceBuffer(n * sizeof(cu::PenaltyRow));
      penalty_workspace_ = cu::DeviceBuffer(n * cu::penalty_workspace_bytes(c_.vocab_size));
    }
    penalty_rows_dev_.upload(penalty_rows_.data(), n * sizeof(cu::PenaltyRow));
    if (bias_dev_.size() < biases.size() * sizeof(cu::LogitBias))
      bias_dev_ = cu::DeviceBuffer(biases.size() * sizeof(cu::LogitBias));
    bias_dev_.upload(biases.data(), biases.size() * sizeof(cu::LogitBias));
    ensure_logits(out_rows_count_ + static_cast<std::int64_t>(n));
  }

  // Every prefill chunk's query tiles (slices `first` on: the decodes too in batch-invariant mode,
  // as chunks of one token), for one attention launch per layer, heaviest first; pages[i - first]
  // is slice i's page list in the blob. When the tiles cannot fill the GPU (a short chunk over a
  // long cached prefix: one block per head), each tile with enough keys is split over them (256 keys
  // or more per split, about two blocks per SM in all) and a merge launch combines the splits
  // (split-K, as flash-decoding does). ZOO_PREFILL_SPLIT=0 turns the split off, and so does
  // batch-invariant mode: where a split falls would depend on the rest of the step.
  void plan_prefill_tiles(GroupArrays& at, std::vector<std::int32_t>& blob,
                          const std::vector<std::size_t>& pages, std::size_t first) {
    using Tile = std::array<std::int32_t, cu::kPrefillTileInts>;
    const std::int64_t rows = cu::attention_prefill_tile_rows(static_cast<int>(c_.head_dim));
    std::vector<std::pair<std::int64_t, Tile>> tiles;  // (keys walked, tile)
    std::vector<std::array<std::int32_t, cu::kPrefillMergeInts>> merges;
    std::int64_t whole = 0;
    for (std::size_t i = first; i < slices_.size(); ++i) whole += (slices_[i].tokens + rows - 1) / rows;
    const std::int64_t blocks = whole * c_.num_heads, target = 2 * cu::device_properties().multiprocessors;
    const std::int64_t want = split_enabled_ && blocks > 0 && blocks < target ? (target + blocks - 1) / blocks : 1;
    std::int32_t slots = 0;
    for (std::size_t i = first; i < slices_.size(); ++i) {
      const Slice& slice = slices_[i];
      const auto page_at = static_cast<std::int32_t>(pages[i - first]);
      for (std::int64_t q0 = 0; q0 < slice.tokens; q0 += rows) {
        const std::int64_t keys = slice.start + q0 + std::min(rows, slice.tokens - q0);
        const std::int64_t blocks64 = (keys + 63) / 64;
        const std::int64_t splits = std::min(want, blocks64 / 4);
        const Tile base{static_cast<std::int32_t>(slice.row), static_cast<std::int32_t>(slice.tokens),
                        static_cast<std::int32_t>(slice.start), page_at, static_cast<std::int32_t>(q0), 0, 0, -1};
        if (splits < 2) {
          tiles.emplace_back(keys, base);
          continue;
        }
        merges.push_back({base[0], base[1], base[4], slots, static_cast<std::int32_t>(splits)});
        for (std::int64_t k = 0; k < splits; ++k) {
          Tile part = base;
          part[5] = static_cast<std::int32_t>(blocks64 * k / splits * 64);
          part[6] = static_cast<std::int32_t>(blocks64 * (k + 1) / splits * 64);
          part[7] = slots++;
          tiles.emplace_back(part[6] - part[5], part);
        }
      }
    }
    std::stable_sort(tiles.begin(), tiles.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    at.prefill_tiles = blob.size();
    at.prefill_tile_count = static_cast<std::int64_t>(tiles.size());
    for (const auto& [keys, tile] : tiles) blob.insert(blob.end(), tile.begin(), tile.end());
    at.prefill_merges = blob.size();
    at.prefill_merge_count = static_cast<std::int64_t>(merges.size());
    for (const auto& merge : merges) blob.insert(blob.end(), merge.begin(), merge.end());
    at.prefill_slots = slots;
    const std::size_t bytes = cu::attention_prefill_partial_bytes(static_cast<int>(c_.head_dim),
                                                                  static_cast<int>(c_.num_heads), slots);
    if (prefill_partial_.size() < bytes) prefill_partial_ = cu::DeviceBuffer(bytes);
  }

  // The logits rows whose logprobs are asked for, by logprob slot, and room for the results (a
  // buffer of its own, so graph steps use it too).
  void upload_logprob_rows() {
    if (logprobs_ == 0) return;
    std::vector<std::int32_t> rows(static_cast<std::size_t>(logprobs_)), ids(rows.size(), -1);
    for (const Slice& slice : slices_) {
      if (slice.logprob_slot >= 0)
        rows[static_cast<std::size_t>(slice.logprob_slot)] =
            static_cast<std::int32_t>(slice.out_row + slice.out_count - 1);  // a graph step's too
      const auto& scored = slice.step->outputs.score_ids;
      for (std::size_t r = 0; r < scored.size(); ++r) {
        rows[static_cast<std::size_t>(slice.score_slot) + r] = static_cast<std::int32_t>(slice.out_row + r);
        ids[static_cast<std::size_t>(slice.score_slot) + r] = static_cast<std::int32_t>(scored[r]);
      }
    }
    if (logprob_slots_ < logprobs_) {
      const auto n = static_cast<std::size_t>(logprobs_);
      logprob_rows_dev_ = cu::DeviceBuffer(n * 4);
      score_ids_dev_ = cu::DeviceBuffer(n * 4);
      id_values_dev_ = cu::DeviceBuffer(n * 4);
      id_values_host_ = cu::PinnedBuffer(n * 4);
      lse_dev_ = cu::DeviceBuffer(n * sizeof(double));
      top_ids_dev_ = cu::DeviceBuffer(n * cu::kMaxLogprobTop * 4);
      top_values_dev_ = cu::DeviceBuffer(n * cu::kMaxLogprobTop * 4);
      lse_host_ = cu::PinnedBuffer(n * sizeof(double));
      top_ids_host_ = cu::PinnedBuffer(n * cu::kMaxLogprobTop * 4);
      top_values_host_ = cu::PinnedBuffer(n * cu::kMaxLogprobTop * 4);
      logprob_slots_ = logprobs_;
    }
    logprob_rows_dev_.upload(rows.data(), rows.size() * 4);
    if (scores_ > 0) score_ids_dev_.upload(ids.data(), ids.size() * 4);
  }
  // log p by the SDK's rule (fill_logprobs): the row's value less its log-sum-exp, NaN as -inf.
  void fill_device_logprobs(std::size_t k, int top, SampledToken& token) const {
    const double lse = lse_host_.as<double>()[k];
    const auto logprob = [&](float v) {
      return static_cast<float>(static_cast<double>(std::isnan(v) ? -INFINITY : v) - lse);
    };
    token.logprob = logprob(token.logit);
    token.top.clear();
    const int want = std::min<int>(top, static_cast<int>(c_.vocab_size));
    for (int r = 0; r < want; ++r) {
      const std::size_t at = k * static_cast<std::size_t>(logprob_top_) + static_cast<std::size_t>(r);
      token.top.emplace_back(top_ids_host_.as<std::int32_t>()[at], logprob(top_values_host_.as<float>()[at]));
    }
  }

  void download_results() {
    cudaStream_t s = *b_.stream_;
    const std::int64_t V = c_.vocab_size, H = c_.hidden_size;
    if (samples_ > 0)
      ZOO_CUDA_CHECK(cudaMemcpyAsync(sample_out_host_.data(), sample_out_dev_.data(),
                                     static_cast<std::size_t>(samples_) * sizeof(cu::SampleOutput),
                                     cudaMemcpyDeviceToHost, s));
    if (logprobs_ > 0) {
      const auto n = static_cast<std::size_t>(logprobs_), top = n * static_cast<std::size_t>(logprob_top_) * 4;
      ZOO_CUDA_CHECK(cudaMemcpyAsync(lse_host_.data(), lse_dev_.data(), n * sizeof(double), cudaMemcpyDeviceToHost, s));
      if (scores_ > 0)
        ZOO_CUDA_CHECK(cudaMemcpyAsync(id_values_host_.data(), id_values_dev_.data(), n * 4, cudaMemcpyDeviceToHost, s));
      if (top > 0) {
        ZOO_CUDA_CHECK(cudaMemcpyAsync(top_ids_host_.data(), top_ids_dev_.data(), top, cudaMemcpyDeviceToHost, s));
        ZOO_CUDA_CHECK(cudaMemcpyAsync(top_values_host_.data(), top_values_dev_.data(), top, cudaMemcpyDeviceToHost, s));
      }
    }
    for (Slice& slice : slices_) {
      const OutputRequest& out = slice.step->outputs;
      if (out.logits && slice.sample_slot < 0 && out.score_ids.empty()) {
        slice.logits = HostTensor(DType::F32, {slice.out_count, V});
        ZOO_CUDA_CHECK(cudaMemcpyAsync(slice.logits.data(), logits_dev_.as<float>() + slice.out_row * V,
                                       slice.logits.nbytes(), cudaMemcpyDeviceToHost, s));
      }
      if (out.hidden) slice.hidden = download_f32(x_out_.as<Bf16>() + slice.out_row * H, slice.out_count, H, H);
      if (slice.head_row >= 0 && slice.head_pick < 0) {
        const std::int64_t count = b_.w_.tables[static_cast<std::size_t>(head_table_)].count;
        slice.head = HostTensor(DType::F32, {slice.out_count, count});
        ZOO_CUDA_CHECK(cudaMemcpyAsync(slice.head.data(), head_dev_.as<float>() + slice.head_row * count,
                                       slice.head.nbytes(), cudaMemcpyDeviceToHost, s));
      }
    }
    if (head_picks_ > 0)
      ZOO_CUDA_CHECK(cudaMemcpyAsync(pick_out_host_.data(), static_cast<std::byte*>(pick_dev_.data()) + pick_out_at_,
                                     static_cast<std::size_t>(pick_segments_) * sizeof(cu::SampleOutput),
                                     cudaMemcpyDeviceToHost, s));
  }

  // ---- DecoderOps: the sequence-aware ops ----
  void embed() override {
    cudaStream_t s = *b_.stream_;
    const std::int64_t H = c_.hidden_size;
    cu::embedding_gather(b_.w_.embed, c_.vocab_size, H, ids_dev_.as<std::int32_t>(), T_, a_.h.as<Bf16>(), s);
    if (c_.embed_scale > 0) cu::scale(a_.h.as<Bf16>(), T_ * H, round_to_bf16(static_cast<float>(c_.embed_scale)), s);
    profile_.mark("embedding");
    // Every slice's overrides, then its table rows (which replace an override at the same position,
    // as on the CPU): one launch for all overrides, one per table.
    if (overrides_ > 0)
      cu::scatter_rows_f32(blob(override_rows_at_), override_dev_.as<float>(), overrides_, H, a_.h.as<Bf16>(), s);
    for (const TableSum& sum : table_sums_) {
      const DeviceTable& t = b_.w_.tables[static_cast<std::size_t>(sum.table)];
      cu::sum_table_rows(t.rows, t.count, H, blob(sum.ids_at), sum.per_position, blob(sum.rows_at), sum.count,
                         a_.h.as<Bf16>(), s);
    }
    if (overrides_ > 0 || !table_sums_.empty()) profile_.mark("table rows");
  }
  void qk_norm_rope_cache(std::int64_t l, bool keep_normed) override {
    cu::QkNormRopeArgs rope = rope_args(l, keep_normed);
    rope.k_cache = layer_k(l);
    rope.v_cache = layer_v(l);
    rope.cache_rows = blob(group_at_[kv_.group_of(l)].cache_rows);
    cu::qk_norm_rope_cache(rope, *b_.stream_);
    profile_.mark("qk norm+rope");
  }
  void attention(std::int64_t l) override {
    cudaStream_t s = *b_.stream_;
    const GroupArrays& at = group_at_[kv_.group_of(l)];
    if (decodes_ > 0 && !b_.batch_invariant_) {  // batch-invariant: the decodes are prefill tiles
      auto d = attention_args<cu::DecodeAttentionArgs>(l);
      d.k_cache = layer_k(l);
      d.v_cache = layer_v(l);
      d.q_tokens = 1;
      d.kv_len = max_decode_len_;
      d.kv_len_device = blob(lens_at_);
      d.batch = static_cast<int>(decodes_);
      d.page_table = blob(at.decode_pages);
      d.page_stride = at.decode_stride;
      d.workspace = decode_workspace_.data();
      d.workspace_bytes = decode_workspace_.size();
      cu::attention_decode(d, s);
      profile_.mark("attention decode");
    }
    if (at.contiguous_page >= 0) {  // a lone prefill over consecutive pages: one contiguous cache
      const Slice& slice = slices_.front();
      const std::int64_t offset = at.contiguous_page * kKvPageTokens * c_.kv_dim();
      auto p = attention_args<cu::PrefillAttentionArgs>(l);
      p.k_cache = layer_k(l) + offset;
      p.v_cache = layer_v(l) + offset;
      p.tokens = slice.tokens;
      p.start = slice.start;
      b_.prefill_attention_->run(p, s);
      prefill_engine_ = b_.prefill_attention_->last_engine();
      profile_.mark("attention prefill");
    } else if (at.prefill_tile_count > 0) {  // every prefill chunk in one launch
      auto p = attention_args<cu::PrefillAttentionArgs>(l);
      p.k_cache = layer_k(l);
      p.v_cache = layer_v(l);
      p.pages = blob(0);
      const cu::PrefillSplit split{prefill_partial_.data(), at.prefill_slots, blob(at.prefill_merges),
                                   at.prefill_merge_count};
      cu::attention_prefill_tiles(p, blob(at.prefill_tiles), at.prefill_tile_count, s,
                                  at.prefill_merge_count > 0 ? &split : nullptr);
      prefill_engine_ = "paged";
      profile_.mark("attention prefill");
    }
  }
  void logits(bool every_row) override {
    if (every_row) return head_logits(a_.x.as<Bf16>(), T_);  // the logits tap: every row of the step
    gather_outputs();
    head_logits(x_out_.as<Bf16>(), out_rows_count_);
  }
  // The output rows of x gathered into one block (an embedding gather over x).
  void gather_outputs() {
    const std::int64_t H = c_.hidden_size;
    if (x_out_rows_ < out_rows_count_) {
      x_out_ = cu::DeviceBuffer(static_cast<std::size_t>(out_rows_count_ * H) * sizeof(Bf16));
      x_out_rows_ = out_rows_count_;
    }
    cu::embedding_gather(a_.x.as<Bf16>(), T_, H, blob(out_rows_at_), out_rows_count_, x_out_.as<Bf16>(), *b_.stream_);
    profile_.mark("gather outputs");
  }
  // One set of launches per sampler mode over that mode's slots, whatever their count.
  void sample() override {
    const std::int64_t V = c_.vocab_size;
    const std::size_t ws = cu::sample_workspace_bytes(V);
    const auto penalized = static_cast<std::int64_t>(penalty_rows_.size());
    cu::apply_penalties_rows(logits_dev_.as<float>(), V, penalty_rows_dev_.as<cu::PenaltyRow>(), penalized,
                             history_dev_.as<std::int32_t>(), penalty_workspace_.data(), *b_.stream_,
                             bias_dev_.as<cu::LogitBias>());
    for (const cu::SampleMode mode : {cu::SampleMode::greedy, cu::SampleMode::select, cu::SampleMode::sort}) {
      const int first = mode_begin_[static_cast<int>(mode)], count = mode_begin_[static_cast<int>(mode) + 1] - first;
      if (count == 0) continue;
      if (mode == cu::SampleMode::sort) {
        const std::size_t need = cu::sample_rows_temp_bytes(V, count);
        if (sample_temp_.size() < need) {
          sample_temp_ = cu::DeviceBuffer(need);
          graphs_.clear();  // they captured the old buffer's address
        }
      }
      const auto k = static_cast<std::size_t>(first);
      cu::sample_rows(logits_dev_.as<float>(), V, mode, blob(pick_rows_at_) + first, count,
                      sample_params_dev_.as<cu::SampleParams>() + k, sample_out_dev_.as<cu::SampleOutput>() + k,
                      static_cast<std::byte*>(sample_workspace_.data()) + k * ws, ws, sample_temp_.data(),
                      sample_temp_.size(), *b_.stream_);
    }
    cu::restore_pick_logits(logits_dev_.as<float>(), V, penalty_rows_dev_.as<cu::PenaltyRow>(), penalized,
                            sample_out_dev_.as<cu::SampleOutput>(), *b_.stream_);
    profile_.mark("sample");
  }
  // The row table as a head on the rows of the slices that ask for it, gathered into one block:
  // one GEMM whatever their count.
  void head(int table) override {
    const DeviceTable& t = b_.w_.tables[static_cast<std::size_t>(table)];
    const std::int64_t H = c_.hidden_size;
    cu::embedding_gather(a_.x.as<Bf16>(), T_, H, blob(head_rows_at_), head_rows_, x_head_.as<Bf16>(), *b_.stream_);
    b_.gemm_->linear(x_head_.as<Bf16>(), t.rows, head_dev_.as<float>(), head_rows_, t.count, H, *b_.stream_);
    profile_.mark("gemm row table");
  }
  // Each pick from its slice's last head row, with its own request: one launch per segment count.
  void sample_head(int table) override {
    const std::int64_t count = b_.w_.tables[static_cast<std::size_t>(table)].count;
    auto* base = static_cast<std::byte*>(pick_dev_.data());
    const auto* params = reinterpret_cast<const cu::SegmentSampleParams*>(base);
    const auto* u = reinterpret_cast<const double*>(base + pick_u_at_);
    auto* out = reinterpret_cast<cu::SampleOutput*>(base + pick_out_at_);
    for (const PickGroup& g : pick_groups_)
      cu::sample_segments(head_dev_.as<float>(), g.segments, count / g.segments, params + g.first, u + g.at,
                          out + g.at, *b_.stream_, g.count, blob(pick_head_rows_at_) + g.first, count);
    profile_.mark("sample head");
  }
  // The step's rows (decodes first); k_rope from the cache rows the step wrote.
  void tap(DiagnosticHook& hook, const std::string& name, Value value, std::int64_t l) override {
    if (value != Value::k_rope) return record_tap(hook, name, value, nullptr);
    const std::int64_t kvd = c_.kv_dim();
    const std::size_t bytes = static_cast<std::size_t>(T_ * kvd) * sizeof(Bf16);
    if (tap_rows_.size() < bytes) tap_rows_ = cu::DeviceBuffer(bytes);
    const std::size_t g = kv_.group_of(l);
    cu::embedding_gather(layer_k(l), (storage_[g].pages + 1) * kKvPageTokens, kvd,
                         blob(group_at_[g].cache_rows), T_, tap_rows_.as<Bf16>(), *b_.stream_);
    record_tap(hook, name, value, tap_rows_.as<Bf16>());
  }

  // Offsets into the step's int32 blob, per group of layers.
  struct GroupArrays {
    std::size_t cache_rows = 0, decode_pages = 0;
    std::int64_t decode_stride = 1;
    std::size_t prefill_tiles = 0;  // every prefill chunk's query tiles (attention_prefill_tiles)
    std::int64_t prefill_tile_count = 0;
    std::size_t prefill_merges = 0;  // the split tiles' merges
    std::int64_t prefill_merge_count = 0, prefill_slots = 0;
    // >= 0: the step is one prefill slice whose pages here are this page and the ones after it.
    std::int64_t contiguous_page = -1;
  };

  std::vector<Storage> storage_;  // per group
  bool grows_;                    // storage taken as pages are used (a runner of one sequence)
  bool pending_ = false;
  // Device time of the steps so far, from a step's first copy to its last (stats()): against the
  // engine's wall time per step, what the device spends waiting for the host.
  cu::Event step_begin_, step_end_;
  double device_seconds_ = 0;
  std::int64_t graph_steps_ = 0;  // steps run as (or captured into) a decode graph
  // The engine of the last prefill attention: "paged" (Zoo's kernel over page tables), or for a
  // lone prefill over consecutive pages PrefillAttention's ("cudnn" or "zoo"); "none" before one.
  const char* prefill_engine_ = "none";
  // The step in flight.
  std::vector<Slice> slices_;  // decodes first
  std::int64_t decodes_ = 0, out_rows_count_ = 0, max_decode_len_ = 0;
  int samples_ = 0;                  // picks on the device, grouped by sampler mode (mode_begin_)
  std::array<int, 4> mode_begin_{};  // the first slot of each SampleMode; [3]: samples_
  int logprobs_ = 0, logprob_top_ = 0;  // rows asking for logprobs (picks, then scored rows), the most top entries asked
  int scores_ = 0;                      // scored rows (OutputRequest::score_ids) among them
  bool any_logits_ = false, any_sample_ = false, any_penalized_ = false, any_hidden_ = false;
  // Row tables of the step. Each table's summed rows: its ids [count, per_position] and batch rows
  // [count] in the blob.
  struct TableSum {
    int table = -1;
    std::int64_t per_position = 0, count = 0;
    std::size_t ids_at = 0, rows_at = 0;
  };
  std::vector<TableSum> table_sums_;
  std::int64_t overrides_ = 0;  // embedding override rows: their batch rows in the blob, the rows here
  std::size_t override_rows_at_ = 0;
  std::vector<float> override_host_;
  cu::DeviceBuffer override_dev_;
  // The head table (-1: none): its rows [head_rows_] gathered from these batch rows, and its output.
  int head_table_ = -1;
  std::int64_t head_rows_ = 0, x_head_rows_ = 0, head_elements_ = 0;
  std::size_t head_rows_at_ = 0;
  cu::DeviceBuffer x_head_, head_dev_;
  // Head picks: slots grouped by segment count, each group one launch; per slot its head row (in
  // the blob); requests, uniforms and outputs in pick_dev_ (upload_head_picks).
  struct PickGroup {
    std::int64_t segments = 0;
    int first = 0, count = 0;  // its slots
    std::int64_t at = 0;       // its first segment among the uniforms and outputs
  };
  std::vector<PickGroup> pick_groups_;
  int head_picks_ = 0;
  std::int64_t pick_segments_ = 0;
  std::size_t pick_head_rows_at_ = 0, pick_u_at_ = 0, pick_out_at_ = 0;  // blob offset; byte offsets in pick_dev_
  std::vector<std::byte> pick_host_;
  cu::DeviceBuffer pick_dev_;
  cu::PinnedBuffer pick_out_host_;
  StepVariant graph_variant_;  // what a graph step computes besides the layers (alike_decodes)
  std::vector<GroupArrays> group_at_;
  std::size_t lens_at_ = 0, out_rows_at_ = 0, pick_rows_at_ = 0;
  cu::DeviceBuffer blob_dev_, x_out_, decode_workspace_;
  const std::int32_t* blob_base_ = nullptr;  // the step's int32 arrays: blob_dev_, or graph_blob_ for a graph step
  // Decode graphs by (batch bucket, kv-length bucket, variant); their inputs live in graph_blob_
  // (and a head's picks' in pick_dev_).
  std::map<std::tuple<std::int64_t, std::int64_t, decltype(StepVariant{}.key())>, cu::CudaGraph> graphs_;
  cu::DeviceBuffer graph_blob_;
  std::int64_t graph_batch_ = 0;  // > 0: this step replays the graph of this bucket
  bool graphs_enabled_ = kernels::env_flag("ZOO_RUNNER_GRAPHS", true);
  bool split_enabled_ = !b_.batch_invariant_ && kernels::env_flag("ZOO_PREFILL_SPLIT", true);
  cu::DeviceBuffer prefill_partial_;  // split prefill tiles' partial outputs (one layer's; reused)
  cu::DeviceBuffer tap_rows_;         // a tapped value gathered from the cache (k_rope)
  std::int64_t x_out_rows_ = 0;
  cu::DeviceBuffer sample_params_dev_, sample_out_dev_, sample_workspace_;
  cu::PinnedBuffer sample_out_host_;
  int sample_slots_ = 0;
  cu::DeviceBuffer sample_temp_;  // the sort mode's segmented sort
  cu::DeviceBuffer logprob_rows_dev_, lse_dev_, top_ids_dev_, top_values_dev_, score_ids_dev_, id_values_dev_;
  cu::PinnedBuffer lse_host_, top_ids_host_, top_values_host_, id_values_host_;
  int logprob_slots_ = 0;
  // Penalties: every sequence slot's tokens (history_stride_ each; 0 until the first penalized
  // pick), the step's penalized picks and their bitmaps.
  std::int64_t history_stride_ = 0;
  cu::DeviceBuffer history_dev_, history_pairs_dev_, penalty_rows_dev_, penalty_workspace_, bias_dev_;
  std::vector<cu::PenaltyRow> penalty_rows_;
};

}  // namespace

std::unique_ptr<KvRunner> make_cuda_runner(std::shared_ptr<CudaBackend> backend, const RunnerOptions& options,
                                           CudaRank rank) {
  return std::make_unique<CudaRunner>(std::move(backend), options, rank);
}

}  // namespace zoo::layers::cuda_backend
