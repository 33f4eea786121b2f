// POST /tokenize and /detokenize (vLLM's): text to the model's token ids and back.
#include "completion_request.hpp"
#include "server_state.hpp"

namespace zoo::server {

void OpenAiServer::Impl::tokens(bool encode,
                                const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
  const json body = parse_body(request);
  check_model(body);
  if (!model.tokenizer) throw ApiError(400, "this model has no tokenizer", "", "unsupported");
  if (encode) {
    const json* p = field(body, "prompt");
    if (!p || !p->is_string()) throw ApiError(400, "'prompt' must be a string", "prompt", "invalid_type");
    const auto ids = encode_text(*p, model, "prompt");
    return responder->reply(200, "application/json",
                            dump(ojson{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", context_limit}}));
  }
  const json* t = field(body, "tokens");
  if (!t || !t->is_array()) throw ApiError(400, "'tokens' must be a list of token ids", "tokens", "invalid_type");
  responder->reply(200, "application/json",
                   dump(ojson{{"prompt", model.tokenizer->decode(token_ids(*t, model, "tokens"))}}));
}

}  // namespace zoo::server
