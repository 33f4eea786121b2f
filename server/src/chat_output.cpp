// A chat answer split into reasoning, content and tool calls (zoo/server/chat_output.hpp).
#include "zoo/server/chat_output.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace zoo::engine {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";

using ojson = nlohmann::ordered_json;

// Where the whitespace at the end of `s` begins.
std::size_t trailing_space(std::string_view s) {
  const auto end = s.find_last_not_of(" \n\t\r");
  return end == std::string_view::npos ? 0 : end + 1;
}

bool only_space(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
}

// A call from a parsed object: a string name and an object of arguments (or its JSON text).
bool call_of(const ojson& j, ToolCall& call) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const ojson* args = j.contains("arguments") ? &j["arguments"] : j.contains("parameters") ? &j["parameters"] : nullptr;
  ojson object = ojson::object();
  if (args && args->is_string()) {
    object = ojson::parse(args->get<std::string>(), nullptr, false);
    if (object.is_discarded()) return false;
  } else if (args) {
    object = *args;
  }
  if (!object.is_object()) return false;
  call.name = j["name"].get<std::string>();
  call.arguments = object.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return true;
}

}  // namespace

ChatSyntax detect_chat_syntax(std::string_view source) {
  ChatSyntax s;
  if (source.find(kThinkOpen) != std::string_view::npos) s.reasoning = ReasoningSyntax::think;
  if (source.find(kCallOpen) != std::string_view::npos) s.tools = ToolCallSyntax::hermes;
  else if (source.find("<|python_tag|>") != std::string_view::npos ||
           source.find("Environment: ipython") != std::string_view::npos)
    s.tools = ToolCallSyntax::llama3_json;
  return s;
}

const char* reasoning_syntax_name(ReasoningSyntax syntax) { return syntax == ReasoningSyntax::think ? "think" : "none"; }
const char* tool_call_syntax_name(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::hermes: return "hermes";
    case ToolCallSyntax::llama3_json: return "llama3_json";
    case ToolCallSyntax::none: break;
  }
  return "none";
}

bool parse_tool_call(std::string_view text, ToolCall& call) {
  const ojson j = ojson::parse(text.begin(), text.end(), nullptr, false);
  return !j.is_discarded() && call_of(j, call);
}

ChatOutput::ChatOutput(ChatSyntax syntax, bool tools, bool in_reasoning, std::string prefix)
    : syntax_(syntax), tools_(tools && syntax.tools != ToolCallSyntax::none),
      mode_(in_reasoning && syntax.reasoning == ReasoningSyntax::think ? Mode::reasoning : Mode::content),
      buffer_(std::move(prefix)) {}

ChatDelta ChatOutput::push(std::string_view text) {
  buffer_ += text;
  return run(false);
}

ChatDelta ChatOutput::finish() { return run(true); }

void ChatOutput::emit_reasoning(ChatDelta& d, std::string text) {
  if (text.empty()) return;
  reasoning_ += text;
  d.reasoning += text;
}

void ChatOutput::emit_content(ChatDelta& d, std::string text) {
  if (text.empty()) return;
  content_started_ = true;
  content_ += text;
  d.content += text;
}

std::string ChatOutput::safe_part(std::string_view tag, bool final) {
  std::size_t keep = 0;
  if (!final)
    for (std::size_t n = std::min(tag.size() - 1, buffer_.size()); n > 0; --n)
      if (std::string_view(buffer_).substr(buffer_.size() - n) == tag.substr(0, n)) {
        keep = n;
        break;
      }
  std::string out = buffer_.substr(0, buffer_.size() - keep);
  buffer_.erase(0, buffer_.size() - keep);
  return out;
}

ChatDelta ChatOutput::run(bool final) {
  ChatDelta d;
  while (true) {
    if (mode_ == Mode::reasoning) {
      const auto at = buffer_.find(kThinkClose);
      if (at == std::string::npos) {
        emit_reasoning(d, safe_part(kThinkClose, final));
        return d;
      }
      emit_reasoning(d, buffer_.substr(0, at));
      buffer_.erase(0, at + kThinkClose.size());
      mode_ = Mode::content;
      strip_newlines_ = true;  // as Qwen3's template reads an answer back: what follows </think>, lstrip('\n')
      continue;
    }
    if (mode_ == Mode::tool_call) {
      const auto at = buffer_.find(kCallClose);
      if (at == std::string::npos && !final) return d;
      const std::string body = buffer_.substr(0, at == std::string::npos ? buffer_.size() : at);
      ToolCall call;
      const bool parsed = parse_tool_call(body, call);
      if (parsed) {
        calls_.push_back(call);
        d.calls.push_back(std::move(call));
      } else {  // not a call after all: the text as the model wrote it
        emit_content(d, space_before_call_ + std::string(kCallOpen) + body +
                            (at == std::string::npos ? "" : std::string(kCallClose)));
      }
      space_before_call_.clear();
      buffer_.erase(0, at == std::string::npos ? buffer_.size() : at + kCallClose.size());
      mode_ = Mode::content;
      strip_newlines_ = parsed;
      if (final && buffer_.empty()) return d;
      continue;
    }
    if (mode_ == Mode::json_calls) {
      if (!final) return d;
      // One call, a list of calls, or calls separated by ';' (Llama 3.1's form).
      std::vector<ToolCall> found;
      const ojson j = ojson::parse(buffer_, nullptr, false);
      bool ok = !j.is_discarded();
      if (ok && j.is_array()) {
        for (const auto& item : j) ok = ok && call_of(item, found.emplace_back());
      } else if (ok) {
        ok = call_of(j, found.emplace_back());
      } else {
        ok = true;
        std::size_t from = 0;
        while (ok && from <= buffer_.size()) {
          const auto semi = buffer_.find(';', from);
          const std::string part = buffer_.substr(from, semi == std::string::npos ? std::string::npos : semi - from);
          if (!only_space(part)) ok = parse_tool_call(part, found.emplace_back());
          if (semi == std::string::npos) break;
          from = semi + 1;
        }
        ok = ok && !found.empty();
      }
      if (ok) {
        calls_.insert(calls_.end(), found.begin(), found.end());
        d.calls.insert(d.calls.end(), found.begin(), found.end());
      } else {
        emit_content(d, buffer_);
      }
      buffer_.clear();
      return d;
    }
    // Content.
    if (strip_newlines_) {
      const auto first = buffer_.find_first_not_of('\n');
      buffer_.erase(0, first == std::string::npos ? buffer_.size() : first);
      if (buffer_.empty()) return d;
      strip_newlines_ = false;
    }
    if (!content_started_ && syntax_.reasoning == ReasoningSyntax::think && reasoning_.empty()) {
      // The answer may open with <think>: wait until it can tell.
      if (buffer_.compare(0, kThinkOpen.size(), kThinkOpen) == 0) {
        buffer_.erase(0, kThinkOpen.size());
        mode_ = Mode::reasoning;
        continue;
      }
      if (!final && kThinkOpen.substr(0, buffer_.size()) == buffer_) return d;
    }
    if (tools_ && syntax_.tools == ToolCallSyntax::llama3_json && !content_started_) {
      const auto first = buffer_.find_first_not_of(" \n\t\r");
      if (first == std::string::npos && !final) return d;
      if (first != std::string::npos && buffer_[first] == '{') {
        mode_ = Mode::json_calls;
        continue;
      }
    }
    if (tools_ && syntax_.tools == ToolCallSyntax::hermes) {
      const auto at = buffer_.find(kCallOpen);
      if (at != std::string::npos) {
        std::string before = buffer_.substr(0, at);
        buffer_.erase(0, at + kCallOpen.size());
        // Whitespace between calls or before the first is not content (unless the call is not one).
        const std::size_t cut = trailing_space(before);
        space_before_call_ = before.substr(cut);
        emit_content(d, before.substr(0, cut));
        mode_ = Mode::tool_call;
        continue;
      }
      std::string safe = safe_part(kCallOpen, final);
      // Trailing whitespace may precede a call: hold it (unless the answer is over).
      if (!final) {
        const std::size_t cut = trailing_space(safe);
        buffer_.insert(0, safe.substr(cut));
        safe.erase(cut);
      } else if (!calls_.empty() && only_space(safe)) {
        safe.clear();
      }
      emit_content(d, std::move(safe));
      return d;
    }
    emit_content(d, buffer_);
    buffer_.clear();
    return d;
  }
}

}  // namespace zoo::engine
