#include "engine_worker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "zoo/error.hpp"

namespace zoo::server {

EngineWorker::EngineWorker(Runner& runner, engine::EngineOptions options, std::int64_t max_waiting,
                           std::chrono::milliseconds timeout)
    : runner_(runner), engine_(runner, options), max_in_flight_(options.max_running + max_waiting), timeout_(timeout) {
  thread_ = std::thread([this] { loop(); });
}

EngineWorker::~EngineWorker() { stop(); }

bool EngineWorker::submit(std::int64_t ticket, engine::GenerationRequest request, std::shared_ptr<RequestSink> sink) {
  return enqueue({ticket, std::move(request), {}, std::move(sink), {}});
}

bool EngineWorker::submit(std::int64_t ticket, engine::DrivenRequest request, std::shared_ptr<RequestSink> sink) {
  return enqueue({ticket, {}, std::move(request), std::move(sink), {}});
}

bool EngineWorker::enqueue(Submission submission) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    if (in_flight_.load() >= max_in_flight_) return false;
    ++in_flight_;
    submission.deadline = timeout_.count() > 0 ? Clock::now() + timeout_ : Clock::time_point::max();
    inbox_.push_back(std::move(submission));
  }
  wake_.notify_one();
  return true;
}

std::pair<int, std::string> EngineWorker::refusal() const {
  std::lock_guard lock(mutex_);
  if (stopping_) return {503, "the server is shutting down"};
  return {429, "the server's queue is full; retry later"};
}

void EngineWorker::cancel(std::int64_t ticket) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(ticket);
  }
  wake_.notify_one();
}

void EngineWorker::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

EngineWorker::Counters EngineWorker::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

// Forgets a request (the engine has finished or dropped it).
void EngineWorker::drop(std::int64_t request) {
  const auto it = live_.find(request);
  if (it == live_.end()) return;
  by_ticket_.erase(it->second.ticket);
  live_.erase(it);
  --in_flight_;
}

// Requests past their deadline leave, waiting or running, and hear 504.
void EngineWorker::expire() {
  if (timeout_.count() <= 0) return;
  const auto now = Clock::now();
  std::vector<std::int64_t> late;
  for (const auto& [request, live] : live_)
    if (live.deadline <= now) late.push_back(request);
  for (const auto request : late) {
    const auto sink = live_.at(request).sink;
    engine_.cancel(request);
    drop(request);
    sink->failed(504, fmt::format("the request timed out after {:.3g} s (the server's --request-timeout)",
                                  std::chrono::duration<double>(timeout_).count()));
  }
}

void EngineWorker::fail_all(int status, const std::string& message) {
  std::vector<std::int64_t> requests;
  for (const auto& [request, live] : live_) requests.push_back(request);
  for (const auto request : requests) {
    const auto sink = live_.at(request).sink;
    engine_.cancel(request);
    drop(request);
    sink->failed(status, message);
  }
}

// The counters /metrics reads: after each step, and after cancellations and timeouts too (with
// nothing left to step, a cancelled request would otherwise show as running, its pages used).
void EngineWorker::publish() {
  std::lock_guard lock(mutex_);
  const auto& st = engine_.stats();
  counters_.steps = st.steps;
  counters_.prompt_tokens = st.prompt_tokens;
  counters_.generated_tokens = st.generated_tokens;
  counters_.preemptions = st.preemptions;
  counters_.prefix_queries = st.prefix_queries;
  counters_.prefix_hits = st.prefix_hits;
  counters_.prefix_hit_tokens = st.prefix_hit_tokens;
  counters_.step_seconds = st.seconds;
  counters_.host_seconds = st.host_seconds;
  counters_.submit_seconds = st.submit_seconds;
  counters_.device_seconds = st.device_seconds;
  counters_.running = engine_.running();
  counters_.waiting = engine_.waiting();
  const auto pool = runner_.pool();
  counters_.pages_used = counters_.pages_capacity = 0;
  for (const auto& group : pool.groups) {
    counters_.pages_used = std::max(counters_.pages_used, group.used);
    counters_.pages_capacity = std::max(counters_.pages_capacity, group.capacity);
  }
}

void EngineWorker::loop() {
  for (;;) {
    std::vector<Submission> inbox;
    std::vector<std::int64_t> cancels;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || !engine_.idle(); });
      if (stopping_) {
        inbox.swap(inbox_);
        lock.unlock();
        for (auto& s : inbox) {
          --in_flight_;
          s.sink->failed(503, "the server is shutting down");
        }
        fail_all(503, "the server is shutting down");
        return;
      }
      inbox.swap(inbox_);
      cancels.swap(cancels_);
    }
    for (auto& s : inbox) {
      try {
        const std::int64_t request =
            s.driven.driver ? engine_.add(std::move(s.driven)) : engine_.add(std::move(s.request));
        live_[request] = {s.ticket, s.sink, s.deadline};
        by_ticket_[s.ticket] = request;
      } catch (const InputError& e) {
        --in_flight_;
        s.sink->failed(400, e.what());
      }
    }
    for (const auto ticket : cancels) {
      const auto it = by_ticket_.find(ticket);
      if (it == by_ticket_.end()) continue;  // finished already
      const std::int64_t request = it->second;
      engine_.cancel(request);
      drop(request);
    }
    expire();
    if (engine_.idle()) {
      publish();
      continue;
    }
    std::vector<engine::Completion> done;
    try {
      done = engine_.step();
    } catch (const std::exception& e) {
      // A broken forward pass (non-finite logits, a device error): every request in it fails.
      fail_all(500, e.what());
      continue;
    }
    for (const auto& event : engine_.last_tokens()) {
      const auto it = live_.find(event.request);
      if (it == live_.end()) continue;
      if (!event.prompt_scores.empty()) it->second.sink->prompt_scores(event.prompt_scores);
      it->second.sink->token(event.token);
    }
    for (const std::int64_t request : engine_.last_driven())
      if (const auto it = live_.find(request); it != live_.end()) it->second.sink->picked();
    for (const auto& completion : done) {
      const auto it = live_.find(completion.request);
      if (it == live_.end()) continue;
      const auto sink = it->second.sink;
      drop(completion.request);
      sink->done(completion);
    }
    publish();
  }
}

}  // namespace zoo::server
