#pragma once
// A speech request's reference audio, encoded once: the frames by the audio's bytes.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zoo::server {

// Reference frames of request audio, by the audio's bytes (a client that sends the same voice
// again does not pay for the encoder again); the least recently used go first. Any thread.
class ReferenceCache {
 public:
  explicit ReferenceCache(std::size_t capacity = 64) : capacity_(capacity) {}
  std::optional<std::vector<std::vector<std::int64_t>>> find(const std::string& audio);
  void add(const std::string& audio, std::vector<std::vector<std::int64_t>> frames);
  std::int64_t hits() const { return hits_.load(); }

 private:
  std::size_t capacity_;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::vector<std::vector<std::int64_t>>>> entries_;  // most recent first
  std::atomic<std::int64_t> hits_{0};
};

}  // namespace zoo::server
