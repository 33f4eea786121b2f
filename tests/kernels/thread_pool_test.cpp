#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "zoo/kernels/thread_pool.hpp"

using zoo::kernels::ThreadPool;

namespace {
// Runs parallel_for and checks every index in [0, n) is visited exactly once, in chunks of at
// least `grain` items (except the last).
void check_cover(ThreadPool& pool, std::int64_t n, std::int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
  std::atomic<bool> empty_chunk{false};
  pool.parallel_for(n, grain, [&](std::int64_t begin, std::int64_t end) {
    if (begin >= end) empty_chunk = true;
    for (std::int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  INFO("threads=" << pool.size() << " n=" << n << " grain=" << grain);
  CHECK_FALSE(empty_chunk);
  std::int64_t wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  CHECK(wrong == 0);
}
}  // namespace

TEST_CASE("ThreadPool::parallel_for covers every index exactly once", "[kernels][thread_pool]") {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (std::int64_t n : {0, 1, 2, 7, 100, 1001, 100000}) {
      for (std::int64_t grain : {0, 1, 3, 64, 200000}) check_cover(pool, n, grain);
    }
  }
}

TEST_CASE("ThreadPool uses several threads and runs nested loops serially", "[kernels][thread_pool]") {
  ThreadPool pool(4);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  std::atomic<std::int64_t> inner_total{0};
  pool.parallel_for(64, 1, [&](std::int64_t begin, std::int64_t end) {
    {
      std::lock_guard lock(mutex);
      ids.insert(std::this_thread::get_id());
    }
    for (std::int64_t i = begin; i < end; ++i) {
      // Nested call: must not deadlock waiting for workers that are busy with the outer loop.
      pool.parallel_for(10, 1, [&](std::int64_t b, std::int64_t e) { inner_total += e - b; });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2) * (end - begin));
  });
  CHECK(inner_total == 64 * 10);
  CHECK(ids.size() > 1);
}

namespace {
// Distinct threads that ran chunks of a loop whose chunks take a while (so workers join in).
std::size_t threads_used(ThreadPool& pool) {
  std::mutex mutex;
  std::set<std::thread::id> ids;
  pool.parallel_for(32, 1, [&](std::int64_t, std::int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard lock(mutex);
    ids.insert(std::this_thread::get_id());
  });
  return ids.size();
}
}  // namespace

TEST_CASE("ThreadPool propagates exceptions and stays usable", "[kernels][thread_pool]") {
  ThreadPool pool(3);
  const auto caller = std::this_thread::get_id();
  SECTION("thrown on the calling thread") {
    for (int round = 0; round < 5; ++round) {
      CHECK_THROWS_AS(pool.parallel_for(32, 1,
                                        [&](std::int64_t, std::int64_t) {
                                          std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                          if (std::this_thread::get_id() == caller) throw std::runtime_error("boom");
                                        }),
                      std::runtime_error);
      // Still parallel afterwards: the caller is not left marked as "inside the pool".
      CHECK(threads_used(pool) > 1);
      check_cover(pool, 1000, 10);
    }
  }
  SECTION("thrown on a worker") {
    for (int round = 0; round < 5; ++round) {
      std::atomic<bool> thrown{false};
      CHECK_THROWS_AS(pool.parallel_for(32, 1,
                                        [&](std::int64_t, std::int64_t) {
                                          std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                          if (std::this_thread::get_id() != caller && !thrown.exchange(true)) {
                                            throw std::invalid_argument("boom");
                                          }
                                        }),
                      std::invalid_argument);
      CHECK(threads_used(pool) > 1);
      check_cover(pool, 1000, 10);
    }
  }
}

TEST_CASE("ThreadPool serves several outside threads at once", "[kernels][thread_pool]") {
  ThreadPool pool(2);
  std::atomic<std::int64_t> failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        std::vector<std::atomic<int>> hits(64);
        // Slow chunks make the four loops overlap for sure.
        pool.parallel_for(64, 1, [&](std::int64_t begin, std::int64_t end) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          for (std::int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        });
        for (auto& h : hits) failures += h.load() != 1;
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(failures == 0);
}

// Issue: a worker that could not be started (std::thread throwing) left the started ones joinable
// in a half-built pool, which ends the process (or hung it). The failure is made real in a child
// process: its address space is capped just above what it uses, so thread stacks cannot be mapped.
// RLIMIT_NPROC would not do: it does not bind root.
TEST_CASE("ThreadPool: a worker thread that cannot start is a clear error, and the others are joined",
          "[kernels][thread_pool]") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    ::alarm(30);  // a hang is a failure (SIGALRM), not a stuck test run
    long vm_kb = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stol(line.substr(7));
    const rlimit cap{static_cast<rlim_t>(vm_kb + 48 * 1024) * 1024, static_cast<rlim_t>(vm_kb + 48 * 1024) * 1024};
    if (vm_kb == 0 || ::setrlimit(RLIMIT_AS, &cap) != 0) ::_exit(3);
    std::string message = "no error";
    int code = 1;
    try {
      ThreadPool pool(256);  // 255 stacks of megabytes each: far past the cap
    } catch (const std::system_error& e) {
      message = e.what();
      code = 0;
    } catch (const std::exception& e) {
      message = std::string("not a system_error: ") + e.what();
    }
    if (::write(pipe_fds[1], message.data(), message.size()) < 0) code = 4;
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buffer[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) message.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("child message: " << message);
  REQUIRE(WIFEXITED(status));  // not killed: no std::terminate, no hang
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_THAT(message, Catch::Matchers::StartsWith("cannot start CPU worker thread ") &&
                          Catch::Matchers::Contains(" of 256 (ask for fewer: -t N or ZOO_NUM_THREADS=N): "));
}
