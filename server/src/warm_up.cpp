// The warm-up (OpenAiServer::ready): requests as clients would send them, through endpoint(), so
// that a fresh process pays its first-use costs before /health says it is ready.
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "server_state.hpp"

namespace zoo::server {

namespace {

// Where a warm-up request's answer goes: nowhere; what it reports is whether it ended well.
class WarmupResponder : public Responder {
 public:
  struct State {
    std::mutex mutex;
    std::condition_variable ended;
    int remaining = 0;
    std::string first_error;
    AudioWorker* thread = nullptr;  // the "connection's thread" of every warm-up request (the server's)
  };
  explicit WarmupResponder(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void reply(int status, std::string, std::string body,
             std::vector<std::pair<std::string, std::string>>) override {
    finish(status >= 400 ? fmt::format("{} {}", status, body) : "");
  }
  void begin_stream(int status, std::string content_type,
                    std::vector<std::pair<std::string, std::string>>) override {
    status_ = status;
    events_ = content_type.starts_with("text/event-stream");
  }
  void write(std::string chunk) override {
    // A stream of events that fails after it began says so in an error event (audio bytes are not
    // searched: they could hold anything).
    if (events_ && chunk.find("\"error\"") != std::string::npos) error_ = chunk.substr(0, 300);
  }
  void end() override { finish(status_ >= 400 ? std::to_string(status_) : error_); }
  void on_disconnect(std::function<void()>) override {}
  void run(std::function<void()> work) override { state_->thread->post(std::move(work)); }

 private:
  void finish(const std::string& error) {
    {
      const std::lock_guard lock(state_->mutex);
      if (!error.empty() && state_->first_error.empty()) state_->first_error = error;
      --state_->remaining;
    }
    state_->ended.notify_all();
  }
  std::shared_ptr<State> state_;
  int status_ = 200;
  bool events_ = false;
  std::string error_;
};

}  // namespace

void OpenAiServer::Impl::warm_up(int count) {
  count = static_cast<int>(std::min<std::int64_t>(count, options.engine.max_running));
  if (count <= 0) return;
  const auto start = Clock::now();
  warmup_thread = std::make_unique<AudioWorker>();
  auto state = std::make_shared<WarmupResponder::State>();
  state->remaining = count;
  state->thread = warmup_thread.get();
  const bool speaks = model.speech != nullptr;
  for (int i = 0; i < count; ++i) {
    HttpRequest request;
    request.method = "POST";
    // Speech long enough for the stream's chunk lengths up to 64 frames; text of a few tokens
    // from prompts of a few lengths (token ids: a tokenizer is not needed).
    if (speaks) {
      request.path = request.target = "/v1/audio/speech";
      request.body = dump(ojson{{"model", model.name},
                                {"input", "Warming up."},
                                {"response_format", "pcm"},
                                {"max_new_tokens", 160},
                                {"temperature", 0}});
    } else {
      std::vector<std::int64_t> prompt(static_cast<std::size_t>(1 + i * 7 % 48));
      for (std::size_t t = 0; t < prompt.size(); ++t)
        prompt[t] = static_cast<std::int64_t>((t * 31 + static_cast<std::size_t>(i)) %
                                              std::max<std::int64_t>(model.vocab_size, 1));
      request.path = request.target = "/v1/completions";
      request.body = dump(ojson{{"model", model.name},
                                {"prompt", prompt},
                                {"max_tokens", 16},
                                {"temperature", 0},
                                {"ignore_eos", true}});
    }
    const auto responder = std::make_shared<WarmupResponder>(state);
    try {
      endpoint(request, responder);
    } catch (const std::exception& e) {
      responder->reply(500, "", e.what(), {});
    }
  }
  std::unique_lock lock(state->mutex);
  const bool done =
      state->ended.wait_for(lock, std::chrono::seconds(600), [&] { return state->remaining == 0; });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!done) {
    fmt::print(stderr, "zoo serve: warm-up: {} of {} requests still running after {:.0f} s; serving anyway\n",
               state->remaining, count, seconds);
  } else if (!state->first_error.empty()) {
    fmt::print(stderr, "zoo serve: warm-up: a request failed ({}); serving anyway\n",
               escape_text(state->first_error, 400));
  } else {
    fmt::print(stderr, "zoo serve: warm-up: {} {} requests at once in {:.2f} s\n", count,
               speaks ? "speech" : "text", seconds);
  }
}

}  // namespace zoo::server
