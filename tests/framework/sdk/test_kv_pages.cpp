// Paged KV-cache bookkeeping (zoo/kv_pages.hpp): pages taken as tokens arrive, all-or-nothing
// allocation, shared prefixes with a private copy before a write, sliding windows giving pages back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "zoo/kv_pages.hpp"

namespace zoo {
namespace {

std::int64_t pages_for(std::int64_t tokens) { return (tokens + kKvPageTokens - 1) / kKvPageTokens; }

TEST_CASE("kv pages: a table takes a page per 16 tokens as they come, across page boundaries", "[kv_pages]") {
  for (const std::int64_t n : {1, 15, 16, 17, 31, 32, 33, 100}) {
    INFO(n << " tokens");
    KvPagePool pool(64);
    KvPageTable table(pool);
    std::int64_t appended = 0;
    for (const std::int64_t chunk : {n / 2, n - n / 2}) {  // a prefill in two chunks
      const auto r = table.append(chunk);
      REQUIRE(r.ok);
      CHECK_FALSE(r.copy);
      appended += chunk;
      CHECK(table.tokens() == appended);
      CHECK(static_cast<std::int64_t>(table.pages().size()) == pages_for(appended));
    }
    CHECK(pool.used_pages() == pages_for(n));
    // Every position has its own slot, in its page at its offset.
    std::set<std::int64_t> slots;
    for (std::int64_t p = 0; p < n; ++p) {
      const std::int64_t s = table.slot(p);
      CHECK(s / kKvPageTokens == table.pages()[static_cast<std::size_t>(p / kKvPageTokens)]);
      CHECK(s % kKvPageTokens == p % kKvPageTokens);
      slots.insert(s);
    }
    CHECK(static_cast<std::int64_t>(slots.size()) == n);
    CHECK_THROWS_AS(table.slot(n), std::out_of_range);
    CHECK_THROWS_AS(table.slot(-1), std::out_of_range);
  }
}

TEST_CASE("kv pages: an append the pool cannot serve changes nothing, and a finished table gives its pages back",
          "[kv_pages]") {
  KvPagePool pool(4);
  {
    KvPageTable a(pool), b(pool);
    REQUIRE(a.append(40).ok);  // 3 pages
    const auto before = std::vector<PageId>(a.pages().begin(), a.pages().end());
    CHECK_FALSE(b.append(17).ok);  // needs 2, 1 free
    CHECK(b.tokens() == 0);
    CHECK(b.pages().empty());
    CHECK(pool.free_pages() == 1);
    CHECK_FALSE(a.append(25).ok);  // 65 tokens: two more pages, one free
    CHECK(a.tokens() == 40);
    CHECK(std::vector<PageId>(a.pages().begin(), a.pages().end()) == before);
  }
  CHECK(pool.free_pages() == 4);
}

TEST_CASE(
    "kv pages: a lone table takes ascending pages, and after it is gone the next one takes them again in "
    "order",
    "[kv_pages]") {
  // What lets a lone sequence's prefill read its pages as one contiguous cache (the CUDA runner's
  // Session path): the pool hands out its lowest free pages first and a table gives its pages back
  // last first.
  const auto consecutive = [](std::span<const PageId> pages) {
    for (std::size_t i = 1; i < pages.size(); ++i)
      if (pages[i] != pages[0] + static_cast<PageId>(i)) return false;
    return true;
  };
  KvPagePool pool(32);
  std::vector<PageId> first;
  {
    KvPageTable a(pool);
    REQUIRE(a.append(100).ok);  // 7 pages
    first.assign(a.pages().begin(), a.pages().end());
    CHECK(consecutive(a.pages()));
    CHECK(first.front() == 0);
    KvPageTable b(pool);
    REQUIRE(b.append(40).ok);  // 3 pages after a's
    CHECK(consecutive(b.pages()));
    CHECK(b.pages().front() == 7);
  }  // b, then a, give their pages back
  KvPageTable c(pool);
  REQUIRE(c.append(100).ok);
  CHECK(std::vector<PageId>(c.pages().begin(), c.pages().end()) == first);
  KvPageTable d(pool);
  REQUIRE(d.append(50).ok);  // 4 pages: b's 3, then a fresh one
  CHECK(consecutive(d.pages()));
}

TEST_CASE("kv pages: a forked table shares its pages, and a write into a shared last page copies it first",
          "[kv_pages]") {
  KvPagePool pool(16);
  KvPageTable parent(pool);
  REQUIRE(parent.append(20).ok);  // pages 0..15 full, 16..19 in a second, partly filled page
  KvPageTable child = parent.fork();
  CHECK(pool.used_pages() == 2);
  for (const PageId page : parent.pages()) CHECK(pool.references(page) == 2);
  CHECK(child.slot(19) == parent.slot(19));

  // The parent writes position 20 into the shared second page: it gets its own copy.
  const PageId shared = parent.pages()[1];
  const auto r = parent.append(1);
  REQUIRE(r.ok);
  REQUIRE(r.copy);
  CHECK(r.copy->from == shared);
  CHECK(r.copy->to == parent.pages()[1]);
  CHECK(parent.pages()[1] != shared);
  CHECK(parent.pages()[0] == child.pages()[0]);  // the full page stays shared
  CHECK(pool.references(shared) == 1);
  CHECK(pool.references(parent.pages()[0]) == 2);
  // The child is now the shared page's only holder: it writes in place.
  const auto rc = child.append(1);
  REQUIRE(rc.ok);
  CHECK_FALSE(rc.copy);
  CHECK(child.pages()[1] == shared);

  // A fork at a page boundary needs no copy: the next token opens a fresh page.
  KvPageTable whole(pool);
  REQUIRE(whole.append(32).ok);
  KvPageTable twin = whole.fork();
  const auto rw = whole.append(1);
  REQUIRE(rw.ok);
  CHECK_FALSE(rw.copy);
  CHECK(whole.pages()[2] != kNoPage);
  CHECK(twin.pages().size() == 2);
}

TEST_CASE("kv pages: a sliding-window table gives back pages behind the window and keeps positions in place",
          "[kv_pages]") {
  const std::int64_t window = 7;
  KvPagePool pool(8);
  KvPageTable table(pool, window);
  // One token at a time (decode) far past the window: never more than the window's pages are held.
  std::int64_t most = 0;
  for (int t = 0; t < 200; ++t) {
    REQUIRE(table.append(1).ok);
    most = std::max(most, table.live_pages());
    // Every position the next query (at tokens()) still sees must have its slot.
    for (std::int64_t p = std::max<std::int64_t>(0, table.tokens() - window); p < table.tokens(); ++p)
      CHECK_NOTHROW(table.slot(p));
  }
  CHECK(most <= 2);  // 7 positions span at most two pages
  CHECK(static_cast<std::int64_t>(table.pages().size()) == pages_for(200));  // page i still means positions 16 i..
  CHECK(table.pages()[0] == kNoPage);
  CHECK_THROWS_AS(table.slot(0), std::out_of_range);
  CHECK(pool.used_pages() == table.live_pages());

  // A chunk longer than the window: the chunk's own first queries still see its start.
  KvPagePool pool2(32);
  KvPageTable chunked(pool2, window);
  REQUIRE(chunked.append(100).ok);
  CHECK(chunked.live_pages() == pages_for(100));  // nothing is freed before the chunk is computed
  REQUIRE(chunked.append(1).ok);
  CHECK(chunked.live_pages() == 2);  // positions 94.. are alive: pages 5 and 6
  CHECK_NOTHROW(chunked.slot(94));
  CHECK_THROWS_AS(chunked.slot(79), std::out_of_range);
}

TEST_CASE("kv pages: random appends, forks and drops keep the pool's counts exact", "[kv_pages]") {
  std::mt19937 rng(24);
  KvPagePool pool(64);
  std::vector<KvPageTable> tables;
  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 6 && !tables.empty()) {
      auto& t = tables[rng() % tables.size()];
      const std::int64_t before_tokens = t.tokens(), before_free = pool.free_pages();
      const auto r = t.append(static_cast<std::int64_t>(rng() % 40));
      if (!r.ok) {
        CHECK(t.tokens() == before_tokens);
        CHECK(pool.free_pages() >= before_free);  // only pages behind a window may have come back
      }
    } else if (op < 8 && tables.size() < 12) {
      if (!tables.empty() && rng() % 2) {
        tables.push_back(tables[rng() % tables.size()].fork());
      } else {
        tables.emplace_back(pool, rng() % 3 == 0 ? 1 + static_cast<std::int64_t>(rng() % 40) : 0);
      }
    } else if (!tables.empty()) {
      tables.erase(tables.begin() + static_cast<std::ptrdiff_t>(rng() % tables.size()));
    }
    // Each page's count is the number of tables holding it; free pages are held by none.
    std::vector<std::int32_t> held(static_cast<std::size_t>(pool.capacity()), 0);
    for (const auto& t : tables)
      for (const PageId page : t.pages())
        if (page != kNoPage) ++held[static_cast<std::size_t>(page)];
    std::int64_t used = 0;
    for (PageId p = 0; p < pool.capacity(); ++p) {
      REQUIRE(pool.references(p) == held[static_cast<std::size_t>(p)]);
      used += held[static_cast<std::size_t>(p)] > 0 ? 1 : 0;
    }
    REQUIRE(pool.used_pages() == used);
  }
  tables.clear();
  CHECK(pool.free_pages() == pool.capacity());
}

TEST_CASE("kv pages: misuse is refused", "[kv_pages]") {
  CHECK_THROWS_AS(KvPagePool(-1), std::invalid_argument);
  KvPagePool pool(2);
  CHECK_THROWS_AS(pool.release(0), std::logic_error);  // free
  CHECK_THROWS_AS(pool.retain(5), std::logic_error);   // out of range
  CHECK_THROWS_AS(pool.allocate(-1), std::invalid_argument);
  CHECK_THROWS_AS(KvPageTable(pool, -3), std::invalid_argument);
  KvPageTable t(pool);
  CHECK_THROWS_AS(t.append(-1), std::invalid_argument);
}

}  // namespace
}  // namespace zoo
