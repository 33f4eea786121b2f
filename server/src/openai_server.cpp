// OpenAiServer (zoo/server/openai_server.hpp): its start, readiness and shutdown. What each request
// meets is in routes.cpp and the *_endpoint.cpp files (server_state.hpp lists them).
#include "zoo/server/openai_server.hpp"

#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <stdexcept>
#include <thread>

#include "api_key.hpp"
#include "server_state.hpp"

namespace zoo::server {

namespace {

std::atomic<int> g_signals{0};  // SIGINT and SIGTERM so far: the first drains, a second cuts the drain short
extern "C" void on_signal(int) { g_signals.fetch_add(1); }

}  // namespace

// The key is checked on a request's headers, before its body is read (HttpOptions::head_check).
ServerOptions OpenAiServer::Impl::checked(ServerOptions o) {
  if (o.api_key.empty()) return o;
  check_api_key(o.api_key);
  o.http.head_check = [key = o.api_key](const HttpRequest& head) -> std::optional<HttpRefusal> {
    if (head.path == "/health" || head.path == "/metrics" || api_key_matches(head.header("authorization"), key))
      return std::nullopt;
    fmt::print(stderr, "zoo serve: {} {} 401 no valid API key\n", shown(head.method), shown(head.path));
    return HttpRefusal{401, "application/json",
                       error_body("invalid or missing API key (Authorization: Bearer KEY)", "authentication_error",
                                  "", "invalid_api_key")};
  };
  return o;
}

OpenAiServer::OpenAiServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->io_thread = std::thread([impl = impl_.get()] { impl->http.run(); });
}

OpenAiServer::~OpenAiServer() {
  if (impl_->worker) impl_->worker->stop();
  impl_->audio.reset();  // its last answers go out while the connections exist
  impl_->warmup_thread.reset();
  impl_->http.stop();
  if (impl_->io_thread.joinable()) impl_->io_thread.join();
}

std::uint16_t OpenAiServer::port() const { return impl_->http.port(); }

void OpenAiServer::ready(ServedModel model, int warmup_requests) {
  if (!model.runner) throw std::logic_error("OpenAiServer::ready: no runner");
  impl_->model = std::move(model);
  impl_->context_limit = impl_->model.runner->max_context();
  impl_->worker = std::make_unique<EngineWorker>(*impl_->model.runner, impl_->options.engine, impl_->options.max_queue,
                                                 impl_->options.request_timeout);
  if (impl_->model.speech) impl_->audio = std::make_unique<AudioWorkers>(impl_->options.codec_threads);
  impl_->warm_up(warmup_requests);
  impl_->ready = true;
}

void OpenAiServer::shutdown() { impl_->shutdown = true; }

void OpenAiServer::wait() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  while (g_signals.load() == 0 && !impl_->shutdown.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int signals = g_signals.load();
  fmt::print(stderr, "zoo serve: shutting down: no new requests; {} in flight get up to {} s\n",
             impl_->worker ? impl_->worker->in_flight() : 0, impl_->options.drain_timeout.count());
  impl_->draining = true;
  impl_->http.stop_accepting();
  // A request is over when its answer is written, not when the engine is done with it: its last
  // events may still be queued for the connection.
  const auto busy = [&] { return (impl_->worker && impl_->worker->in_flight() > 0) || impl_->http.answering() > 0; };
  const auto deadline = Clock::now() + impl_->options.drain_timeout;
  while (busy() && Clock::now() < deadline) {
    if (g_signals.load() > signals) {
      fmt::print(stderr, "zoo serve: a second signal: ending the requests in flight now\n");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (impl_->worker) impl_->worker->stop();  // what is left hears 503 (an error event in a stream)
  impl_->audio.reset();                      // and that goes out before the connections close
  impl_->warmup_thread.reset();
  // The 503s reach their clients; one that does not read gets a bounded wait.
  const auto grace = Clock::now() + std::chrono::seconds(2);
  while (impl_->http.answering() > 0 && Clock::now() < grace) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->http.stop();
  if (impl_->io_thread.joinable()) impl_->io_thread.join();
  // Whatever is still queued for the connections runs now, while the model (its tokenizer) lives.
  impl_->http.close_all();
  impl_->worker.reset();  // the engine gives its sequences back while the caller's runner lives
}

}  // namespace zoo::server
