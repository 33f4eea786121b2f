#include "zoo/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace zoo {

// One rank's side: what it published for the call in progress, and its share of a reduction.
class InProcessGroup::Rank : public Communicator {
 public:
  Rank(InProcessGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }

  void all_reduce_sum(std::span<float> values) override {
    publish(values.data(), values.size());
    check_counts("all_reduce_sum", values.size());
    // Each rank sums its slice over the ranks in rank order (a reduce-scatter), then every rank
    // copies every slice (an all-gather): the work is split, the order of the adds is fixed.
    const auto n = values.size();
    const auto ranks = static_cast<std::size_t>(size());
    const auto [begin, end] = slice(n, static_cast<std::size_t>(rank_), ranks);
    partial_.assign(end - begin, 0.0f);
    for (std::size_t r = 0; r < ranks; ++r) {
      const float* src = group_.ranks_[r]->data_;
      for (std::size_t i = begin; i < end; ++i) partial_[i - begin] += src[i];
    }
    group_.arrive_and_wait();  // every slice summed; nobody reads the inputs any more
    for (std::size_t r = 0; r < ranks; ++r) {
      const auto& part = group_.ranks_[r]->partial_;
      std::copy(part.begin(), part.end(),
                values.begin() + static_cast<std::ptrdiff_t>(slice(n, r, ranks).first));
    }
    group_.arrive_and_wait();  // every rank copied: the slices may be reused
  }

  void all_gather(std::span<const float> piece, std::span<float> out) override {
    if (out.size() != piece.size() * static_cast<std::size_t>(size())) {
      group_.abort(fmt::format("all_gather on rank {}: out holds {} values, not {} x {}", rank_, out.size(),
                               size(), piece.size()));
      group_.arrive_and_wait();  // throws
    }
    publish(piece.data(), piece.size());
    check_counts("all_gather", piece.size());
    for (int r = 0; r < size(); ++r)
      std::copy_n(group_.ranks_[static_cast<std::size_t>(r)]->data_, piece.size(),
                  out.begin() + static_cast<std::ptrdiff_t>(r * piece.size()));
    group_.arrive_and_wait();
  }

 private:
  static std::pair<std::size_t, std::size_t> slice(std::size_t n, std::size_t r, std::size_t ranks) {
    return {n * r / ranks, n * (r + 1) / ranks};
  }
  void publish(const float* data, std::size_t count) {
    data_ = data;
    count_ = count;
    group_.arrive_and_wait();
  }
  void check_counts(const char* what, std::size_t count) {
    for (const auto& other : group_.ranks_)
      if (other->count_ != count) {
        group_.abort(fmt::format("{}: rank {} passed {} values, rank {} {}", what, rank_, count, other->rank_,
                                 other->count_));
        group_.arrive_and_wait();  // throws
      }
  }

  InProcessGroup& group_;
  int rank_;
  const float* data_ = nullptr;
  std::size_t count_ = 0;
  std::vector<float> partial_;
};

InProcessGroup::InProcessGroup(int ranks) {
  if (ranks < 1) throw std::invalid_argument("InProcessGroup: ranks must be >= 1");
  for (int r = 0; r < ranks; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
}

InProcessGroup::~InProcessGroup() = default;

Communicator& InProcessGroup::rank(int r) {
  if (r < 0 || r >= size())
    throw std::out_of_range(fmt::format("InProcessGroup: no rank {} of {}", r, size()));
  return *ranks_[static_cast<std::size_t>(r)];
}

void InProcessGroup::abort(const std::string& why) {
  {
    const std::lock_guard lock(mutex_);
    if (aborted_.empty()) aborted_ = why.empty() ? std::string("aborted") : why;
  }
  all_arrived_.notify_all();
}

void InProcessGroup::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  const auto fail = [&] { throw std::runtime_error("tensor-parallel group stopped: " + aborted_); };
  if (!aborted_.empty()) fail();
  const std::int64_t generation = generation_;
  if (++arrived_ == size()) {
    arrived_ = 0;
    ++generation_;
    lock.unlock();
    all_arrived_.notify_all();
    return;
  }
  all_arrived_.wait(lock, [&] { return generation_ != generation || !aborted_.empty(); });
  if (generation_ == generation) fail();
}

}  // namespace zoo
