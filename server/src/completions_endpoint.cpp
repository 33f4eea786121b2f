// POST /v1/completions and /v1/chat/completions: a request's choices go to the engine, and their
// tokens come back as text (streamed as server-sent events, or whole), with logprobs, tool calls and
// usage as OpenAI writes them.
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <random>

#include "completion_request.hpp"
#include "server_state.hpp"
#include "zoo/engine/text_stream.hpp"
#include "zoo/utf8_stream.hpp"

namespace zoo::server {

namespace {

struct Choice {
  int index = 0;
  std::vector<SampledToken> prompt_scores;  // with echo and logprobs
  bool echoed = false;                      // the prompt's part is out (streaming)
  std::size_t logprob_offset = 0;           // streaming: the text_offset of the next logprobs entry
  Clock::time_point last_token{};  // for the inter-token latency
  std::size_t prompt = 0;  // which prompt
  std::int64_t ticket = -1;
  engine::TextStream text;
  std::vector<std::int64_t> ids;
  std::vector<SampledToken> tokens;
  std::string finish_reason;
  std::int64_t cached_tokens = 0;  // of its prompt, from the prefix cache
  bool over = false;
  std::optional<engine::ChatOutput> chat;  // chat: the text split into reasoning, content and tool calls
  int calls_sent = 0;                      // streaming: tool calls sent so far
};

// A token as logprobs name it: its text, or (part of a character: not UTF-8 alone) "bytes:\xNN..."
// as vLLM writes it, so distinct tokens keep distinct names.
std::string token_text(const Tokenizer* tokenizer, std::int64_t id) {
  if (!tokenizer) return std::to_string(id);
  const auto bytes = tokenizer->token_bytes(id);
  if (!bytes) return std::string();
  if (is_valid_utf8(*bytes)) return *bytes;
  std::string out = "bytes:";
  for (const char c : *bytes) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  return out;
}

class CompletionJob : public std::enable_shared_from_this<CompletionJob> {
 public:
  CompletionJob(std::string id, bool chat, const ServedModel& model, Sampling sampling,
                std::vector<std::vector<std::int64_t>> prompts, std::shared_ptr<Responder> responder, Metrics& metrics)
      : id_(std::move(id)), chat_(chat), model_(model), metrics_(metrics), sampling_(std::move(sampling)),
        prompts_(std::move(prompts)), responder_(std::move(responder)), created_(std::time(nullptr)),
        started_(Clock::now()) {}

  std::vector<Choice>& choices() { return choices_; }

  void start_stream() {
    if (!sampling_.stream) return;
    responder_->begin_stream(200, "text/event-stream", {{"x-request-id", id_}});
    if (!chat_) return;
    // Chat streams open each choice with the assistant's role, as OpenAI does.
    ojson choices = ojson::array();
    for (const auto& c : choices_)
      choices.push_back(ojson{{"index", c.index}, {"delta", ojson{{"role", "assistant"}, {"content", ""}}},
                              {"logprobs", nullptr}, {"finish_reason", nullptr}});
    responder_->write("data: " + dump(chunk(std::move(choices))) + "\n\n");
  }

  // The sink of one choice: forwards to the job under its lock.
  // The sink of one choice. The engine thread only hands each event over: the text, stop strings
  // and JSON run on the connection's thread while the engine steps on. A stop string found there
  // cancels the sequence through `cancel` (a token or two more may have been computed by then;
  // they are dropped).
  class Sink : public RequestSink {
   public:
    Sink(std::shared_ptr<CompletionJob> job, std::size_t choice, std::function<void()> cancel)
        : job_(std::move(job)), choice_(choice), cancel_(std::move(cancel)) {}
    void prompt_scores(const std::vector<SampledToken>& scores) override {
      job_->responder_->run([job = job_, c = choice_, scores] { job->on_prompt_scores(c, scores); });
    }
    void token(const SampledToken& token) override {
      job_->responder_->run([job = job_, c = choice_, token, cancel = cancel_] {
        if (!job->on_token(c, token)) cancel();
      });
    }
    void done(const engine::Completion& completion) override {
      job_->responder_->run([job = job_, c = choice_, completion] { job->on_done(c, completion); });
    }
    void failed(int status, const std::string& message) override {
      job_->responder_->run([job = job_, status, message] { job->on_failed(status, message); });
    }

   private:
    std::shared_ptr<CompletionJob> job_;
    std::size_t choice_;
    std::function<void()> cancel_;
  };

  void on_prompt_scores(std::size_t c, const std::vector<SampledToken>& scores) {
    std::lock_guard lock(mutex_);
    choices_[c].prompt_scores = scores;
  }
  bool on_token(std::size_t c, const SampledToken& token) {
    std::lock_guard lock(mutex_);
    Choice& choice = choices_[c];
    if (choice.over || failed_) return true;  // nothing to cancel: it ended already
    if (sampling_.stream) send_echo(choice);
    const auto now = Clock::now();
    if (choice.tokens.empty()) metrics_.ttft.observe(std::chrono::duration<double>(now - started_).count());
    else metrics_.itl.observe(std::chrono::duration<double>(now - choice.last_token).count());
    choice.last_token = now;
    choice.ids.push_back(token.id);
    choice.tokens.push_back(token);
    const bool stop = choice.text.push(token.id);
    if (sampling_.stream) send_delta(choice, stop ? "stop" : "", true);
    if (stop) finish_choice(choice, "stop");
    return !stop;
  }
  void on_done(std::size_t c, const engine::Completion& completion) {
    std::lock_guard lock(mutex_);
    Choice& choice = choices_[c];
    choice.cached_tokens = completion.cached_tokens;
    if (choice.over || failed_) return;
    if (!completion.prompt_scores.empty()) choice.prompt_scores = completion.prompt_scores;
    if (sampling_.stream) send_echo(choice);
    choice.text.finish();
    const std::string reason = choice.text.stopped() ? "stop" : engine::finish_reason_name(completion.finish);
    if (sampling_.stream) send_delta(choice, reason, false);
    finish_choice(choice, reason);
  }
  void on_failed(int status, const std::string& message) {
    std::lock_guard lock(mutex_);
    if (failed_ || finished_ == choices_.size()) return;
    failed_ = true;
    ++metrics_.failed;
    log(status);
    const char* type = status >= 500 ? "server_error" : "invalid_request_error";
    const char* code = status == 504 ? "timeout" : "";
    if (sampling_.stream) {
      responder_->write(fmt::format("data: {}\n\n", error_body(message, type, "", code)));
      responder_->end();
    } else {
      reply_error(*responder_, ApiError(status, message, "", code, type));
    }
  }

 private:
  // Completions' shape: {tokens, token_logprobs, top_logprobs, text_offset}. With echo (whole
  // answers, and a stream's first chunk) the prompt's tokens come first; its first token has no
  // logprob (null), as in OpenAI's and vLLM's answers. `offset` is the first entry's text_offset,
  // advanced past the entries (a stream keeps it per choice instead of summing its past pieces).
  ojson logprobs_of(const Choice& choice, std::size_t from, std::size_t count, bool with_prompt,
                    std::size_t& offset) const {
    ojson tokens = ojson::array(), token_logprobs = ojson::array(), top = ojson::array(), offsets = ojson::array();
    const auto add = [&](std::int64_t id, const SampledToken* t) {
      const std::string piece = token_text(model_.tokenizer, id);
      tokens.push_back(piece);
      token_logprobs.push_back(t ? ojson(t->logprob) : ojson());
      ojson alternatives = ojson::object();
      // Keyed by text as OpenAI does: tokens of the same text keep the likelier one's (the first).
      if (t)
        for (const auto& [alt, lp] : t->top) alternatives.emplace(token_text(model_.tokenizer, alt), lp);
      top.push_back(t ? alternatives : ojson());
      offsets.push_back(offset);
      offset += piece.size();
    };
    const auto& prompt = prompts_[choice.prompt];
    if (with_prompt) {
      for (std::size_t i = 0; i < prompt.size(); ++i)
        add(prompt[i], i > 0 && i - 1 < choice.prompt_scores.size() ? &choice.prompt_scores[i - 1] : nullptr);
    }
    for (std::size_t i = from; i < from + count && i < choice.tokens.size(); ++i) add(choice.tokens[i].id, &choice.tokens[i]);
    return ojson{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
  }
  // The prompt's text as a completion's text is made (special tokens skipped).
  std::string prompt_text(const Choice& choice) const {
    engine::TextStream text(model_.tokenizer);
    for (const auto id : prompts_[choice.prompt]) text.push(id);
    text.finish();
    return text.take(true);
  }
  // A stream's echo: the prompt's text (and its logprobs when asked) in a chunk of its own.
  void send_echo(Choice& choice) {
    if (!sampling_.echo || choice.echoed) return;
    choice.echoed = true;
    ojson c{{"index", choice.index}, {"text", prompt_text(choice)}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (sampling_.logprobs >= 0) c["logprobs"] = logprobs_of(choice, 0, 0, true, choice.logprob_offset);
    responder_->write("data: " + dump(chunk(ojson::array({c}))) + "\n\n");
  }
  // Chat's shape: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
  ojson chat_logprobs_of(const Choice& choice, std::size_t from, std::size_t count) const {
    const auto entry = [&](std::int64_t id, float logprob) {
      const std::string piece = token_text(model_.tokenizer, id);
      ojson bytes = ojson::array();
      if (model_.tokenizer)
        if (const auto raw = model_.tokenizer->token_bytes(id))
          for (const char c : *raw) bytes.push_back(static_cast<unsigned char>(c));
      return ojson{{"token", piece}, {"logprob", logprob}, {"bytes", bytes}};
    };
    ojson content = ojson::array();
    for (std::size_t i = from; i < from + count && i < choice.tokens.size(); ++i) {
      const SampledToken& t = choice.tokens[i];
      ojson item = entry(t.id, t.logprob);
      ojson top = ojson::array();
      for (const auto& [id, lp] : t.top) top.push_back(entry(id, lp));
      item["top_logprobs"] = top;
      content.push_back(item);
    }
    return ojson{{"content", content}};
  }
  ojson chunk(ojson choices) const {
    const char* object = !chat_ ? "text_completion" : sampling_.stream ? "chat.completion.chunk" : "chat.completion";
    return ojson{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_.name},
                 {"choices", std::move(choices)}};
  }
  // One chunk: the text now safe to send, the new token's logprobs when asked, the finish reason
  // once over. A token whose text is held back (half a character, a possible stop string) sends
  // nothing unless its logprobs are asked for.
  void send_delta(Choice& choice, const std::string& finish, bool new_token) {
    std::string delta = choice.text.take(!finish.empty());
    const bool with_logprobs = sampling_.logprobs >= 0 && new_token;
    ojson c{{"index", choice.index}};
    if (choice.chat) {  // reasoning, content and whole tool calls, as the parser lets them out
      engine::ChatDelta d = choice.chat->push(delta);
      if (!finish.empty()) {
        engine::ChatDelta last = choice.chat->finish();
        d.reasoning += last.reasoning;
        d.content += last.content;
        d.calls.insert(d.calls.end(), last.calls.begin(), last.calls.end());
      }
      ojson out = ojson::object();
      if (!d.reasoning.empty()) out["reasoning_content"] = d.reasoning;
      if (!d.content.empty()) out["content"] = d.content;
      ojson calls = ojson::array();
      for (const auto& call : d.calls) {
        if (!sampling_.parallel_tool_calls && choice.calls_sent > 0) break;
        calls.push_back(tool_call_json(choice, choice.calls_sent, call, true));
        ++choice.calls_sent;
      }
      if (!calls.empty()) out["tool_calls"] = calls;
      if (out.empty() && finish.empty() && !with_logprobs) return;
      c["delta"] = out;
    } else {
      if (delta.empty() && finish.empty() && !with_logprobs) return;
      if (chat_) c["delta"] = delta.empty() ? ojson::object() : ojson{{"content", delta}};
      else c["text"] = delta;
    }
    c["logprobs"] = nullptr;
    c["finish_reason"] = finish.empty() ? ojson() : ojson(final_reason(choice, finish));
    if (with_logprobs)
      c["logprobs"] = chat_ ? chat_logprobs_of(choice, choice.tokens.size() - 1, 1)
                            : logprobs_of(choice, choice.tokens.size() - 1, 1, false, choice.logprob_offset);
    responder_->write("data: " + dump(chunk(ojson::array({c}))) + "\n\n");
  }
  // A tool call as OpenAI writes it (in a stream's delta, with its index among the choice's calls).
  ojson tool_call_json(const Choice& choice, int index, const engine::ToolCall& call, bool delta) const {
    ojson out = ojson::object();
    if (delta) out["index"] = index;
    out["id"] = fmt::format("call_{}_{}_{}", id_.substr(id_.find('-') + 1), choice.index, index);
    out["type"] = "function";
    out["function"] = ojson{{"name", call.name}, {"arguments", call.arguments}};
    return out;
  }
  // An answer that stopped by itself after calling tools finished with "tool_calls", as OpenAI's do.
  static std::string final_reason(const Choice& choice, const std::string& reason) {
    return reason == "stop" && choice.chat && !choice.chat->calls().empty() ? "tool_calls" : reason;
  }
  ojson usage() const {
    std::int64_t prompt = 0, completion = 0;
    for (const auto& ids : prompts_) prompt += static_cast<std::int64_t>(ids.size());
    // Cached tokens: the most any choice of each prompt got (choices of one prompt share it).
    std::vector<std::int64_t> cached(prompts_.size(), 0);
    for (const auto& c : choices_) {
      completion += static_cast<std::int64_t>(c.tokens.size());
      cached[c.prompt] = std::max(cached[c.prompt], c.cached_tokens);
    }
    std::int64_t cached_total = 0;
    for (const auto x : cached) cached_total += x;
    return ojson{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion},
                 {"prompt_tokens_details", ojson{{"cached_tokens", cached_total}}}};
  }
  void finish_choice(Choice& choice, const std::string& reason) {
    choice.over = true;
    if (choice.chat && !sampling_.stream) {  // the whole answer through the parser
      choice.chat->push(choice.text.take(true));
      choice.chat->finish();
    }
    choice.finish_reason = final_reason(choice, reason);
    if (++finished_ < choices_.size()) return;
    ++metrics_.finished;
    metrics_.e2e.observe(std::chrono::duration<double>(Clock::now() - started_).count());
    log(200);
    if (sampling_.stream) {
      if (sampling_.include_usage) {
        ojson last = chunk(ojson::array());
        last["usage"] = usage();
        responder_->write("data: " + dump(last) + "\n\n");
      }
      responder_->write("data: [DONE]\n\n");
      responder_->end();
      return;
    }
    ojson out = ojson::array();
    for (auto& c : choices_) {
      ojson item{{"index", c.index}};
      if (chat_ && c.chat) {
        ojson message{{"role", "assistant"}};
        const auto& calls = c.chat->calls();
        message["content"] = c.chat->content().empty() && !calls.empty() ? ojson() : ojson(c.chat->content());
        if (!c.chat->reasoning().empty()) message["reasoning_content"] = c.chat->reasoning();
        if (!calls.empty()) {
          ojson list = ojson::array();
          for (std::size_t k = 0; k < calls.size() && (sampling_.parallel_tool_calls || k == 0); ++k)
            list.push_back(tool_call_json(c, static_cast<int>(k), calls[k], false));
          message["tool_calls"] = list;
        }
        item["message"] = message;
      } else if (chat_) item["message"] = ojson{{"role", "assistant"}, {"content", c.text.take(true)}};
      else item["text"] = (sampling_.echo ? prompt_text(c) : std::string()) + c.text.take(true);
      item["logprobs"] = nullptr;
      item["finish_reason"] = c.finish_reason;
      std::size_t offset = 0;
      if (sampling_.logprobs >= 0)
        item["logprobs"] = chat_ ? chat_logprobs_of(c, 0, c.tokens.size())
                                 : logprobs_of(c, 0, c.tokens.size(), sampling_.echo, offset);
      out.push_back(item);
    }
    ojson body = chunk(out);
    body["usage"] = usage();
    responder_->reply(200, "application/json", dump(body), {{"x-request-id", id_}});
  }
  void log(int status) const {
    std::int64_t generated = 0;
    for (const auto& c : choices_) generated += static_cast<std::int64_t>(c.tokens.size());
    fmt::print(stderr, "zoo serve: POST /v1/{} {} {} choices={} tokens_out={} {:.3f}s\n",
               chat_ ? "chat/completions" : "completions", status, id_, choices_.size(), generated,
               std::chrono::duration<double>(Clock::now() - started_).count());
  }

  std::string id_;
  bool chat_;
  const ServedModel& model_;
  Metrics& metrics_;
  Sampling sampling_;
  std::vector<std::vector<std::int64_t>> prompts_;
  std::shared_ptr<Responder> responder_;
  std::time_t created_;
  Clock::time_point started_;
  std::mutex mutex_;
  std::vector<Choice> choices_;
  std::size_t finished_ = 0;
  bool failed_ = false;
};

}  // namespace

void OpenAiServer::Impl::completions(bool chat,
                                     const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
  if (!model.text_unsupported.empty())
    throw ApiError(400, fmt::format("the model '{}' makes no text: {}", model.name, model.text_unsupported), "model",
                   "unsupported");
  const json body = parse_body(request);
  check_model(body);
  Sampling sampling = parse_sampling(body, model, context_limit, chat);
  const auto prompts = chat ? std::vector<std::vector<std::int64_t>>{chat_prompt(request, body, sampling)}
                            : parse_prompts(body, model);
  if (sampling.fill_context) {  // chat without a length: what the context leaves
    const auto longest = static_cast<std::int64_t>(prompts.front().size());
    if (longest >= context_limit)
      throw ApiError(400, fmt::format("the conversation's {} tokens fill the context limit of {} tokens", longest,
                                      context_limit),
                     "messages", "context_length_exceeded");
    sampling.base.max_new_tokens = static_cast<int>(context_limit - longest);
  }
  for (const auto& ids : prompts) {
    const auto total = static_cast<std::int64_t>(ids.size()) + sampling.base.max_new_tokens;
    if (total > context_limit)
      throw ApiError(400,
                     fmt::format("the prompt's {} tokens plus max_tokens {} exceed the context limit of {} tokens",
                                 ids.size(), sampling.base.max_new_tokens, context_limit),
                     "max_tokens", "context_length_exceeded");
  }
  const std::string id = fmt::format("{}-{:x}", chat ? "chatcmpl" : "cmpl", next_id++);
  auto job = std::make_shared<CompletionJob>(id, chat, model, sampling, prompts, responder, metrics);
  std::random_device random;
  for (std::size_t p = 0; p < prompts.size(); ++p)
    for (int i = 0; i < sampling.n; ++i) {
      Choice choice;
      choice.index = static_cast<int>(job->choices().size());
      choice.prompt = p;
      choice.ticket = worker->ticket();
      choice.text = engine::TextStream(model.tokenizer, sampling.stop);
      if (chat && (model.chat_syntax.reasoning != engine::ReasoningSyntax::none || sampling.parse_tools))
        choice.chat.emplace(model.chat_syntax, sampling.parse_tools, sampling.in_reasoning, sampling.answer_prefix);
      job->choices().push_back(std::move(choice));
    }
  // The engine may answer as soon as the first request is in: build every choice first.
  std::vector<engine::GenerationRequest> requests;
  for (const auto& choice : job->choices()) {
    engine::GenerationRequest r = sampling.base;
    r.prompt = prompts[choice.prompt];
    if (r.sampling.temperature != 0.0f)
      r.sampling.seed = sampling.seed ? *sampling.seed + static_cast<std::uint64_t>(choice.index)
                                      : (static_cast<std::uint64_t>(random()) << 32) ^ random();
    requests.push_back(std::move(r));
  }
  std::vector<std::int64_t> tickets;
  for (const auto& choice : job->choices()) tickets.push_back(choice.ticket);
  responder->on_disconnect([this, tickets] {
    ++metrics.cancelled;
    for (const auto t : tickets) worker->cancel(t);
  });
  job->start_stream();
  for (std::size_t c = 0; c < requests.size(); ++c) {
    auto cancel = [this, ticket = tickets[c]] { worker->cancel(ticket); };
    if (!worker->submit(tickets[c], std::move(requests[c]), std::make_shared<CompletionJob::Sink>(job, c, cancel))) {
      for (std::size_t k = 0; k < c; ++k) worker->cancel(tickets[k]);
      const auto [status, message] = worker->refusal();
      if (sampling.stream) return job->on_failed(status, message);
      throw ApiError(status, message, "", status == 429 ? "queue_full" : "unavailable",
                     status == 429 ? "rate_limit_error" : "server_error");
    }
  }
}

}  // namespace zoo::server
