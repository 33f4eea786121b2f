#include "zoo/exclusive_use.hpp"

namespace zoo {

ConcurrentUseError::~ConcurrentUseError() = default;

void ExclusiveUse::enter() {
  const std::thread::id self = std::this_thread::get_id();
  std::thread::id expected{};
  if (owner_.compare_exchange_strong(expected, self, std::memory_order_acquire)) {
    depth_ = 1;
    return;
  }
  if (expected == self) {  // nested use on the owning thread
    ++depth_;
    return;
  }
  throw ConcurrentUseError("concurrent use of " + what_ +
                           " from two threads: it is single-threaded (use one thread at a time, or one model per "
                           "thread)");
}

void ExclusiveUse::leave() {
  if (--depth_ == 0) owner_.store(std::thread::id{}, std::memory_order_release);
}

}  // namespace zoo
