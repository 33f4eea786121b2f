#pragma once
// A tensor-parallel group of ranks behind one Runner: each rank is a backend runner over its share
// of the weights (zoo/layers/tensor_parallel.hpp), run on a thread of its own for the group's life
// (NCCL wants one thread per GPU, and CUDA graphs are captured thread-locally), and the ranks meet
// only in their communicator's collectives. Every rank keeps the same sequences and pages (the
// same calls in the same order), computes the same gathered logits and samples the same token;
// rank 0's results are the group's, and only rank 0 records taps (gathered by the backend).
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../kv_sequences.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

// One thread per rank. run() hands every rank the same job and waits for all of them.
class RankThreads {
 public:
  explicit RankThreads(int ranks);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  // Calls job(rank) on each rank's thread. A rank that throws calls fail(what) at once, from its
  // thread, so ranks waiting for it in a collective are released (they throw in turn); run()
  // rethrows the first exception once every rank has returned.
  void run(const std::function<void(int)>& job, const std::function<void(const std::string&)>& fail);

 private:
  void loop(int rank);

  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  const std::function<void(const std::string&)>* fail_ = nullptr;
  std::uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;  // last: started once the rest exists
};

class RankGroupRunner : public Runner {
 public:
  // `ranks[r]` runs rank r; `abort(what)` releases every rank waiting in a collective; `keep`
  // (the communicators) outlives the ranks.
  RankGroupRunner(std::shared_ptr<void> keep, std::vector<std::unique_ptr<KvRunner>> ranks,
                  std::function<void(const std::string&)> abort);
  ~RankGroupRunner() override;

  SequenceId open_sequence() override;
  SequenceId fork_sequence(SequenceId sequence, std::int64_t tokens = -1) override;
  void close_sequence(SequenceId sequence) override;
  std::int64_t tokens(SequenceId sequence) const override { return ranks_.front()->tokens(sequence); }
  std::int64_t max_context() const override { return ranks_.front()->max_context(); }
  std::vector<std::int64_t> pages_needed(SequenceId sequence, std::int64_t count) const override {
    return ranks_.front()->pages_needed(sequence, count);
  }
  // Rank 0's pool (each rank holds its own, of its kv heads' pages).
  KvPoolStats pool() const override { return ranks_.front()->pool(); }
  // Checked on rank 0 first (every rank holds the same sequences, so an InputError or an exhausted
  // pool leaves every rank as it was); then every rank runs the step. A failure after that stops
  // the group for good: its ranks no longer agree on their caches.
  void submit(const ForwardBatch& batch, DiagnosticHook* hook) override;
  std::vector<ForwardResult> wait() override;
  nlohmann::json stats() const override;

 private:
  // The same call on every rank (sequence bookkeeping: no collectives), with the ids they return
  // checked to agree.
  template <class Call>
  SequenceId on_every_rank(Call call);
  void check_usable() const;

  std::shared_ptr<void> keep_;  // first: destroyed last
  std::vector<std::unique_ptr<KvRunner>> ranks_;
  std::function<void(const std::string&)> abort_;
  RankThreads threads_;
  std::string stopped_;  // why the group stopped; empty: usable
  bool pending_ = false;
  std::vector<ForwardResult> results_;
};

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI
