// Reference frames by their audio (reference_cache.hpp).
#include "reference_cache.hpp"

#include <algorithm>

namespace zoo::server {

std::optional<std::vector<std::vector<std::int64_t>>> ReferenceCache::find(const std::string& audio) {
  const std::lock_guard lock(mutex_);
  const auto it =
      std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == audio; });
  if (it == entries_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it);
  ++hits_;
  return entries_.front().second;
}

void ReferenceCache::add(const std::string& audio, std::vector<std::vector<std::int64_t>> frames) {
  const std::lock_guard lock(mutex_);
  // Two requests with the same new audio may both have encoded it; keep one.
  if (std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == audio; })) return;
  entries_.emplace_front(audio, std::move(frames));
  while (entries_.size() > capacity_) entries_.pop_back();
}

}  // namespace zoo::server
