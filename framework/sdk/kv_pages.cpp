// Paged KV-cache bookkeeping (zoo/kv_pages.hpp).
#include "zoo/kv_pages.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace zoo {

KvPagePool::KvPagePool(std::int64_t pages) {
  if (pages < 0 || pages > (std::int64_t{1} << 30))
    throw std::invalid_argument("KvPagePool: " + std::to_string(pages) + " pages (0 .. 2^30)");
  refs_.assign(static_cast<std::size_t>(pages), 0);
  free_.reserve(static_cast<std::size_t>(pages));
  for (std::int64_t p = pages - 1; p >= 0; --p) free_.push_back(static_cast<PageId>(p));  // page 0 first
}

void KvPagePool::check(PageId page, const char* what) const {
  if (page < 0 || page >= capacity())
    throw std::logic_error(std::string("KvPagePool::") + what + ": page " + std::to_string(page) + " of " +
                           std::to_string(capacity()));
  if (refs_[static_cast<std::size_t>(page)] == 0)
    throw std::logic_error(std::string("KvPagePool::") + what + ": page " + std::to_string(page) + " is free");
}

std::optional<std::vector<PageId>> KvPagePool::allocate(std::int64_t count) {
  if (count < 0) throw std::invalid_argument("KvPagePool::allocate: negative count");
  if (count > free_pages()) return std::nullopt;
  std::vector<PageId> pages(static_cast<std::size_t>(count));
  for (auto& page : pages) {
    page = free_.back();
    free_.pop_back();
    refs_[static_cast<std::size_t>(page)] = 1;
  }
  return pages;
}

void KvPagePool::retain(PageId page) {
  check(page, "retain");
  ++refs_[static_cast<std::size_t>(page)];
}

void KvPagePool::release(PageId page) {
  check(page, "release");
  if (--refs_[static_cast<std::size_t>(page)] == 0) free_.push_back(page);
}

std::int32_t KvPagePool::references(PageId page) const {
  if (page < 0 || page >= capacity()) throw std::logic_error("KvPagePool::references: page out of range");
  return refs_[static_cast<std::size_t>(page)];
}

KvPageTable::KvPageTable(KvPagePool& pool, std::int64_t window) : pool_(&pool), window_(window) {
  if (window < 0) throw std::invalid_argument("KvPageTable: negative window");
}

KvPageTable::~KvPageTable() { release_all(); }

void KvPageTable::release_all() noexcept {
  if (!pool_) return;  // moved from
  // Last page first: the pool hands out the most recently freed page first, so the next table
  // takes these pages in ascending order again (a run of consecutive pages, which a lone
  // sequence's long prefill reads as one contiguous cache).
  for (auto page = pages_.rbegin(); page != pages_.rend(); ++page)
    if (*page != kNoPage) pool_->release(*page);  // held pages: cannot throw
  pages_.clear();
  tokens_ = 0;
}

KvPageTable::KvPageTable(KvPageTable&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      window_(other.window_),
      tokens_(std::exchange(other.tokens_, 0)),
      pages_(std::move(other.pages_)) {}

KvPageTable& KvPageTable::operator=(KvPageTable&& other) noexcept {
  if (this != &other) {
    release_all();
    pool_ = std::exchange(other.pool_, nullptr);
    window_ = other.window_;
    tokens_ = std::exchange(other.tokens_, 0);
    pages_ = std::move(other.pages_);
  }
  return *this;
}

KvPageTable::Append KvPageTable::append(std::int64_t count) {
  if (count < 0) throw std::invalid_argument("KvPageTable::append: negative count");
  if (!pool_) throw std::logic_error("KvPageTable::append on a moved-from table");
  release_behind_window();
  const std::int64_t have = static_cast<std::int64_t>(pages_.size());
  const std::int64_t need = (tokens_ + count + kKvPageTokens - 1) / kKvPageTokens;
  // The page position tokens() falls in is written next: a private copy first if it is shared.
  const bool partial = count > 0 && tokens_ % kKvPageTokens != 0;
  const PageId last = partial ? pages_.back() : kNoPage;
  const bool copy = partial && last != kNoPage && pool_->references(last) > 1;
  auto fresh = pool_->allocate(std::max<std::int64_t>(0, need - have) + (copy ? 1 : 0));
  if (!fresh) return {};
  Append result{true, std::nullopt};
  std::size_t next = 0;
  if (copy) {
    const PageId own = (*fresh)[next++];
    result.copy = PageCopy{last, own};
    pool_->release(last);
    pages_.back() = own;
  }
  while (next < fresh->size()) pages_.push_back((*fresh)[next++]);
  tokens_ += count;
  return result;
}

std::int64_t KvPageTable::pages_for(std::int64_t count) const {
  if (count < 0) throw std::invalid_argument("KvPageTable::pages_for: negative count");
  const std::int64_t need = (tokens_ + count + kKvPageTokens - 1) / kKvPageTokens;
  const bool partial = count > 0 && tokens_ % kKvPageTokens != 0;
  const bool copy = partial && pages_.back() != kNoPage && pool_->references(pages_.back()) > 1;
  return std::max<std::int64_t>(0, need - static_cast<std::int64_t>(pages_.size())) + (copy ? 1 : 0);
}

KvPageTable KvPageTable::fork() const {
  if (!pool_) throw std::logic_error("KvPageTable::fork of a moved-from table");
  KvPageTable child(*pool_, window_);
  for (const PageId page : pages_)
    if (page != kNoPage) pool_->retain(page);
  child.pages_ = pages_;
  child.tokens_ = tokens_;
  return child;
}

KvPageTable KvPageTable::fork(std::int64_t tokens) const {
  if (!pool_) throw std::logic_error("KvPageTable::fork of a moved-from table");
  if (tokens < 0 || tokens > tokens_) throw std::out_of_range("KvPageTable::fork: a prefix longer than the table");
  const auto pages = static_cast<std::size_t>((tokens + kKvPageTokens - 1) / kKvPageTokens);
  for (std::size_t i = 0; i < pages; ++i)
    if (pages_[i] == kNoPage) throw std::out_of_range("KvPageTable::fork: the prefix reaches pages given back");
  KvPageTable child(*pool_, window_);
  child.pages_.assign(pages_.begin(), pages_.begin() + static_cast<std::ptrdiff_t>(pages));
  for (const PageId page : child.pages_) pool_->retain(page);
  child.tokens_ = tokens;
  return child;
}

std::int64_t KvPageTable::live_pages() const {
  std::int64_t n = 0;
  for (const PageId page : pages_) n += page != kNoPage ? 1 : 0;
  return n;
}

std::int64_t KvPageTable::slot(std::int64_t position) const {
  if (position < 0 || position >= tokens_)
    throw std::out_of_range("KvPageTable::slot: position " + std::to_string(position) + " of " +
                            std::to_string(tokens_) + " tokens");
  const PageId page = pages_[static_cast<std::size_t>(position / kKvPageTokens)];
  if (page == kNoPage)
    throw std::out_of_range("KvPageTable::slot: position " + std::to_string(position) + " is behind the window of " +
                            std::to_string(window_));
  return static_cast<std::int64_t>(page) * kKvPageTokens + position % kKvPageTokens;
}

void KvPageTable::release_behind_window() {
  if (window_ == 0) return;
  // Every later query q >= tokens() sees positions > q - window >= tokens() - window: a page whose
  // last position 16 i + 15 is <= tokens() - window is read by no one again.
  const std::int64_t dead_through = tokens_ - window_;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(pages_.size()); ++i) {
    if (i * kKvPageTokens + kKvPageTokens - 1 > dead_through) break;
    PageId& page = pages_[static_cast<std::size_t>(i)];
    if (page != kNoPage) {
      pool_->release(page);
      page = kNoPage;
    }
  }
}

}  // namespace zoo
