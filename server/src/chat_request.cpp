// What chat adds to a completion request: `tools` and `tool_choice`, and the conversation rendered
// by the model's chat template (the answer's parser is chat_output.hpp; its JSON is
// completions_endpoint.cpp's).
#include <fmt/format.h>

#include <algorithm>

#include "completion_request.hpp"
#include "server_state.hpp"
#include "zoo/chat_template.hpp"
#include "zoo/error.hpp"

namespace zoo::server {

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

// The conversation through the model's chat template, then encoded as transformers does (no
// special tokens added; those the template writes are the tokenizer's added tokens).
// The conversation rendered by the model's template (with the tools when given) and encoded; sets
// what the answer's parser needs to know of the prompt.
std::vector<std::int64_t> OpenAiServer::Impl::chat_prompt(const HttpRequest& request,
                                                          const json& body, Sampling& sampling) const {
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

}  // namespace zoo::server
