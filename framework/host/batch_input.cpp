// `zoo generate --input` lines (zoo/batch_input.hpp).
#include "zoo/batch_input.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "zoo/error.hpp"
#include "zoo/input_file.hpp"

namespace zoo {
namespace {

using nlohmann::json;

class LineReader {
 public:
  LineReader(std::string_view label, std::int64_t line) : label_(label), line_(line) {}
  [[noreturn]] void fail(std::string_view what) const {
    throw InputError(fmt::format("{}:{}: {}", label_, line_, what));
  }
  std::int64_t integer(const json& value, std::string_view field, std::int64_t lo, std::int64_t hi) const {
    if (!value.is_number_integer()) fail(fmt::format("{} must be an integer", field));
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      fail(fmt::format("{} must be within [{}, {}]", field, lo, hi));
    const auto v = value.get<std::int64_t>();
    if (v < lo || v > hi) fail(fmt::format("{} must be within [{}, {}], got {}", field, lo, hi, v));
    return v;
  }
  float number(const json& value, std::string_view field, double lo, double hi) const {
    if (!value.is_number()) fail(fmt::format("{} must be a number", field));
    const double v = value.get<double>();
    if (!(v >= lo && v <= hi)) fail(fmt::format("{} must be within [{}, {}], got {}", field, lo, hi, v));
    return static_cast<float>(v);
  }

 private:
  std::string_view label_;
  std::int64_t line_;
};

}  // namespace

std::vector<BatchItem> parse_batch_input(std::string_view text, std::string_view label) {
  std::vector<BatchItem> items;
  std::int64_t line_number = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const LineReader r(label, line_number);
    if (items.size() >= kMaxBatchItems) r.fail(fmt::format("more than {} lines", kMaxBatchItems));
    const json value = parse_json_text(line, fmt::format("{}:{}", label, line_number));
    BatchItem item;
    item.line = line_number;
    if (value.is_string()) {
      item.prompt = value.get<std::string>();
    } else if (value.is_object()) {
      for (const auto& [key, field] : value.items()) {
        if (key == "prompt") {
          if (!field.is_string()) r.fail("prompt must be a string");
          item.prompt = field.get<std::string>();
        } else if (key == "input_ids") {
          if (!field.is_array() || field.empty()) r.fail("input_ids must be a non-empty array of token ids");
          for (const auto& id : field)
            item.input_ids.push_back(r.integer(id, "input_ids", 0, std::numeric_limits<std::int32_t>::max()));
        } else if (key == "max_new_tokens") {
          item.max_new_tokens = static_cast<int>(r.integer(field, key, 1, 1 << 20));
        } else if (key == "temperature") {
          item.temperature = r.number(field, key, 0.0, 100.0);
        } else if (key == "top_k") {
          item.top_k = static_cast<int>(r.integer(field, key, 0, std::numeric_limits<std::int32_t>::max()));
        } else if (key == "top_p") {
          item.top_p = r.number(field, key, 0.0, 1.0);
        } else if (key == "min_p") {
          item.min_p = r.number(field, key, 0.0, 1.0);
        } else if (key == "repetition_penalty") {
          item.repetition_penalty = r.number(field, key, 1e-6, 100.0);
        } else if (key == "frequency_penalty") {
          item.frequency_penalty = r.number(field, key, -2.0, 2.0);
        } else if (key == "presence_penalty") {
          item.presence_penalty = r.number(field, key, -2.0, 2.0);
        } else if (key == "logprobs") {
          item.logprobs = static_cast<int>(r.integer(field, key, 0, 20));
        } else if (key == "seed") {
          if (!field.is_number_integer() ||
              (field.is_number_integer() && !field.is_number_unsigned() && field.get<std::int64_t>() < 0))
            r.fail("seed must be an integer >= 0");
          item.seed = field.get<std::uint64_t>();
        } else if (key == "stop") {
          r.fail("stop: stop strings are not implemented yet (stop token ids come from the model's eos)");
        } else {
          r.fail(fmt::format(
              "unknown field '{}' (known: prompt, input_ids, max_new_tokens, temperature, top_k, top_p, "
              "min_p, repetition_penalty, frequency_penalty, presence_penalty, logprobs, seed)",
              key));
        }
      }
      if (item.prompt && !item.input_ids.empty()) r.fail("give prompt or input_ids, not both");
      if (!item.prompt && item.input_ids.empty()) r.fail("needs prompt or input_ids");
    } else {
      r.fail("a line is a JSON string (a prompt) or an object with prompt or input_ids");
    }
    if (item.prompt && item.prompt->empty()) r.fail("the prompt is empty");
    items.push_back(std::move(item));
  }
  if (items.empty()) throw InputError(fmt::format("{}: no prompts (one JSON line per sequence)", label));
  return items;
}

}  // namespace zoo
