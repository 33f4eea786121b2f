#include "zoo/kernels/thread_pool.hpp"

#include "zoo/kernels/env.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>

namespace zoo::kernels {
namespace {
thread_local bool t_inside_pool = false;

int default_thread_count() {
  if (const auto n = env_int("ZOO_NUM_THREADS", 1, 4096)) return static_cast<int>(*n);
  return std::max(1u, std::thread::hardware_concurrency());
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int n = threads > 0 ? threads : default_thread_count();
  try {
    workers_.reserve(static_cast<std::size_t>(n - 1));
    for (int i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::exception& e) {
    // No destructor runs for a constructor that throws: the workers already started must be
    // stopped and joined here, or destroying them while joinable ends the process.
    const std::size_t started = workers_.size();
    stop_workers();
    const std::string what = "cannot start CPU worker thread " + std::to_string(started + 2) + " of " +
                             std::to_string(n) + " (ask for fewer: -t N or ZOO_NUM_THREADS=N)";
    // system_error appends the reason ("Resource temporarily unavailable").
    if (const auto* system = dynamic_cast<const std::system_error*>(&e)) throw std::system_error(system->code(), what);
    throw std::runtime_error(what + ": " + e.what());
  }
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

ThreadPool::~ThreadPool() { stop_workers(); }

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

void ThreadPool::parallel_for(std::int64_t n, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(1, grain);
  if (workers_.empty() || t_inside_pool || n <= grain) {
    fn(0, n);
    return;
  }
  // An exception must not escape on a worker (std::terminate) nor leave this call with chunks
  // still pending: every chunk runs through this wrapper, the first exception is kept and
  // rethrown here once all chunks have finished.
  std::exception_ptr error;
  const std::function<void(std::int64_t, std::int64_t)> guarded = [&](std::int64_t begin, std::int64_t end) {
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard error_lock(mutex_);
      if (!error) error = std::current_exception();
    }
  };
  // A few chunks per thread balance uneven work without much scheduling overhead.
  const std::int64_t chunks = std::min<std::int64_t>((n + grain - 1) / grain, 4 * size());
  const std::int64_t chunk = (n + chunks - 1) / chunks;
  std::unique_lock lock(mutex_);
  if (job_ != nullptr) {
    // Another thread outside the pool is running a loop on it: there is a single job slot, so
    // this caller does its loop alone rather than clobbering that one.
    lock.unlock();
    fn(0, n);
    return;
  }
  job_ = &guarded;
  n_ = n;
  chunk_ = chunk;
  next_ = 0;
  pending_ = (n + chunk - 1) / chunk;
  ++generation_;
  lock.unlock();
  wake_.notify_all();

  t_inside_pool = true;
  for (;;) {
    lock.lock();
    if (next_ >= n_) break;
    const std::int64_t begin = next_;
    next_ = std::min(n_, next_ + chunk_);
    const std::int64_t end = next_;
    lock.unlock();
    guarded(begin, end);
    lock.lock();
    --pending_;
    lock.unlock();
  }
  t_inside_pool = false;
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  lock.unlock();
  if (error) std::rethrow_exception(error);
}

void ThreadPool::worker_loop() {
  t_inside_pool = true;
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr && next_ < n_); });
    if (stop_) return;
    while (job_ != nullptr && next_ < n_) {
      const std::int64_t begin = next_;
      next_ = std::min(n_, next_ + chunk_);
      const std::int64_t end = next_;
      const auto* job = job_;
      lock.unlock();
      (*job)(begin, end);
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
    seen = generation_;
  }
}

}  // namespace zoo::kernels
