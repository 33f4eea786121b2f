#pragma once
// The sequences of a batch runner and their KV pages, for both backends (the storage is the
// backend's): which layers share a page table (all full-attention layers; each sliding window), a
// page pool per group, each sequence's tables, and the checks of a batch before it runs. A batch
// is checked whole (InputError for bad slices, KvPoolExhausted when pages run short) before any
// sequence changes, then appended.
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "zoo/batch.hpp"
#include "zoo/kv_pages.hpp"
#include "zoo/layers/decoder.hpp"
#include "zoo/model.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

class KvSequences {
 public:
  struct Group {
    std::int64_t window = 0;  // 0: full attention
    std::vector<std::int64_t> layers;
    std::unique_ptr<KvPagePool> pool;
  };

  // The runner's context limit is options.max_context, or the model's (InputError beyond it). The
  // full-attention pool holds options.kv_pages pages, or options.kv_bytes worth (`page_bytes` a page
  // of every layer), or by default room for max_sequences sequences at the context limit within
  // `budget_bytes`; never fewer than one sequence at the limit needs (InputError when bytes given
  // are too few). A sliding-window group's pool holds no more than its sequences' windows need
  // (window_pages in the .cpp); bytes it leaves of a budget go to the full-attention pool.
  KvSequences(const DecoderSpec& spec, const RunnerOptions& options, std::int64_t model_max_context,
              std::int64_t page_bytes, double budget_bytes);
  // The layers grouped by window, in layer order of first appearance.
  static std::vector<Group> layer_groups(const DecoderSpec& spec);

  const std::vector<Group>& groups() const { return groups_; }
  std::size_t group_of(std::int64_t layer) const { return layer_group_[static_cast<std::size_t>(layer)]; }
  std::int64_t index_in_group(std::int64_t layer) const { return layer_index_[static_cast<std::size_t>(layer)]; }
  std::int64_t max_context() const { return max_context_; }

  SequenceId open_sequence();
  SequenceId fork_sequence(SequenceId sequence, std::int64_t tokens = -1);
  void close_sequence(SequenceId sequence);
  std::int64_t tokens(SequenceId sequence) const { return tables(sequence).front().tokens(); }
  std::vector<std::int64_t> pages_needed(SequenceId sequence, std::int64_t count) const;
  KvPoolStats stats(std::int64_t page_bytes) const;
  const std::vector<KvPageTable>& tables(SequenceId sequence) const;  // one per group
  // The token ids the sequence holds, positions 0 .. tokens - 1 (the penalties read them), and its
  // slot: a dense index below max_sequences, free again when it closes (where a backend keeps a
  // copy of them).
  std::span<const std::int32_t> token_ids(SequenceId sequence) const;
  std::int64_t slot(SequenceId sequence) const;
  std::int64_t max_sequences() const { return max_sequences_; }
  // Every open sequence (for a backend that starts keeping its own copy of their tokens).
  std::vector<SequenceId> open_sequences() const;

  // Checks the batch (each sequence once, at its length, within the context limit; the step's
  // ids and outputs by check_step; one head table), then that the pool holds every page it needs:
  // nothing changes when either fails.
  void check(const ForwardBatch& batch, const std::vector<std::int64_t>& table_rows) const;
  // Appends each slice's tokens to its tables; `copy(group, copy)` for each shared page a slice
  // takes a private copy of (the caller copies its rows in the group's storage).
  void append(const ForwardBatch& batch, const std::function<void(std::size_t, const PageCopy&)>& copy);

 private:
  std::vector<KvPageTable>& tables(SequenceId sequence);
  const DecoderSpec& spec_;
  std::int64_t max_sequences_, max_context_;
  std::vector<Group> groups_;
  std::vector<std::size_t> layer_group_;
  std::vector<std::int64_t> layer_index_;
  std::map<SequenceId, std::vector<KvPageTable>> sequences_;  // after groups_: tables give pages back
  struct Held {
    std::int64_t slot = 0;
    std::vector<std::int32_t> ids;
  };
  std::map<SequenceId, Held> held_;
  std::vector<std::int64_t> free_slots_;  // below next_slot_
  std::int64_t next_slot_ = 0;
  void hold(SequenceId id, std::vector<std::int32_t> ids);
  SequenceId next_id_ = 0;
};

// The Runner methods that are bookkeeping only (sequences, pages, the pool), for both backends'
// runners; a backend adds its storage, submit() and wait().
class KvRunner : public Runner {
 public:
  SequenceId open_sequence() override { return kv_.open_sequence(); }
  SequenceId fork_sequence(SequenceId id, std::int64_t tokens = -1) override { return kv_.fork_sequence(id, tokens); }
  void close_sequence(SequenceId id) override { kv_.close_sequence(id); }
  std::int64_t tokens(SequenceId id) const override { return kv_.tokens(id); }
  std::int64_t max_context() const override { return kv_.max_context(); }
  std::vector<std::int64_t> pages_needed(SequenceId id, std::int64_t count) const override {
    return kv_.pages_needed(id, count);
  }
  KvPoolStats pool() const override { return kv_.stats(page_bytes_); }
  // What submit() checks before anything changes (the batch against the sequences, the pool and
  // the backend's row tables).
  virtual void check(const ForwardBatch& batch) const = 0;

 protected:
  // `page_bytes`: one page of every layer, keys and values.
  KvRunner(const DecoderSpec& spec, const RunnerOptions& options, std::int64_t model_max_context,
           std::int64_t page_bytes, double budget_bytes)
      : kv_(spec, options, model_max_context, page_bytes, budget_bytes), page_bytes_(page_bytes) {}

  KvSequences kv_;
  std::int64_t page_bytes_;
};

}  // namespace zoo::layers
