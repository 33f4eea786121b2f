#pragma once
// The engine's own thread (openai_server.cpp): between steps it takes new requests and
// cancellations from any thread; after each step it hands every request its new token and, when
// it finished, its completion. Requests a step finishes leave at once, and so do cancelled ones,
// pages and all.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "zoo/engine/engine.hpp"

namespace zoo::server {

// What a request's owner hears, on the engine thread (keep it short: the next step waits).
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // A new token. An owner that wants no more (a stop string matched) calls EngineWorker::cancel.
  virtual void token(const SampledToken& token) = 0;
  // Before the first token of a request that scores its prompt (prompt_logprobs): the scores.
  virtual void prompt_scores(const std::vector<SampledToken>&) {}
  // A driven request's driver took a pick in the last step (read its progress here, on the engine
  // thread, between steps).
  virtual void picked() {}
  virtual void done(const engine::Completion& completion) = 0;
  // The request could not run (status: HTTP); nothing else follows.
  virtual void failed(int status, const std::string& message) = 0;
};

class EngineWorker {
 public:
  // A request still in flight `timeout` after submit() is cancelled and fails with 504 (0: never).
  EngineWorker(Runner& runner, engine::EngineOptions options, std::int64_t max_waiting,
               std::chrono::milliseconds timeout = {});
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // A ticket names a request for cancel(); take one before submit().
  std::int64_t ticket() { return next_ticket_++; }
  // Queues a request; false when the queue is full (running plus max_waiting requests).
  bool submit(std::int64_t ticket, engine::GenerationRequest request, std::shared_ptr<RequestSink> sink);
  // The same for a driven request (speech): its sink hears picked() after each step that picked for it.
  bool submit(std::int64_t ticket, engine::DrivenRequest request, std::shared_ptr<RequestSink> sink);
  // Why submit() refused: 503 while stopping (a drain), else 429 (the queue is full).
  std::pair<int, std::string> refusal() const;
  // Drops a request wherever it is; nothing more reaches its sink. From any thread.
  void cancel(std::int64_t ticket);
  // Requests queued or running.
  std::int64_t in_flight() const { return in_flight_.load(); }
  // Ends the thread; every request still in flight hears failed(503).
  void stop();

  struct Counters {
    std::int64_t steps = 0, prompt_tokens = 0, generated_tokens = 0, preemptions = 0, running = 0, waiting = 0;
    std::int64_t pages_used = 0, pages_capacity = 0;
    std::int64_t prefix_queries = 0, prefix_hits = 0, prefix_hit_tokens = 0;
    double step_seconds = 0, host_seconds = 0, submit_seconds = 0, device_seconds = 0;
  };
  Counters counters() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Submission {
    std::int64_t ticket;
    engine::GenerationRequest request;
    engine::DrivenRequest driven;  // set: a driven request (and `request` is unused)
    std::shared_ptr<RequestSink> sink;
    Clock::time_point deadline;
  };
  bool enqueue(Submission submission);
  struct Live {
    std::int64_t ticket;
    std::shared_ptr<RequestSink> sink;
    Clock::time_point deadline;
  };
  void loop();
  void drop(std::int64_t request);
  void expire();
  void fail_all(int status, const std::string& message);
  void publish();

  Runner& runner_;
  engine::Engine engine_;
  const std::int64_t max_in_flight_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Submission> inbox_;
  std::vector<std::int64_t> cancels_;
  bool stopping_ = false;
  std::atomic<std::int64_t> next_ticket_{0}, in_flight_{0};
  Counters counters_;  // under mutex_
  // Engine thread only.
  std::map<std::int64_t, Live> live_;               // by engine request id
  std::map<std::int64_t, std::int64_t> by_ticket_;  // ticket -> engine request id
  std::thread thread_;
};

}  // namespace zoo::server
