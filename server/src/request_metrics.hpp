#pragma once
// The request metrics /metrics reports beside the engine's counters (metrics_endpoint.cpp): Prometheus
// histograms of latency and counts of how requests ended.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace zoo::server {

// A Prometheus histogram (cumulative buckets, sum, count); thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double x) {
    std::lock_guard lock(mutex_);
    const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), x) - bounds_.begin();
    ++counts_[static_cast<std::size_t>(at)];
    sum_ += x;
    ++count_;
  }
  std::string text(const std::string& name, const std::string& help) const {
    std::lock_guard lock(mutex_);
    std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += counts_[i];
      out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
    }
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

struct Metrics {
  Histogram ttft{{0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}};
  Histogram itl{{0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1}};
  Histogram e2e{{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320}};
  std::atomic<std::int64_t> finished{0}, failed{0}, cancelled{0};
};

}  // namespace zoo::server
