// The server's own threads (audio_workers.hpp).
#include "audio_workers.hpp"

#include <algorithm>

namespace zoo::server {

AudioWorker::AudioWorker() {
  thread_ = std::thread([this] {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();  // posted work catches its own errors
    }
  });
}

AudioWorker::~AudioWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void AudioWorker::post(std::function<void()> work) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(work));
  }
  wake_.notify_one();
}

AudioWorkers::AudioWorkers(int threads) {
  for (int i = 0; i < std::max(threads, 1); ++i) workers_.push_back(std::make_unique<AudioWorker>());
}

AudioWorker& AudioWorkers::next() {
  return *workers_[next_++ % workers_.size()];
}

}  // namespace zoo::server
