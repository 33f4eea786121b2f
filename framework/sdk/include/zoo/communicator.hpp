#pragma once
// Collectives among the ranks of a tensor-parallel group: what a sharded layer needs after its
// row-parallel projections (o_proj, down_proj: a sum over the ranks) and for a head split by
// vocabulary (the ranks' pieces side by side), on host values. InProcessGroup is the group of
// ranks as threads of one process: the CPU backend's, so the sharded math runs in CI without GPUs,
// and the CUDA ranks' for gathered taps and, staged through the host, their device collectives
// until NCCL carries those.
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace zoo {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank passes as many values; each gets the sum over the ranks, added in rank order, so
  // every rank holds the same bits whatever the threads' timing.
  virtual void all_reduce_sum(std::span<float> values) = 0;
  // Every rank passes a piece of the same length; `out` (size() pieces) gets them in rank order.
  virtual void all_gather(std::span<const float> piece, std::span<float> out) = 0;
};

// `ranks` communicators over shared memory, one per rank, each used from its own rank's thread. A
// call waits for every rank's matching call. When one rank fails, abort() makes every waiting and
// later call on the others throw (a failed rank must not leave the rest waiting for ever); counts
// that differ between the ranks of one call are such a failure.
class InProcessGroup {
 public:
  explicit InProcessGroup(int ranks);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  Communicator& rank(int r);
  void abort(const std::string& why);

 private:
  class Rank;
  friend class Rank;
  // Waits until every rank arrived at this phase (or throws once aborted).
  void arrive_and_wait();

  std::mutex mutex_;
  std::condition_variable all_arrived_;
  int arrived_ = 0;
  std::int64_t generation_ = 0;
  std::string aborted_;  // non-empty: why
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace zoo
