#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zoo::tokenizer_detail {

// Leftmost-longest matching of a set of strings (what HF does with a LeftmostLongest
// Aho-Corasick), linear in the text whatever the strings: an Aho-Corasick automaton over the
// reversed strings, run right to left, gives at every position the longest string starting there
// (its state is the longest suffix of the text read so far, i.e. the longest string prefix at that
// position, and the deepest terminal on its failure chain the longest match). Walking a forward
// trie from every position costs the length of the longest partial match, per position.
//
// The strings come from tokenizer.json (10,000 added tokens of 5,000 bytes are 50 MB), so the
// automaton is flat arrays numbered breadth first, 13 bytes a node and at most a node a byte of
// the strings: a node's children are the consecutive nodes from first_child_[node] to
// first_child_[node + 1], their bytes ascending in label_. No per-node allocation.
class TokenTrie {
 public:
  // A string starting at `offset` from where the search began (8 bytes: a text may hold one a byte).
  struct Match {
    uint32_t offset, token;
  };

  // Strings are collected, then build() makes the automaton; a string given twice keeps the last
  // token. add after build is a logic error.
  void add(std::string_view key, size_t token);
  void build();
  bool empty() const { return label_.size() <= 1; }
  size_t nodes() const { return label_.size(); }

  // Into out: every position of s in [begin, end) where some string starts, ascending, with the
  // longest one there. Reads s up to end + max_length() (no further: the automaton's state at a
  // position depends on the next max_length() bytes only), so a text is searched in chunks of at
  // least max_length() at about twice the cost of one pass, with one chunk's matches held.
  // end - begin must be below 2^32.
  void starts(std::string_view s, size_t begin, size_t end, std::vector<Match>& out) const;
  size_t max_length() const { return max_length_; }
  size_t length(uint32_t token) const { return token_length_[token]; }

 private:
  struct Key {
    size_t offset;  // into keys_, reversed
    uint32_t length, token;
  };
  int64_t child(uint32_t node, unsigned char c) const;

  std::string keys_;          // the reversed strings, back to back (until build)
  std::vector<Key> pending_;  // (until build)
  bool built_ = false;
  std::vector<unsigned char> label_;   // the byte on the edge into each node
  std::vector<uint32_t> first_child_;  // nodes() + 1 entries
  std::vector<uint32_t> fail_;
  std::vector<int32_t> out_;            // the token of the deepest terminal on the failure chain, -1 if none
  std::vector<uint32_t> token_length_;  // per token
  size_t max_length_ = 0;
};

}  // namespace zoo::tokenizer_detail
