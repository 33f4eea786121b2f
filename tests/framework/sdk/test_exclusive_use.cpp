// ExclusiveUse: overlapping use from two threads throws; nesting and taking turns do not.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "zoo/exclusive_use.hpp"

using zoo::ConcurrentUseError;
using zoo::ExclusiveUse;

namespace {
// Spins (with a deadline, so a bug fails the test instead of hanging it) until `flag` is set.
bool wait_for(const std::atomic<bool>& flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}
}  // namespace

TEST_CASE("ExclusiveUse refuses a second thread while the first is inside", "[exclusive_use]") {
  ExclusiveUse use("the test resource");
  std::atomic<bool> inside{false}, tried{false};
  std::string error;
  std::atomic<bool> first_ok{false};  // Catch2 v2 assertions are not thread-safe: report after join
  std::thread first([&] {
    const ExclusiveUse::Scope scope(use);
    inside = true;
    first_ok = wait_for(tried);
  });
  REQUIRE(wait_for(inside));
  try {
    const ExclusiveUse::Scope scope(use);
  } catch (const ConcurrentUseError& e) {
    error = e.what();
  }
  tried = true;
  first.join();
  CHECK(first_ok);
  CHECK(error.find("concurrent use of the test resource from two threads") != std::string::npos);
  // Once the first thread has left, another may enter.
  std::atomic<bool> later_ok{false};
  std::thread later([&] {
    const ExclusiveUse::Scope scope(use);
    later_ok = true;
  });
  later.join();
  CHECK(later_ok);
}

TEST_CASE("ExclusiveUse allows nesting on one thread and turns across threads", "[exclusive_use]") {
  ExclusiveUse use("the test resource");
  {
    const ExclusiveUse::Scope outer(use);
    const ExclusiveUse::Scope inner(use);
  }
  std::atomic<int> turns{0};
  for (int i = 0; i < 4; ++i) {
    std::thread t([&] {
      const ExclusiveUse::Scope scope(use);
      const ExclusiveUse::Scope nested(use);
      ++turns;
    });
    t.join();
  }
  CHECK(turns == 4);
  CHECK_NOTHROW(ExclusiveUse::Scope(use));
}
