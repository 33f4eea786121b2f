#pragma once
// The server's own threads for work off the connections' and the engine's: a speech request's codec
// work (speech_endpoint.hpp) and the warm-up's answers (warm_up.cpp).
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace zoo::server {

// One thread running posted work in order (a speech request's work all goes to one, so it runs in
// order without locks).
class AudioWorker {
 public:
  AudioWorker();
  ~AudioWorker();  // runs what is queued, then ends
  AudioWorker(const AudioWorker&) = delete;
  AudioWorker& operator=(const AudioWorker&) = delete;
  void post(std::function<void()> work);

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// The audio threads: a request is given one (round robin) for its whole life. Several, so that one
// stream's codec decode does not hold up another's first chunk (the CUDA codec decodes concurrent
// calls side by side) and neither does a reference being encoded.
class AudioWorkers {
 public:
  explicit AudioWorkers(int threads);
  AudioWorker& next();

 private:
  std::vector<std::unique_ptr<AudioWorker>> workers_;
  std::atomic<std::size_t> next_{0};
};

}  // namespace zoo::server
