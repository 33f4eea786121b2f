#pragma once
// Device time between the stages of a run (a decoder step, a codec decode), measured with CUDA
// events recorded on the run's stream. Off, every call is free: profiling is chosen per process by
// an environment flag (ZOO_CUDA_PROFILE, ZOO_CODEC_PROFILE), and an enabled run waits for its last
// event, so graph replays and timings of unprofiled runs are never disturbed.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "zoo/kernels/cuda/common.hpp"

namespace zoo::kernels::cuda {

class EventProfiler {
 public:
  struct Stage {
    std::string name;
    double ms = 0;
  };
  // Runs of one key, with the device time per run of each stage name (names sorted).
  struct Summary {
    std::int64_t key = 0;
    int runs = 0;
    double ms_per_run = 0;
    std::vector<Stage> stages;
  };

  explicit EventProfiler(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // Starts a run on `stream`: stages are timed from here.
  void begin(cudaStream_t stream);
  // Ends the stage `name` after the work queued on the stream so far.
  void mark(const std::string& name);
  // Ends the run: waits for it, adds it to the summary of `key` (e.g. the step's token count) and
  // returns its stages in order. Empty when disabled or nothing was marked.
  std::vector<Stage> end(std::int64_t key);
  std::vector<Summary> summaries() const;

 private:
  bool enabled_;
  cudaStream_t stream_ = nullptr;
  std::vector<std::pair<std::string, Event>> marks_;
  std::map<std::pair<std::int64_t, std::string>, double> totals_;
  std::map<std::int64_t, int> runs_;
};

}  // namespace zoo::kernels::cuda
