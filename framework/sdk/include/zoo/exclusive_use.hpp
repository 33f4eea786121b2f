#pragma once
// Turns a data race into an error: state that must not be used by two threads at once (a CUDA
// stream and the GEMM plan cache its sessions share, one session's KV cache) holds an
// ExclusiveUse, and every entry point takes a Scope from it. A second thread entering while the
// first is still inside gets ConcurrentUseError at once instead of corrupting the state. The same
// thread may nest scopes, and different threads may take turns; only overlap is refused.
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

namespace zoo {

// A caller broke a "one thread at a time" contract. Its destructor lives in the framework library
// (key function), so it can be caught after the plugin that threw it is unloaded.
class ConcurrentUseError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
  ~ConcurrentUseError() override;
};

class ExclusiveUse {
 public:
  // `what` names the guarded thing in the error, e.g. "a CUDA model's stream".
  explicit ExclusiveUse(std::string what) : what_(std::move(what)) {}
  ExclusiveUse(const ExclusiveUse&) = delete;
  ExclusiveUse& operator=(const ExclusiveUse&) = delete;

  class [[nodiscard]] Scope {
   public:
    explicit Scope(ExclusiveUse& use) : use_(use) { use_.enter(); }
    ~Scope() { use_.leave(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ExclusiveUse& use_;
  };

 private:
  void enter();
  void leave();

  std::string what_;
  std::atomic<std::thread::id> owner_{};
  int depth_ = 0;  // touched only by the owner
};

}  // namespace zoo
