#pragma once
// `zoo generate --input`'s JSONL (DESIGN.md, "Batch input"): one sequence per non-blank line, a
// JSON string (a text prompt) or an object with `prompt` or `input_ids` and optional sampling
// fields. Each field is checked where it is read: a bad line is an InputError naming the file,
// the line and the field.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zoo {

struct BatchItem {
  std::int64_t line = 0;  // 1-based, for messages
  std::optional<std::string> prompt;
  std::vector<std::int64_t> input_ids;  // when no prompt
  std::optional<int> max_new_tokens;
  std::optional<float> temperature, top_p, min_p, repetition_penalty, frequency_penalty, presence_penalty;
  std::optional<int> top_k;
  std::optional<int> logprobs;  // each new token's logprob and the top n (0..20)
  std::optional<std::uint64_t> seed;
};

inline constexpr std::size_t kMaxBatchItems = std::size_t{1} << 20;

std::vector<BatchItem> parse_batch_input(std::string_view text, std::string_view label);

}  // namespace zoo
