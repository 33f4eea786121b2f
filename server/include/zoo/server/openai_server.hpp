#pragma once
// `zoo serve`: OpenAI's HTTP API over one model's engine (zoo/engine/engine.hpp). The HTTP side
// runs on one I/O thread (http_server.hpp); the engine on its own thread steps while any request
// runs, taking new requests and cancellations between steps, and streams each token back.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zoo/batch.hpp"
#include "zoo/chat_template.hpp"
#include "zoo/codec.hpp"
#include "zoo/engine/engine.hpp"
#include "zoo/generation.hpp"
#include "zoo/server/chat_output.hpp"
#include "zoo/server/http_server.hpp"
#include "zoo/speech.hpp"
#include "zoo/tokenizer.hpp"

namespace zoo::server {

// A voice for /v1/audio/speech's `voice` (zoo serve --voices): reference frames and their transcript.
struct SpeechVoice {
  std::vector<std::vector<std::int64_t>> frames;  // [T, codebooks]
  std::string text;
};

struct ServedModel {
  std::string name;                 // what /v1/models lists and requests must name
  Runner* runner = nullptr;         // the caller's; outlives the server
  const Tokenizer* tokenizer = nullptr;  // null: prompts as token ids only, no text out
  std::int64_t vocab_size = 0;
  std::vector<std::int64_t> eos_token_ids;
  std::shared_ptr<const ChatTemplate> chat_template;  // null: /v1/chat/completions answers 400
  std::shared_ptr<const ChatTemplate> tool_template;  // for requests with tools (a "tool_use" one); null: chat_template
  // How the model writes reasoning and tool calls (detect_chat_syntax of its template): `<think>`
  // comes back as reasoning_content, calls as tool_calls; a model without a tool syntax refuses tools.
  engine::ChatSyntax chat_syntax;
  SamplingOptions defaults;         // generation_config.json's, for fields a request leaves out
  bool defaults_from_model = false; // else OpenAI's (temperature 1)
  // Non-empty: the model makes no text (a speech model); /v1/completions and chat answer 400 with it.
  std::string text_unsupported;
  // Speech (/v1/audio/speech); null: that endpoint answers 400. The decoder and encoder are loaded
  // and used from one thread of the server's (never at once).
  SpeechSteps* speech = nullptr;
  CodeDecoder* decoder = nullptr;  // frames to waveform; required with `speech`
  CodeEncoder* encoder = nullptr;  // request audio to reference frames; null: voices only
  std::map<std::string, SpeechVoice> voices;
};

struct ServerOptions {
  HttpOptions http;
  engine::EngineOptions engine;
  std::int64_t max_queue = 1024;  // requests waiting beyond the running ones; more: 429
  // Non-empty: requests need "Authorization: Bearer KEY", checked before their bodies are read. A key
  // no client could send (blanks at an end, control characters) is an InputError at construction.
  std::string api_key;
  std::chrono::seconds drain_timeout{30};
  // A request still unanswered this long after it arrived is cancelled (504); 0: no limit.
  std::chrono::milliseconds request_timeout{0};
  // Threads running speech requests' codec work (each request keeps one; see speech_endpoint.hpp).
  int codec_threads = 4;
};

class OpenAiServer {
 public:
  // Binds (InputError naming the address when it cannot) and serves /health (503) at once.
  explicit OpenAiServer(ServerOptions options);
  ~OpenAiServer();
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  std::uint16_t port() const;
  // The model is loaded: the engine starts, runs `warmup_requests` requests at once as clients
  // would (speech, or completions of a few tokens), and then /health answers 200. A fresh process
  // pays first-use costs in its first burst (kernels loaded at first launch, GEMM plans per shape,
  // buffers grown to size, decode graphs captured); the warm-up pays them instead of the first
  // clients. Its requests count in the engine's metrics like any others.
  void ready(ServedModel model, int warmup_requests = 0);
  // Blocks until SIGINT or SIGTERM (or shutdown()), then stops accepting, lets running requests
  // finish (their answers written) for up to drain_timeout or until a second signal, fails the rest
  // (503, or a stream's error event) and returns, the engine gone and nothing left queued for the
  // connections (the runner and tokenizer of ready() may go after it; destroying the server
  // without wait() needs them still alive).
  void wait();
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zoo::server
