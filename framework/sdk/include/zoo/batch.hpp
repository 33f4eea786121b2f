#pragma once
// The batch-first runtime contract: many sequences per forward pass over a paged KV cache.
//
// A Runner (Model::new_runner) owns a model's KV page pool and the sequences that live in it. A
// ForwardBatch is a list of slices, one per sequence taking part in the step: a prefill chunk or
// decode tokens, and that sequence's outputs. The backend runs one forward pass over every slice's
// rows (one linear call per weight), each slice attending to its own cached prefix through its page
// table. Session stays what trace, validate and generate use: a batch-of-one adapter over the same
// path.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/diagnostic_hook.hpp"
#include "zoo/error.hpp"
#include "zoo/kv_pages.hpp"

namespace zoo {

struct ForwardStep;
struct ForwardResult;

using SequenceId = std::int64_t;

// One sequence's part of a step: its new tokens (and embedding overrides, table rows) at positions
// start .. start + ids.size() - 1, and what it wants back. `start` must equal the tokens the
// sequence already holds: a slice states where it writes, and a stale scheduler is caught instead
// of corrupting a cache.
struct SequenceSlice {
  SequenceId sequence = -1;
  std::int64_t start = 0;
  const ForwardStep* step = nullptr;  // ids, overrides, table rows and outputs, as for Session::forward
};

// The spans a batch points into must stay valid until Runner::wait returns.
struct ForwardBatch {
  std::vector<SequenceSlice> slices;
};

struct RunnerOptions {
  // KV pages (of kKvPageTokens tokens, every full-attention layer; a sliding-window layer's pool
  // stops at what max_sequences windows need) in the pool; 0: the backend's default (CUDA:
  // what free device memory allows after the weights; CPU: enough for max_sequences sequences of
  // the context limit, taken from host memory only as pages are used).
  std::int64_t kv_pages = 0;
  std::int64_t kv_bytes = 0;         // > 0 (and kv_pages 0): as many pages as fit in this many bytes
  std::int64_t max_sequences = 256;  // open sequences at once
  // A sequence's context limit, in tokens; 0: the model's (ModelArgs::max_context).
  std::int64_t max_context = 0;
  // > 0 (kv_pages and kv_bytes 0): as many pages as keep the device's memory in use (the weights,
  // whatever else holds memory there, the pool and the backend's room for a step's activations)
  // within this fraction of its total, as vLLM's --gpu-memory-utilization. Fewer pages than one
  // sequence at the context limit needs is an InputError; a backend without device memory refuses it.
  double kv_memory_fraction = 0;
};

// The pool's state, for admission and reports. Per group of layers that share a page table (full
// attention; each sliding window): pages in use and capacity.
struct KvPoolGroup {
  std::int64_t window = 0;  // 0: full attention
  std::int64_t layers = 0;
  std::int64_t capacity = 0;
  std::int64_t used = 0;
};
struct KvPoolStats {
  std::int64_t page_tokens = kKvPageTokens;
  std::int64_t page_bytes = 0;  // one page of every layer, keys and values
  std::vector<KvPoolGroup> groups;

  // The most pages of any group: the full-attention layers' (sliding-window groups hold fewer).
  std::int64_t capacity() const {
    std::int64_t most = 0;
    for (const auto& g : groups) most = g.capacity > most ? g.capacity : most;
    return most;
  }
  // What the pool holds in bytes: each group's pages of its own layers.
  double bytes() const {
    std::int64_t layers = 0;
    for (const auto& g : groups) layers += g.layers;
    double total = 0;
    for (const auto& g : groups)
      total += static_cast<double>(g.capacity) * static_cast<double>(page_bytes) *
               static_cast<double>(g.layers) / static_cast<double>(layers > 0 ? layers : 1);
    return total;
  }
};

// A step asked for more KV pages than are free. Thrown by submit() before any work: no sequence's
// state changed, and the caller may free pages (finish or preempt a sequence) and submit again.
class KvPoolExhausted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual SequenceId open_sequence() = 0;
  // A new sequence holding the same cached tokens (or the first `tokens` of them: a prefix, as a
  // prefix cache reuses), sharing their pages until either writes. InputError when a prefix reaches
  // positions a sliding window already gave back.
  virtual SequenceId fork_sequence(SequenceId sequence, std::int64_t tokens = -1) = 0;
  virtual void close_sequence(SequenceId sequence) = 0;
  virtual std::int64_t tokens(SequenceId sequence) const = 0;
  virtual std::int64_t max_context() const = 0;
  // Pages appending `count` tokens to `sequence` would take from the pool, per group (the order of
  // KvPoolStats::groups); what a scheduler admits by.
  virtual std::vector<std::int64_t> pages_needed(SequenceId sequence, std::int64_t count) const = 0;
  virtual KvPoolStats pool() const = 0;
  // Starts one forward pass over every slice (each sequence at most once). Checks everything
  // first: an InputError (bad ids, a slice past the context limit) or KvPoolExhausted leaves every
  // sequence as it was. The batch's spans must stay valid until wait().
  virtual void submit(const ForwardBatch& batch, DiagnosticHook* hook = nullptr) = 0;
  // The results of the submitted batch, one per slice in slice order.
  virtual std::vector<ForwardResult> wait() = 0;
  // Counters for tests and benchmarks (e.g. rows per linear call), free-form.
  virtual nlohmann::json stats() const { return nlohmann::json::object(); }
};

}  // namespace zoo
