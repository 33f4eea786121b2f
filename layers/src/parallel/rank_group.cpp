#include "rank_group.hpp"

#include <fmt/format.h>

#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

namespace zoo::layers::inline ZOO_LAYERS_ABI {

RankThreads::RankThreads(int ranks) {
  if (ranks < 1) throw std::invalid_argument("RankThreads: ranks must be >= 1");
  threads_.reserve(static_cast<std::size_t>(ranks));
  try {
    for (int r = 0; r < ranks; ++r) threads_.emplace_back([this, r] { loop(r); });
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (auto& thread : threads_) thread.join();
    throw;
  }
}

RankThreads::~RankThreads() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void RankThreads::run(const std::function<void(int)>& job,
                      const std::function<void(const std::string&)>& fail) {
  std::unique_lock lock(mutex_);
  job_ = &job;
  fail_ = &fail;
  error_ = nullptr;
  running_ = size();
  ++generation_;
  start_.notify_all();
  done_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
  fail_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void RankThreads::loop(int rank) {
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const auto& job = *job_;
    const auto& fail = *fail_;
    lock.unlock();
    try {
      job(rank);
    } catch (...) {
      // The first exception is the cause; the ranks the abort releases throw after it.
      std::string what = "an unknown exception";
      try {
        throw;
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      lock.lock();
      const bool first = !error_;
      if (first) error_ = std::current_exception();
      lock.unlock();
      if (first) fail(fmt::format("rank {}: {}", rank, what));
    }
    lock.lock();
    if (--running_ == 0) done_.notify_all();
  }
}

namespace {

// What a rank's forward pass sees of the caller's hook. Every rank asks the same names in the same
// order and must get the same answers (a tap gathers across ranks): the first answer for a name is
// kept for all. Only rank 0 records.
class RankHooks {
 public:
  explicit RankHooks(DiagnosticHook& hook) : hook_(hook) {}
  bool wants(std::string_view name) {
    std::lock_guard lock(mutex_);
    auto it = answers_.find(name);
    if (it == answers_.end()) it = answers_.emplace(std::string(name), hook_.wants(name)).first;
    return it->second;
  }
  void record(std::string_view name, const TensorView& tensor) {
    std::lock_guard lock(mutex_);
    hook_.record(name, tensor);
  }

 private:
  DiagnosticHook& hook_;
  std::mutex mutex_;
  std::map<std::string, bool, std::less<>> answers_;
};

class RankHook : public DiagnosticHook {
 public:
  RankHook(RankHooks& hooks, int rank) : hooks_(hooks), rank_(rank) {}
  bool wants(std::string_view name) const override { return hooks_.wants(name); }
  void record(std::string_view name, const TensorView& tensor) override {
    if (rank_ == 0) hooks_.record(name, tensor);
  }

 private:
  RankHooks& hooks_;
  int rank_;
};

}  // namespace

RankGroupRunner::RankGroupRunner(std::shared_ptr<void> keep, std::vector<std::unique_ptr<KvRunner>> ranks,
                                 std::function<void(const std::string&)> abort)
    : keep_(std::move(keep)),
      ranks_(std::move(ranks)),
      abort_(std::move(abort)),
      threads_(static_cast<int>(ranks_.size())) {
  if (ranks_.empty()) throw std::invalid_argument("RankGroupRunner: no ranks");
}

RankGroupRunner::~RankGroupRunner() = default;

void RankGroupRunner::check_usable() const {
  if (!stopped_.empty())
    throw std::runtime_error("tensor-parallel runner stopped after a failure (" + stopped_ +
                             "); open a new runner");
}

template <class Call>
SequenceId RankGroupRunner::on_every_rank(Call call) {
  check_usable();
  const SequenceId id = call(*ranks_.front());
  for (std::size_t r = 1; r < ranks_.size(); ++r)
    if (const SequenceId other = call(*ranks_[r]); other != id) {
      stopped_ = fmt::format("rank {} gave sequence id {} where rank 0 gave {}", r, other, id);
      throw std::logic_error("tensor-parallel ranks disagree: " + stopped_);
    }
  return id;
}

SequenceId RankGroupRunner::open_sequence() {
  return on_every_rank([](KvRunner& rank) { return rank.open_sequence(); });
}

SequenceId RankGroupRunner::fork_sequence(SequenceId sequence, std::int64_t tokens) {
  return on_every_rank([&](KvRunner& rank) { return rank.fork_sequence(sequence, tokens); });
}

void RankGroupRunner::close_sequence(SequenceId sequence) {
  check_usable();
  for (auto& rank : ranks_) rank->close_sequence(sequence);
}

void RankGroupRunner::submit(const ForwardBatch& batch, DiagnosticHook* hook) {
  check_usable();
  if (pending_)
    throw std::logic_error("tensor-parallel runner: submit() before wait() of the previous batch");
  ranks_.front()->check(batch);
  std::optional<RankHooks> hooks;
  if (hook) hooks.emplace(*hook);
  try {
    threads_.run(
        [&](int r) {
          std::optional<RankHook> rank_hook;
          if (hooks) rank_hook.emplace(*hooks, r);
          KvRunner& rank = *ranks_[static_cast<std::size_t>(r)];
          rank.submit(batch, rank_hook ? &*rank_hook : nullptr);
          auto mine = rank.wait();
          if (r == 0) results_ = std::move(mine);
        },
        abort_);
  } catch (const std::exception& e) {
    stopped_ = e.what();
    throw;
  }
  pending_ = true;
}

std::vector<ForwardResult> RankGroupRunner::wait() {
  if (!pending_) throw std::logic_error("tensor-parallel runner: wait() without a submitted batch");
  pending_ = false;
  return std::move(results_);
}

nlohmann::json RankGroupRunner::stats() const {
  nlohmann::json stats = ranks_.front()->stats();
  stats["tensor_parallel"] = ranks_.size();
  return stats;
}

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI
