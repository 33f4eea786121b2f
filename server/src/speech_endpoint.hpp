#pragma once
// POST /v1/audio/speech (openai_server.cpp routes it here): text to speech over the engine. Each
// request is a driven sequence (zoo::SpeechSequence) batched with the others; its frames go to the
// codec's decoder as they come (zoo::CodeStream) on the request's audio thread (one of a few), which
// also encodes its reference audio, so the engine never waits for the codec.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <string>
#include <thread>
#include <vector>

#include "engine_worker.hpp"
#include "zoo/server/http_server.hpp"
#include "zoo/server/openai_server.hpp"

namespace zoo::server {

// One thread running posted work in order (a speech request's work all goes to one, so it runs in
// order without locks).
class AudioWorker {
 public:
  AudioWorker();
  ~AudioWorker();  // runs what is queued, then ends
  AudioWorker(const AudioWorker&) = delete;
  AudioWorker& operator=(const AudioWorker&) = delete;
  void post(std::function<void()> work);

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// The audio threads: a request is given one (round robin) for its whole life. Several, so that one
// stream's codec decode does not hold up another's first chunk (the CUDA codec decodes concurrent
// calls side by side) and neither does a reference being encoded.
class AudioWorkers {
 public:
  explicit AudioWorkers(int threads);
  AudioWorker& next();

 private:
  std::vector<std::unique_ptr<AudioWorker>> workers_;
  std::atomic<std::size_t> next_{0};
};

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

struct SpeechCounters {
  std::atomic<std::int64_t> finished{0}, failed{0}, cancelled{0};
  std::atomic<std::int64_t> audio_samples{0};  // sent, at the decoder's rate
};

struct SpeechContext {
  const ServedModel& model;
  EngineWorker& worker;
  AudioWorker& audio;
  ReferenceCache& references;
  SpeechCounters& counters;
};

// Checks the request (400s name `param`), then queues it; the answer comes from its audio thread.
void speech_endpoint(const HttpRequest& request, const std::shared_ptr<Responder>& responder, SpeechContext context);

// Base64 (RFC 4648, padding optional when decoding); decoding returns nullopt on anything else.
std::string base64_encode(const void* data, std::size_t size);
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace zoo::server
