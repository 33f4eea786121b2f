#pragma once
// OpenAiServer's state (zoo/server/openai_server.hpp), shared by the files that serve it; its
// functions below are grouped under the file that defines them.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api_fields.hpp"
#include "completion_request.hpp"
#include "engine_worker.hpp"
#include "request_metrics.hpp"
#include "speech_endpoint.hpp"
#include "zoo/server/http_server.hpp"
#include "zoo/server/openai_server.hpp"

namespace zoo::server {

using Clock = std::chrono::steady_clock;

struct OpenAiServer::Impl {
  ServerOptions options;
  std::thread io_thread;
  std::atomic<bool> ready{false}, draining{false}, shutdown{false};
  ServedModel model;
  std::int64_t context_limit = 0, pool_pages = 0;
  std::unique_ptr<EngineWorker> worker;
  std::unique_ptr<AudioWorkers> audio;  // with a speech model: the codec's threads
  std::unique_ptr<AudioWorker> warmup_thread;  // what warm-up requests' answers run on
  ReferenceCache references;
  SpeechCounters speech;
  Metrics metrics;
  std::atomic<std::int64_t> next_id{0}, requests_total{0}, requests_failed{0};
  // Last, so destroyed first: its destructor runs the handlers still queued, which reach the
  // members above (the model, the metrics).
  HttpServer http;

  explicit Impl(ServerOptions o)
      : options(checked(std::move(o))),
        http(options.http, [this](HttpRequest request, std::shared_ptr<Responder> responder) {
          handle(std::move(request), std::move(responder));
        }) {}

  // openai_server.cpp: the API key checked on a request's headers, before its body is read.
  static ServerOptions checked(ServerOptions o);
  // routes.cpp
  void handle(HttpRequest request, std::shared_ptr<Responder> responder);
  void route(const HttpRequest& request, const std::shared_ptr<Responder>& responder);
  void endpoint(const HttpRequest& request, const std::shared_ptr<Responder>& responder);
  void check_model(const json& body) const;
  static json parse_body(const HttpRequest& request) { return parse_json_body(request.body); }
  // completions_endpoint.cpp (/v1/completions, /v1/chat/completions)
  void completions(bool chat, const HttpRequest& request, const std::shared_ptr<Responder>& responder);
  // chat_request.cpp
  std::vector<std::int64_t> chat_prompt(const HttpRequest& request, const json& body, Sampling& sampling) const;
  // tokenize_endpoint.cpp (/tokenize, /detokenize)
  void tokens(bool encode, const HttpRequest& request, const std::shared_ptr<Responder>& responder);
  // metrics_endpoint.cpp (/metrics)
  std::string metrics_text() const;
  // warm_up.cpp: see OpenAiServer::ready; its requests go to endpoint()
  void warm_up(int count);
};

}  // namespace zoo::server
