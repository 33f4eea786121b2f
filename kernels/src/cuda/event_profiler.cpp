#include "zoo/kernels/cuda/event_profiler.hpp"

namespace zoo::kernels::cuda {

void EventProfiler::begin(cudaStream_t stream) {
  if (!enabled_) return;
  marks_.clear();
  stream_ = stream;
  mark("");
}

void EventProfiler::mark(const std::string& name) {
  if (!enabled_ || !stream_) return;
  marks_.emplace_back(name, Event(true));
  marks_.back().second.record(stream_);
}

std::vector<EventProfiler::Stage> EventProfiler::end(std::int64_t key) {
  std::vector<Stage> stages;
  if (!enabled_ || marks_.size() < 2) return stages;
  marks_.back().second.synchronize();
  for (std::size_t i = 1; i < marks_.size(); ++i) {
    const double ms = Event::elapsed_ms(marks_[i - 1].second, marks_[i].second);
    stages.push_back({marks_[i].first, ms});
    totals_[{key, marks_[i].first}] += ms;
  }
  runs_[key]++;
  marks_.clear();
  return stages;
}

std::vector<EventProfiler::Summary> EventProfiler::summaries() const {
  std::vector<Summary> out;
  for (const auto& [key, runs] : runs_) {
    Summary s{key, runs, 0, {}};
    for (const auto& [k, ms] : totals_)
      if (k.first == key) {
        s.stages.push_back({k.second, ms / runs});
        s.ms_per_run += ms / runs;
      }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace zoo::kernels::cuda
