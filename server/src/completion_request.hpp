#pragma once
// A /v1/completions or /v1/chat/completions request's fields, checked (400s name the field):
// sampling, lengths, stop strings, logprobs, tools; and a completion's prompts as token ids.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api_fields.hpp"
#include "zoo/engine/engine.hpp"
#include "zoo/server/openai_server.hpp"

namespace zoo::server {

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

// The request's fields but the prompt or messages: unknown fields are refused, each against the
// model (its vocabulary, tokenizer, tool-call syntax) and `context_limit`.
Sampling parse_sampling(const json& body, const ServedModel& model, std::int64_t context_limit, bool chat);
// `tools` and `tool_choice` as OpenAI defines them, checked against the model's tool-call syntax
// (chat_request.cpp).
void parse_tools(const json& body, const ServedModel& model, Sampling& s);
// A text field encoded by the model's tokenizer; errors name `param`.
std::vector<std::int64_t> encode_text(const json& text, const ServedModel& model, const char* param);
// A list of token ids, each in the vocabulary; errors name `param`.
std::vector<std::int64_t> token_ids(const json& list, const ServedModel& model, const char* param);
// The prompts of a completion request: text, token ids, or a list of either.
std::vector<std::vector<std::int64_t>> parse_prompts(const json& body, const ServedModel& model);

}  // namespace zoo::server
