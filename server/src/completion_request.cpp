// A completion request's fields (completion_request.hpp; docs/serving.md has the table of fields).
#include "completion_request.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "zoo/error.hpp"
#include "zoo/sampling.hpp"
#include "zoo/utf8_stream.hpp"

namespace zoo::server {

namespace {

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

}  // namespace

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

}  // namespace zoo::server
