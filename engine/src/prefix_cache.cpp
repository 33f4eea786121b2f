// The engine's prefix cache (prefix_cache.hpp).
#include "prefix_cache.hpp"

#include <algorithm>

namespace zoo::engine {

PrefixCache::~PrefixCache() {
  for (const auto& entry : entries_) runner_.close_sequence(entry.id);
}

std::vector<std::uint64_t> PrefixCache::page_hashes(const std::vector<std::int64_t>& tokens,
                                                    std::size_t pages) {
  std::vector<std::uint64_t> out;
  std::uint64_t h = 0x6a09e667f3bcc908ull;
  for (std::size_t p = 0; p < pages; ++p) {
    for (std::size_t t = p * kKvPageTokens; t < (p + 1) * kKvPageTokens; ++t) {
      // splitmix64 of the running hash and the token: chained, so page p's hash names pages 0 .. p.
      std::uint64_t z = h ^ (static_cast<std::uint64_t>(tokens[t]) + 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      h = z ^ (z >> 31);
    }
    out.push_back(h);
  }
  return out;
}

void PrefixCache::forget_hashes(const Entry& entry) {
  for (const auto h : entry.page_hashes) {
    const auto it = by_hash_.find(h);
    if (it == by_hash_.end()) continue;
    std::erase(it->second, entry.uid);
    if (it->second.empty()) by_hash_.erase(it);
  }
}

PrefixCache::Match PrefixCache::longest(const std::vector<std::int64_t>& tokens) const {
  // The prompt's chained page hashes, longest first; a hit is checked token by token (a hash
  // collision is not a match).
  const std::size_t pages = (tokens.size() - 1) / kKvPageTokens;
  const auto hashes = page_hashes(tokens, pages);
  const Entry* best = nullptr;
  Match match;
  for (std::size_t p = pages; p-- > 0 && !best;) {
    const auto it = by_hash_.find(hashes[p]);
    if (it == by_hash_.end()) continue;
    const auto n = static_cast<std::ptrdiff_t>((p + 1) * kKvPageTokens);
    for (std::size_t e = 0; e < entries_.size(); ++e) {
      const Entry& entry = entries_[e];
      if (std::find(it->second.begin(), it->second.end(), entry.uid) == it->second.end()) continue;
      if (!std::equal(tokens.begin(), tokens.begin() + n, entry.tokens.begin())) continue;
      if (!best || entry.last_use > best->last_use) {
        best = &entry;
        match.entry = e;
      }
    }
    if (best) match.tokens = n;
  }
  return match;
}

SequenceId PrefixCache::fork(const Match& match) {
  Entry& entry = entries_.at(match.entry);
  const SequenceId id = runner_.fork_sequence(entry.id, match.tokens);
  entry.last_use = ++clock_;
  return id;
}

bool PrefixCache::insert(SequenceId id, std::vector<std::int64_t> tokens) {
  Entry entry{id, std::move(tokens), ++clock_, next_uid_++, {}};
  entry.page_hashes = page_hashes(entry.tokens, entry.tokens.size() / kKvPageTokens);
  for (const auto h : entry.page_hashes) by_hash_[h].push_back(entry.uid);
  entries_.push_back(std::move(entry));
  return static_cast<std::int64_t>(entries_.size()) > max_entries_ && evict_one(nullptr);
}

bool PrefixCache::evict_one(std::vector<std::int64_t>* free) {
  if (entries_.empty()) return false;
  const auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                       [](const auto& a, const auto& b) { return a.last_use < b.last_use; });
  const auto before = runner_.pool().groups;
  runner_.close_sequence(oldest->id);
  forget_hashes(*oldest);
  entries_.erase(oldest);
  if (free) {
    const auto after = runner_.pool().groups;
    for (std::size_t g = 0; g < free->size(); ++g) (*free)[g] += before[g].used - after[g].used;
  }
  return true;
}

}  // namespace zoo::engine
