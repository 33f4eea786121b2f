// OpenAiServer (zoo/server/openai_server.hpp): the endpoints, request fields and responses of
// OpenAI's API (docs/serving.md has the table of fields), over EngineWorker.
#include "zoo/server/openai_server.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "api_fields.hpp"
#include "api_key.hpp"
#include "request_metrics.hpp"
#include "engine_worker.hpp"
#include "speech_endpoint.hpp"
#include "zoo/engine/text_stream.hpp"
#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/chat_template.hpp"
#include "zoo/utf8_stream.hpp"

namespace zoo::server {

namespace {

using Clock = std::chrono::steady_clock;

// The completion fields: implemented, accepted and ignored, refused until implemented.
const std::set<std::string> kCompletionFields = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "n", "stream",
    "stream_options", "logprobs", "echo", "ignore_eos", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "logit_bias", "best_of", "suffix", "user", "metadata", "store"};

// The chat fields: the shared ones, then chat's own.
const std::set<std::string> kChatFields = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "seed",
    "stop", "n", "stream", "stream_options", "logprobs", "top_logprobs", "ignore_eos", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "logit_bias", "response_format", "tools", "tool_choice",
    "parallel_tool_calls", "chat_template_kwargs", "add_generation_prompt", "user", "metadata", "store"};

struct Sampling {
  engine::GenerationRequest base;  // without the prompt
  std::optional<std::uint64_t> seed;
  int n = 1;
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;
  bool echo = false;     // completions: the prompt's text (and its tokens' logprobs) before the completion
  bool fill_context = false;  // chat without a length: what the context leaves
  int logprobs = -1;
  // Chat with tools: the functions' names; tool_choice "none" (no calls parsed), or a function the
  // answer is made to call (its opening is put in the prompt); parallel_tool_calls false keeps the first.
  std::vector<std::string> tools;
  bool parse_tools = false;
  std::string forced_tool;
  bool parallel_tool_calls = true;
  // Set with the rendered prompt: the answer continues a reasoning block the prompt opened, and the
  // text the prompt holds of it already (a forced call's opening).
  bool in_reasoning = false;
  std::string answer_prefix;
};

// `tools` and `tool_choice` as OpenAI defines them, checked against the model's tool-call syntax.
void parse_tools(const json& body, const ServedModel& model, Sampling& s) {
  const json* tools = field(body, "tools");
  if (tools) {
    if (!tools->is_array() || tools->size() > 128)
      throw ApiError(400, "'tools' must be a list of at most 128 tools", "tools", "invalid_type");
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const json* fn = t.is_object() && t.value("type", "") == "function" && t.contains("function") ? &t["function"] : nullptr;
      if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string() ||
          (*fn)["name"].get<std::string>().empty())
        throw ApiError(400, fmt::format("tools[{}] must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}", i),
                       "tools", "invalid_type");
      if (fn->contains("parameters") && !(*fn)["parameters"].is_object())
        throw ApiError(400, fmt::format("tools[{}].function.parameters must be an object (a JSON Schema)", i), "tools",
                       "invalid_type");
      s.tools.push_back((*fn)["name"].get<std::string>());
    }
  }
  std::string choice = s.tools.empty() ? "none" : "auto";
  if (const json* v = field(body, "tool_choice")) {
    if (v->is_string()) {
      choice = v->get<std::string>();
      if (choice == "required")
        throw ApiError(400, "tool_choice \"required\" is not supported yet (give the function to call by name)",
                       "tool_choice", "unsupported");
      if (choice != "none" && choice != "auto")
        throw ApiError(400, "'tool_choice' must be \"none\", \"auto\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                       "tool_choice");
    } else if (v->is_object() && v->value("type", "") == "function" && v->contains("function") &&
               (*v)["function"].is_object() && (*v)["function"].contains("name") && (*v)["function"]["name"].is_string()) {
      choice = "named";
      s.forced_tool = (*v)["function"]["name"].get<std::string>();
      if (std::find(s.tools.begin(), s.tools.end(), s.forced_tool) == s.tools.end())
        throw ApiError(400, fmt::format("tool_choice names '{}', which is not among 'tools'", shown(s.forced_tool)),
                       "tool_choice");
    } else {
      throw ApiError(400, "'tool_choice' must be \"none\", \"auto\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                     "tool_choice", "invalid_type");
    }
    if (choice != "none" && s.tools.empty()) throw ApiError(400, "'tool_choice' needs 'tools'", "tool_choice");
  }
  s.parallel_tool_calls = bool_field(body, "parallel_tool_calls", true);
  s.parse_tools = choice != "none";
  if (s.parse_tools && model.chat_syntax.tools == engine::ToolCallSyntax::none)
    throw ApiError(400, "this model's chat template has no tool-call syntax (<tool_call> or Llama 3.1's JSON calls)",
                   "tools", "unsupported");
}

Sampling parse_sampling(const json& body, const ServedModel& model, std::int64_t context_limit, bool chat) {
  for (const auto& [key, value] : body.items())
    if (!(chat ? kChatFields : kCompletionFields).count(key))
      throw ApiError(400, fmt::format("unknown field '{}'", shown(key)), key, "unknown_field");
  // Refused: they change the output and are not implemented.
  if (chat) {
    if (const json* v = field(body, "response_format");
        v && !(v->is_object() && v->contains("type") && (*v)["type"] == "text"))
      throw ApiError(400, "'response_format' other than {\"type\": \"text\"} is not supported yet", "response_format",
                     "unsupported");
  }
  if (const json* v = field(body, "suffix"); v && !(v->is_string() && v->get<std::string>().empty()))
    throw ApiError(400, "'suffix' is not supported", "suffix", "unsupported");

  Sampling s;
  s.echo = !chat && bool_field(body, "echo", false);
  s.n = static_cast<int>(int_field(body, "n", 1, 1, 64));
  if (const json* v = field(body, "best_of"); v && !(v->is_number_integer() && v->get<std::int64_t>() == s.n))
    throw ApiError(400, "'best_of' other than n is not supported", "best_of", "unsupported");
  SamplingOptions& o = s.base.sampling;
  const SamplingOptions d = model.defaults_from_model ? model.defaults : SamplingOptions{.temperature = 1.0f};
  o.temperature = static_cast<float>(number_field(body, "temperature", d.temperature, 0.0, 100.0));
  o.top_p = static_cast<float>(number_field(body, "top_p", d.top_p, 1e-9, 1.0));
  const std::int64_t top_k = int_field(body, "top_k", d.top_k, -1, model.vocab_size);
  o.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);
  o.min_p = static_cast<float>(number_field(body, "min_p", d.min_p, 0.0, 1.0));
  // Over the sequence's own tokens, on the device (vLLM's ranges and rules).
  o.presence_penalty = static_cast<float>(number_field(body, "presence_penalty", 0.0, -2.0, 2.0));
  o.frequency_penalty = static_cast<float>(number_field(body, "frequency_penalty", 0.0, -2.0, 2.0));
  o.repetition_penalty = static_cast<float>(number_field(body, "repetition_penalty", d.repetition_penalty, 1e-6, 100.0));
  // {"token id": bias in [-100, 100]}, as OpenAI's; added before the penalties, on the device.
  if (const json* v = field(body, "logit_bias")) {
    if (!v->is_object() || v->size() > 1024)
      throw ApiError(400, "'logit_bias' must be an object of at most 1024 {\"token id\": bias}", "logit_bias",
                     "invalid_type");
    for (const auto& [key, value] : v->items()) {
      std::int64_t id = -1;
      const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (error != std::errc() || end != key.data() + key.size() || id < 0 || id >= model.vocab_size)
        throw ApiError(400, fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", escape_text(key, 40),
                                        model.vocab_size),
                       "logit_bias");
      if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
        throw ApiError(400, fmt::format("'logit_bias' of token {} must be a number in [-100, 100]", id), "logit_bias");
      o.logit_bias.emplace_back(id, value.get<float>());
    }
    std::sort(o.logit_bias.begin(), o.logit_bias.end());
    for (std::size_t i = 1; i < o.logit_bias.size(); ++i)
      if (o.logit_bias[i].first == o.logit_bias[i - 1].first)
        throw ApiError(400, fmt::format("'logit_bias' names token {} twice", o.logit_bias[i].first), "logit_bias");
  }
  if (o.temperature == 0.0f) {  // greedy: the filters are moot (OpenAI accepts them)
    o.top_k = 0;
    o.top_p = 1.0f;
    o.min_p = 0.0f;
  }
  if (const json* v = field(body, "seed")) {
    if (!v->is_number_integer()) throw ApiError(400, "'seed' must be an integer", "seed", "invalid_type");
    s.seed = v->is_number_unsigned() ? v->get<std::uint64_t>() : static_cast<std::uint64_t>(v->get<std::int64_t>());
  }
  try {
    Sampler check(o);
  } catch (const InputError& e) {
    throw ApiError(400, e.what(), "temperature");
  }
  // Completions default to OpenAI's 16 tokens; chat to what the context leaves (as vLLM does),
  // checked against each prompt's length by the caller. With `echo`, 0 scores the prompt only.
  const char* length_field = chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  s.fill_context = chat && !field(body, length_field);
  s.base.max_new_tokens = s.fill_context ? 0
                                         : static_cast<int>(int_field(body, length_field,
                                                                      std::min<std::int64_t>(16, context_limit - 1),
                                                                      s.echo ? 0 : 1, context_limit));
  if (const json* v = field(body, "stop")) {
    if (v->is_string()) {
      s.stop.push_back(v->get<std::string>());
    } else if (v->is_array() && v->size() <= 16) {
      for (const auto& x : *v) {
        if (!x.is_string()) throw ApiError(400, "'stop' must be a string or a list of strings", "stop", "invalid_type");
        s.stop.push_back(x.get<std::string>());
      }
    } else {
      throw ApiError(400, "'stop' must be a string or a list of at most 16 strings", "stop", "invalid_type");
    }
    for (const auto& x : s.stop)
      if (x.empty() || x.size() > 256 || !is_valid_utf8(x))
        throw ApiError(400, "each 'stop' string must be 1 to 256 bytes of UTF-8", "stop");
    if (!s.stop.empty() && !model.tokenizer)
      throw ApiError(400, "'stop' needs text, and this model has no tokenizer", "stop", "unsupported");
  }
  s.stream = bool_field(body, "stream", false);
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) throw ApiError(400, "'stream_options' must be an object", "stream_options", "invalid_type");
    for (const auto& [key, value] : v->items())
      if (key != "include_usage")
        throw ApiError(400, fmt::format("unknown field 'stream_options.{}'", shown(key)), "stream_options",
                       "unknown_field");
    s.include_usage = bool_field(*v, "include_usage", false);
  }
  if (chat) {
    if (bool_field(body, "logprobs", false))
      s.logprobs = static_cast<int>(int_field(body, "top_logprobs", 0, 0, kMaxTopLogprobs));
    else if (field(body, "top_logprobs"))
      throw ApiError(400, "'top_logprobs' needs 'logprobs': true", "top_logprobs");
  } else if (const json* v = field(body, "logprobs")) {
    if (!v->is_number_integer()) throw ApiError(400, "'logprobs' must be an integer", "logprobs", "invalid_type");
    s.logprobs = static_cast<int>(int_field(body, "logprobs", 0, 0, kMaxTopLogprobs));
  }
  s.base.top_logprobs = s.logprobs;
  // An echo with logprobs scores the prompt; one of no new tokens runs the prompt all the same.
  if (s.echo && (s.logprobs >= 0 || s.base.max_new_tokens == 0)) s.base.prompt_logprobs = std::max(s.logprobs, 0);
  if (!bool_field(body, "ignore_eos", false)) s.base.eos_token_ids = model.eos_token_ids;
  if (chat) parse_tools(body, model, s);
  return s;
}

// A text field encoded by the model's tokenizer; errors name `param`.
std::vector<std::int64_t> encode_text(const json& text, const ServedModel& model, const char* param) {
  if (!model.tokenizer) throw ApiError(400, fmt::format("this model has no tokenizer: give '{}' as token ids", param), param);
  try {
    return model.tokenizer->encode(text.get<std::string>());
  } catch (const InputError& e) {
    throw ApiError(400, fmt::format("'{}': {}", param, e.what()), param);
  }
}

// A list of token ids, each in the vocabulary; errors name `param`.
std::vector<std::int64_t> token_ids(const json& list, const ServedModel& model, const char* param) {
  std::vector<std::int64_t> out;
  for (const auto& x : list) {
    if (!x.is_number_integer())
      throw ApiError(400, fmt::format("'{}' token ids must be integers", param), param, "invalid_type");
    bool integral = false;
    const auto id = int64_of(x, integral);
    if (!id || *id < 0 || *id >= model.vocab_size)
      throw ApiError(400,
                     fmt::format("'{}': token id {} is outside the vocabulary [0, {})", param, shown(x.dump()),
                                 model.vocab_size),
                     param);
    out.push_back(*id);
  }
  return out;
}

// The prompts of a completion request: text, token ids, or a list of either.
std::vector<std::vector<std::int64_t>> parse_prompts(const json& body, const ServedModel& model) {
  const json* p = field(body, "prompt");
  if (!p) throw ApiError(400, "'prompt' is required", "prompt", "missing");
  const auto text = [&](const json& v) { return encode_text(v, model, "prompt"); };
  const auto ids = [&](const json& v) { return token_ids(v, model, "prompt"); };
  std::vector<std::vector<std::int64_t>> prompts;
  if (p->is_string()) {
    prompts.push_back(text(*p));
  } else if (p->is_array() && !p->empty() && p->front().is_number_integer()) {
    prompts.push_back(ids(*p));
  } else if (p->is_array() && !p->empty()) {
    if (p->size() > 64) throw ApiError(400, "'prompt': at most 64 prompts in one request", "prompt");
    for (const auto& item : *p) {
      if (item.is_string()) prompts.push_back(text(item));
      else if (item.is_array()) prompts.push_back(ids(item));
      else throw ApiError(400, "'prompt' must be text, token ids, or a list of either", "prompt", "invalid_type");
    }
  } else {
    throw ApiError(400, "'prompt' must be text, token ids, or a list of either", "prompt", "invalid_type");
  }
  for (const auto& ids : prompts)
    if (ids.empty()) throw ApiError(400, "'prompt' is empty", "prompt");
  return prompts;
}

// ---- one completion request --------------------------------------------------------------------

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

std::atomic<int> g_signals{0};  // SIGINT and SIGTERM so far: the first drains, a second cuts the drain short
extern "C" void on_signal(int) { g_signals.fetch_add(1); }

}  // namespace

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

  // The key is checked on a request's headers, before its body is read (HttpOptions::head_check).
  static ServerOptions checked(ServerOptions o) {
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

  void handle(HttpRequest request, std::shared_ptr<Responder> responder) {
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

  void route(const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
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
  void endpoint(const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
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

  // Prometheus' text format: counters, gauges, histograms.
  std::string metrics_text() const {
    const auto c = worker->counters();
    std::string out;
    const auto add = [&](const char* name, const char* type, const char* help, auto value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
    };
    add("zoo_http_requests_total", "counter", "HTTP requests received", requests_total.load());
    add("zoo_http_request_errors_total", "counter", "HTTP requests answered with an error before generating",
        requests_failed.load());
    add("zoo_requests_finished_total", "counter", "Generation requests answered in full", metrics.finished.load());
    add("zoo_requests_failed_total", "counter", "Generation requests that failed while running", metrics.failed.load());
    add("zoo_requests_cancelled_total", "counter", "Generation requests whose client went away", metrics.cancelled.load());
    add("zoo_requests_running", "gauge", "Sequences decoding", c.running);
    add("zoo_requests_waiting", "gauge", "Sequences waiting for a slot or KV pages (the queue)", c.waiting);
    add("zoo_prompt_tokens_total", "counter", "Prompt tokens computed (recomputed after preemption included)",
        c.prompt_tokens);
    add("zoo_generation_tokens_total", "counter", "Tokens generated", c.generated_tokens);
    add("zoo_engine_steps_total", "counter", "Forward steps", c.steps);
    add("zoo_engine_step_seconds_total", "counter", "Seconds in engine steps", c.step_seconds);
    add("zoo_engine_host_seconds_total", "counter",
        "Of those, the host's scheduling before and picks after each forward pass (the device waits)", c.host_seconds);
    add("zoo_engine_submit_seconds_total", "counter",
        "Of those, preparing and launching each forward pass (the device runs what is launched meanwhile)",
        c.submit_seconds);
    add("zoo_engine_device_seconds_total", "counter",
        "Of those, the device's own time from each step's first copy to its last (CUDA; 0 where not "
        "measured)",
        c.device_seconds);
    add("zoo_preemptions_total", "counter", "Sequences preempted (recomputed later) when KV pages ran out",
        c.preemptions);
    add("zoo_kv_pages_used", "gauge", "KV cache pages in use (the fullest group)", c.pages_used);
    add("zoo_kv_pages_total", "gauge", "KV cache pages in the pool", c.pages_capacity);
    add("zoo_prefix_cache_queries_total", "counter", "Admissions that looked for a cached prefix", c.prefix_queries);
    add("zoo_prefix_cache_hits_total", "counter", "Admissions that reused a cached prefix", c.prefix_hits);
    add("zoo_prefix_cache_hit_tokens_total", "counter", "Prompt tokens the prefix cache supplied", c.prefix_hit_tokens);
    if (audio) {
      add("zoo_speech_requests_finished_total", "counter", "Speech requests answered in full", speech.finished.load());
      add("zoo_speech_requests_failed_total", "counter", "Speech requests that failed", speech.failed.load());
      add("zoo_speech_requests_cancelled_total", "counter", "Speech requests whose client went away",
          speech.cancelled.load());
      add("zoo_speech_audio_samples_total", "counter", "Audio samples decoded for speech requests",
          speech.audio_samples.load());
      add("zoo_speech_reference_cache_hits_total", "counter", "Reference audio found already encoded",
          references.hits());
    }
    out += metrics.ttft.text("zoo_time_to_first_token_seconds", "From the request's arrival to its first token");
    out += metrics.itl.text("zoo_inter_token_latency_seconds", "Between two tokens of one sequence");
    out += metrics.e2e.text("zoo_request_latency_seconds", "From the request's arrival to its last token");
    return out;
  }

  static json parse_body(const HttpRequest& request) { return parse_json_body(request.body); }

  void check_model(const json& body) const {
    if (const json* m = field(body, "model")) {
      if (!m->is_string()) throw ApiError(400, "'model' must be a string", "model", "invalid_type");
      if (m->get<std::string>() != model.name)
        throw ApiError(404,
                       fmt::format("the model '{}' does not exist; this server serves '{}'",
                                   shown(m->get_ref<const std::string&>()), model.name),
                       "model", "model_not_found");
    }
  }

  void tokens(bool encode, const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
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

  // The conversation through the model's chat template, then encoded as transformers does (no
  // special tokens added; those the template writes are the tokenizer's added tokens).
  // The conversation rendered by the model's template (with the tools when given) and encoded; sets
  // what the answer's parser needs to know of the prompt.
  std::vector<std::int64_t> chat_prompt(const HttpRequest& request, const json& body, Sampling& sampling) const {
    if (!model.chat_template) throw ApiError(400, "this model has no chat template: use /v1/completions", "messages", "unsupported");
    if (!model.tokenizer) throw ApiError(400, "this model has no tokenizer", "messages", "unsupported");
    // Messages as written: key order and number types kept for the template (3.0 stays 3.0).
    jinja::Value parsed;
    try {
      parsed = jinja::parse_json(request.body, "the request body");
    } catch (const InputError& e) {
      throw ApiError(400, e.what(), "messages", "invalid_json");
    }
    const jinja::Value* messages = parsed.dict->find("messages");
    if (!messages || !messages->is_sequence() || messages->list->empty())
      throw ApiError(400, "'messages' must be a non-empty list of messages", "messages", "invalid_type");
    for (std::size_t i = 0; i < messages->list->size(); ++i) {
      const jinja::Value& m = (*messages->list)[i];
      const jinja::Value* role = m.is_mapping() ? m.dict->find("role") : nullptr;
      if (!role || role->kind != jinja::Value::Kind::String)
        throw ApiError(400, fmt::format("messages[{}] must be an object with a string 'role'", i), "messages");
    }
    ChatInput input;
    input.messages = *messages;
    const ChatTemplate* chat_template = model.chat_template.get();
    if (const jinja::Value* tools = parsed.dict->find("tools"); tools && !tools->is_none() && !sampling.tools.empty()) {
      input.tools = *tools;
      if (model.tool_template) chat_template = model.tool_template.get();
    }
    input.add_generation_prompt = bool_field(body, "add_generation_prompt", true);
    if (const jinja::Value* kwargs = parsed.dict->find("chat_template_kwargs"); kwargs && !kwargs->is_none()) {
      if (!kwargs->is_mapping()) throw ApiError(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
      for (const auto& [key, value] : kwargs->dict->items) input.extra.set(key, value);
    }
    std::string text;
    try {
      text = chat_template->render(input);
    } catch (const jinja::TemplateRaised& e) {
      throw ApiError(400, fmt::format("the chat template refused the conversation: {}", e.message()), "messages");
    } catch (const InputError& e) {
      throw ApiError(400, e.what(), "messages");
    }
    // A reasoning block the generation prompt opens (a thinking model's template) is continued.
    const auto end = text.find_last_not_of(" \n\t\r");
    sampling.in_reasoning = model.chat_syntax.reasoning == engine::ReasoningSyntax::think && end != std::string::npos &&
                            end + 1 >= 7 && text.compare(end + 1 - 7, 7, "<think>") == 0;
    // A named tool_choice: the call's opening goes into the prompt, so the answer is that call.
    if (!sampling.forced_tool.empty()) {
      const std::string name = json(sampling.forced_tool).dump();
      sampling.answer_prefix = model.chat_syntax.tools == engine::ToolCallSyntax::hermes
                                   ? "<tool_call>\n{\"name\": " + name + ", \"arguments\": "
                                   : "{\"name\": " + name + ", \"parameters\": ";
      text += sampling.answer_prefix;
    }
    try {
      auto ids = model.tokenizer->encode(text);
      if (ids.empty()) throw ApiError(400, "the rendered conversation is empty", "messages");
      return ids;
    } catch (const InputError& e) {
      throw ApiError(400, e.what(), "messages");
    }
  }

  void warm_up(int count);  // see OpenAiServer::ready; its requests go to endpoint()

  void completions(bool chat, const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
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
};

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
