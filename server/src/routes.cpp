// Which request goes where: the server's own checks (the API key, readiness, draining), then each
// path to its endpoint; an endpoint's ApiError becomes the OpenAI-shaped error answer.
#include <fmt/format.h>

#include "api_key.hpp"
#include "server_state.hpp"

namespace zoo::server {

void OpenAiServer::Impl::handle(HttpRequest request, std::shared_ptr<Responder> responder) {
  ++requests_total;
  if (request.method == "HEAD") request.method = "GET";  // answered as GET, without the body (HttpServer)
  try {
    route(request, responder);
  } catch (const ApiError& e) {
    ++requests_failed;
    fmt::print(stderr, "zoo serve: {} {} {} {}\n", shown(request.method), shown(request.path), e.status,
               escape_text(e.what(), 400));
    reply_error(*responder, e);
  } catch (const std::exception& e) {
    ++requests_failed;
    fmt::print(stderr, "zoo serve: {} {} 500 {}\n", shown(request.method), shown(request.path),
               escape_text(e.what(), 400));
    reply_error(*responder, ApiError(500, e.what(), "", "internal_error", "server_error"));
  }
}

void OpenAiServer::Impl::route(const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
  const auto& path = request.path;
  if (path == "/health") {
    if (request.method != "GET") throw ApiError(405, "use GET", "", "method_not_allowed");
    if (!ready || draining) throw ApiError(503, ready ? "shutting down" : "loading the model", "", "unavailable");
    return responder->reply(200, "application/json", R"({"status":"ok"})");
  }
  if (path == "/metrics") {  // for scrapers: no key, as /health
    if (request.method != "GET") throw ApiError(405, "use GET", "", "method_not_allowed");
    if (!ready) throw ApiError(503, "loading the model", "", "unavailable");
    return responder->reply(200, "text/plain; version=0.0.4", metrics_text());
  }
  if (!options.api_key.empty() && !api_key_matches(request.header("authorization"), options.api_key))
    throw ApiError(401, "invalid or missing API key (Authorization: Bearer KEY)", "", "invalid_api_key",
                   "authentication_error");
  if (!ready) throw ApiError(503, "the model is still loading", "", "unavailable");
  if (draining) throw ApiError(503, "the server is shutting down", "", "unavailable");
  endpoint(request, responder);
}

// The API's endpoints, past the server's own checks (key, readiness): what clients and the
// warm-up reach.
void OpenAiServer::Impl::endpoint(const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
  const auto& path = request.path;
  if (path == "/v1/models") {
    if (request.method != "GET") throw ApiError(405, "use GET", "", "method_not_allowed");
    ojson entry{{"id", model.name}, {"object", "model"}, {"created", 0}, {"owned_by", "zoo"},
                {"max_model_len", context_limit}};
    return responder->reply(200, "application/json", dump(ojson{{"object", "list"}, {"data", ojson::array({entry})}}));
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (request.method != "POST") throw ApiError(405, "use POST", "", "method_not_allowed");
    return completions(path == "/v1/chat/completions", request, responder);
  }
  if (path == "/v1/audio/speech") {
    if (request.method != "POST") throw ApiError(405, "use POST", "", "method_not_allowed");
    if (!audio) throw ApiError(400, fmt::format("the model '{}' does not synthesize speech", model.name), "model", "unsupported");
    return speech_endpoint(request, responder, {model, *worker, audio->next(), references, speech});
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (request.method != "POST") throw ApiError(405, "use POST", "", "method_not_allowed");
    return tokens(path == "/tokenize", request, responder);
  }
  throw ApiError(404, fmt::format("no route {} {}", shown(request.method), shown(path)), "", "not_found");
}

void OpenAiServer::Impl::check_model(const json& body) const {
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw ApiError(400, "'model' must be a string", "model", "invalid_type");
    if (m->get<std::string>() != model.name)
      throw ApiError(404,
                     fmt::format("the model '{}' does not exist; this server serves '{}'",
                                 shown(m->get_ref<const std::string&>()), model.name),
                     "model", "model_not_found");
  }
}

}  // namespace zoo::server
