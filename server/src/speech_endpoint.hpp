#pragma once
// POST /v1/audio/speech (routes.cpp routes it here): text to speech over the engine. Each
// request is a driven sequence (zoo::SpeechSequence) batched with the others; its frames go to the
// codec's decoder as they come (zoo::CodeStream) on the request's audio thread (one of a few), which
// also encodes its reference audio, so the engine never waits for the codec.
#include <atomic>
#include <cstdint>
#include <memory>

#include "audio_workers.hpp"
#include "engine_worker.hpp"
#include "reference_cache.hpp"
#include "zoo/server/http_server.hpp"
#include "zoo/server/openai_server.hpp"

namespace zoo::server {

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

}  // namespace zoo::server
