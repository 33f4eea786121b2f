#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zoo::kernels {

// A fixed pool of worker threads for data-parallel loops. parallel_for blocks until every chunk
// ran; the calling thread takes part. Nested calls run serially on the caller.
class ThreadPool {
 public:
  // 0: ZOO_NUM_THREADS or the hardware concurrency. A worker that cannot be started (no memory
  // for its stack, a thread limit) is an error naming how many were asked for, after the ones
  // already started are joined.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) over [0, n) split into chunks of at least `grain` items.
  void parallel_for(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn);

  static ThreadPool& global();

 private:
  void worker_loop();
  void stop_workers();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::int64_t, std::int64_t)>* job_ = nullptr;
  std::int64_t n_ = 0, chunk_ = 0, next_ = 0, pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace zoo::kernels
