#pragma once
// The engine's prefix cache (EngineOptions::prefix_cache_entries): finished sequences kept with
// their KV pages, found by the chained hashes of their whole pages, so that a new prompt that
// begins with the same pages forks them instead of computing them again. Least recently used
// first out.
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "zoo/batch.hpp"

namespace zoo::engine {

class PrefixCache {
 public:
  // A cached prefix that begins a prompt: `tokens` 0 when none does.
  struct Match {
    std::size_t entry = 0;
    std::int64_t tokens = 0;
  };

  PrefixCache(Runner& runner, std::int64_t max_entries) : runner_(runner), max_entries_(max_entries) {}
  ~PrefixCache();  // the entries' sequences go back to the runner
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest prefix of `tokens` in whole pages some entry holds, leaving at least one token to
  // compute (its logits are what the step needs); ties go to the latest used.
  Match longest(const std::vector<std::int64_t>& tokens) const;
  // A new runner sequence holding the match's tokens; the entry counts as used now.
  SequenceId fork(const Match& match);
  // Keeps the runner's sequence `id` holding `tokens`; true when that evicted an entry (more than
  // max_entries).
  bool insert(SequenceId id, std::vector<std::int64_t> tokens);
  // Closes the least recently used entry; false when none is left. `free` (per pool group) gains
  // its pages.
  bool evict_one(std::vector<std::int64_t>* free);

 private:
  struct Entry {
    SequenceId id = -1;
    std::vector<std::int64_t> tokens;  // what the runner's sequence holds
    std::uint64_t last_use = 0;
    std::uint64_t uid = 0;
    std::vector<std::uint64_t> page_hashes;  // chained: page i's hash covers pages 0 .. i
  };
  // Chained hashes of the first `pages` whole pages of `tokens`.
  static std::vector<std::uint64_t> page_hashes(const std::vector<std::int64_t>& tokens, std::size_t pages);
  void forget_hashes(const Entry& entry);

  Runner& runner_;
  std::int64_t max_entries_;
  std::vector<Entry> entries_;
  // Each cached page's chained hash -> the entries (uids) holding that prefix: a lookup walks the
  // prompt's pages, not the entries.
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> by_hash_;
  std::uint64_t next_uid_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace zoo::engine
