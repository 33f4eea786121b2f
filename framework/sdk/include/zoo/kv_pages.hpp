#pragma once
// Paged KV-cache bookkeeping, the first piece of the batch-first runtime (issue 24): which pages a
// sequence's cached tokens live in. Model- and device-neutral: a backend owns the storage (per
// layer, [pages][kKvPageTokens][kv_heads][head_dim]) and reads page tables and slots from here, the
// way vLLM's block tables and slot mappings work.
//
// Pages are taken as tokens arrive (no reservation of a maximum context), shared by reference count
// when a sequence is forked (a common prefix), and, in a group of sliding-window layers, given back
// once every position they hold is behind the window of every later token.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace zoo {

inline constexpr std::int64_t kKvPageTokens = 16;
using PageId = std::int32_t;
inline constexpr PageId kNoPage = -1;

// A fixed set of pages, each free or held by one or more page tables. Not thread-safe: one
// scheduler owns it.
class KvPagePool {
 public:
  explicit KvPagePool(std::int64_t pages);
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  std::int64_t capacity() const { return static_cast<std::int64_t>(refs_.size()); }
  std::int64_t free_pages() const { return static_cast<std::int64_t>(free_.size()); }
  std::int64_t used_pages() const { return capacity() - free_pages(); }
  // `count` pages with one reference each, or nothing at all (nullopt) when fewer are free.
  std::optional<std::vector<PageId>> allocate(std::int64_t count);
  void retain(PageId page);   // one more holder; the page must be held
  void release(PageId page);  // one holder fewer; the last one frees it
  std::int32_t references(PageId page) const;

 private:
  void check(PageId page, const char* what) const;
  std::vector<std::int32_t> refs_;
  std::vector<PageId> free_;  // a stack: the page freed last is reused first (warm in cache)
};

// A page a writer must copy before it writes into it: the page it shared (`from`) and its own
// fresh one (`to`), which now stands in the table instead.
struct PageCopy {
  PageId from = kNoPage, to = kNoPage;
};

// One sequence's pages for one group of layers: page i holds positions [16 i, 16 i + 16). With a
// window (sliding-window layers: a query at q sees q - window + 1 .. q), pages all of whose
// positions are at or before tokens() - window are given back as tokens are appended; kNoPage
// keeps their place, so page i still means the same positions. Releases its pages when destroyed.
class KvPageTable {
 public:
  explicit KvPageTable(KvPagePool& pool, std::int64_t window = 0);  // window 0: full attention
  ~KvPageTable();
  KvPageTable(KvPageTable&& other) noexcept;
  KvPageTable& operator=(KvPageTable&& other) noexcept;  // gives back this table's pages first
  KvPageTable(const KvPageTable&) = delete;
  KvPageTable& operator=(const KvPageTable&) = delete;

  struct Append {
    bool ok = false;  // false: too few free pages; no token appended (pages behind a window may have been given back)
    std::optional<PageCopy> copy;  // the shared last page replaced by a private one (copy its rows)
  };
  // Room for `count` more tokens at positions tokens() .. tokens() + count - 1.
  Append append(std::int64_t count);
  // Pages append(count) takes from the pool: new pages plus the private copy of a shared, partly
  // filled last page (pages given back behind a window are not subtracted: an upper bound).
  std::int64_t pages_for(std::int64_t count) const;
  // A table holding the same tokens in the same pages (each page one more reference). Writes go
  // through append(), which gives either table a private copy of a shared, partly filled last page.
  KvPageTable fork() const;
  // The same for the first `tokens` only (<= tokens()); std::out_of_range when one of their pages
  // was given back behind the window.
  KvPageTable fork(std::int64_t tokens) const;

  std::int64_t tokens() const { return tokens_; }
  std::int64_t window() const { return window_; }
  std::span<const PageId> pages() const { return pages_; }
  std::int64_t live_pages() const;  // pages held (not given back behind the window)
  // Where position p's row lives: page * kKvPageTokens + p % kKvPageTokens. std::out_of_range for
  // a position not yet appended or already given back.
  std::int64_t slot(std::int64_t position) const;

 private:
  void release_behind_window();
  void release_all() noexcept;
  KvPagePool* pool_;
  std::int64_t window_ = 0, tokens_ = 0;
  std::vector<PageId> pages_;
};

}  // namespace zoo
