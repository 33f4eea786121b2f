#include "token_trie.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

namespace zoo::tokenizer_detail {

void TokenTrie::add(std::string_view key, size_t token) {
  if (built_) throw std::logic_error("TokenTrie::add after build");
  if (key.empty()) return;
  if (key.size() > std::numeric_limits<uint32_t>::max() || token > std::numeric_limits<uint32_t>::max())
    throw std::length_error("TokenTrie: a string or token index past 2^32");
  pending_.push_back({keys_.size(), static_cast<uint32_t>(key.size()), static_cast<uint32_t>(token)});
  keys_.append(key.rbegin(), key.rend());
}

void TokenTrie::build() {
  if (built_) throw std::logic_error("TokenTrie::build twice");
  built_ = true;
  const auto key = [&](const Key& k) { return std::string_view(keys_).substr(k.offset, k.length); };
  // Sorted, a string given twice once (the last token), so that the strings below a node are a
  // range and its children's ranges follow one another in byte order.
  std::sort(pending_.begin(), pending_.end(), [&](const Key& a, const Key& b) {
    const int c = key(a).compare(key(b));
    return c != 0 ? c < 0 : a.token < b.token;
  });
  std::vector<Key> keys;
  keys.reserve(pending_.size());
  uint32_t max_token = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (i + 1 < pending_.size() && key(pending_[i]) == key(pending_[i + 1])) continue;
    keys.push_back(pending_[i]);
    max_token = std::max(max_token, pending_[i].token);
  }
  std::vector<Key>().swap(pending_);

  // One node per distinct prefix: a string adds the bytes past what it shares with the one before.
  size_t count = 1;
  for (size_t i = 0; i < keys.size(); ++i) {
    size_t common = 0;
    if (i > 0) {
      const auto a = key(keys[i - 1]), b = key(keys[i]);
      common = static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
    }
    count += keys[i].length - common;
  }
  if (count >= std::numeric_limits<uint32_t>::max())
    throw std::length_error("TokenTrie: more than 2^32 nodes");
  const auto n = static_cast<uint32_t>(count);
  label_.assign(n, 0);
  first_child_.assign(static_cast<size_t>(n) + 1, n);
  out_.assign(n, -2);  // -2: not a terminal (filled from the failure link below)
  token_length_.assign(keys.empty() ? 0 : static_cast<size_t>(max_token) + 1, 0);
  for (const Key& k : keys) {
    token_length_[k.token] = k.length;
    max_length_ = std::max<size_t>(max_length_, k.length);
  }

  // Breadth first, one depth at a time: the nodes of a depth are numbered in order, each with the
  // range of strings below it; its children come from splitting the range by the next byte.
  std::vector<std::pair<uint32_t, uint32_t>> level{{0, static_cast<uint32_t>(keys.size())}}, below;
  uint32_t node = 0, next = 1;
  for (uint32_t depth = 0; !level.empty(); ++depth) {
    below.clear();
    for (auto [lo, hi] : level) {
      if (lo < hi && keys[lo].length == depth) out_[node] = static_cast<int32_t>(keys[lo++].token);
      first_child_[node] = next;
      while (lo < hi) {
        const char c = keys_[keys[lo].offset + depth];
        uint32_t end = lo + 1;
        while (end < hi && keys_[keys[end].offset + depth] == c) ++end;
        label_[next++] = static_cast<unsigned char>(c);
        below.emplace_back(lo, end);
        lo = end;
      }
      ++node;
    }
    level.swap(below);
  }
  std::string().swap(keys_);
  out_[0] = -1;

  // Failure links, breadth first (a node's link is shallower, so already known), and with them
  // the deepest terminal on each failure chain.
  fail_.assign(n, 0);
  for (uint32_t u = 0; u < n; ++u) {
    for (uint32_t v = first_child_[u]; v < first_child_[u + 1]; ++v) {
      uint32_t f = 0;
      if (u != 0) {
        for (uint32_t at = fail_[u];; at = fail_[at]) {
          if (const int64_t g = child(at, label_[v]); g >= 0) {
            f = static_cast<uint32_t>(g);
            break;
          }
          if (at == 0) break;
        }
      }
      fail_[v] = f;
      if (out_[v] == -2) out_[v] = out_[f];
    }
  }
}

int64_t TokenTrie::child(uint32_t node, unsigned char c) const {
  const auto begin = label_.begin() + first_child_[node], end = label_.begin() + first_child_[node + 1];
  const auto it = std::lower_bound(begin, end, c);
  return it != end && *it == c ? it - label_.begin() : -1;
}

void TokenTrie::starts(std::string_view s, size_t begin, size_t end, std::vector<Match>& out) const {
  if (!built_) throw std::logic_error("TokenTrie::starts before build");
  if (end - begin > std::numeric_limits<uint32_t>::max())
    throw std::length_error("TokenTrie::starts: a chunk past 2^32");
  out.clear();
  if (empty() || begin >= end) return;
  uint32_t state = 0;
  for (size_t i = std::min(s.size(), end + max_length_); i-- > begin;) {
    const auto c = static_cast<unsigned char>(s[i]);
    int64_t next;
    while ((next = child(state, c)) < 0 && state != 0) state = fail_[state];
    state = next < 0 ? 0 : static_cast<uint32_t>(next);
    if (i >= end) continue;
    if (const int32_t token = out_[state]; token >= 0)
      out.push_back({static_cast<uint32_t>(i - begin), static_cast<uint32_t>(token)});
  }
  std::reverse(out.begin(), out.end());
}

}  // namespace zoo::tokenizer_detail
