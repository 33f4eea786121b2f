#include "tts_prompt.hpp"

#include <fmt/format.h>

#include "codec.hpp"
#include "delay_pattern.hpp"
#include "zoo/error.hpp"

namespace zoo::higgs {
namespace {

std::int64_t required_token(const TextTokens& tokens, std::string_view token, std::string_view why) {
  const auto id = tokens.token_id(token);
  if (!id) throw InputError(fmt::format("tokenizer has no special token '{}' ({})", token, why));
  return *id;
}

void append(std::vector<std::int64_t>& ids, const std::vector<std::int64_t>& more) {
  ids.insert(ids.end(), more.begin(), more.end());
}

}  // namespace

TtsPrompt build_tts_prompt(const TextTokens& tokens, std::string_view text, std::string_view ref_text,
                           const std::vector<std::vector<std::int64_t>>& ref_codes, std::int64_t num_codebooks,
                           std::int64_t codes, const std::string& ref_label) {
  if (!tokens.encode || !tokens.token_id) throw std::invalid_argument("build_tts_prompt: tokenizer not set");
  if (text.empty()) throw InputError("the text to speak is empty");
  for (std::size_t t = 0; t < ref_codes.size(); ++t) {
    if (static_cast<std::int64_t>(ref_codes[t].size()) != num_codebooks)
      throw InputError(fmt::format("{}: frame {} has {} codes, the model has {} codebooks", ref_label, t,
                                   ref_codes[t].size(), num_codebooks));
    for (std::size_t c = 0; c < ref_codes[t].size(); ++c) {
      // Reference frames are real codes: BOC/EOC are placed by the delay pattern, never given.
      const std::string problem = code_problem(ref_codes[t][c], static_cast<std::int64_t>(t),
                                               static_cast<std::int64_t>(c), codes, false);
      if (!problem.empty()) throw InputError(fmt::format("{}: {}", ref_label, problem));
    }
  }
  const std::int64_t tts = required_token(tokens, "<|tts|>", "it starts every TTS prompt");
  const std::int64_t text_tag = required_token(tokens, "<|text|>", "it opens the text to speak");
  const std::int64_t audio = required_token(tokens, "<|audio|>", "it starts the generated audio");

  TtsPrompt prompt;
  prompt.ids.push_back(tts);
  if (!ref_codes.empty()) {
    const std::int64_t ref_audio = required_token(tokens, "<|ref_audio|>", "it opens the reference audio");
    // Older checkpoints lack <|ref_text|>; the reference then goes without its transcript.
    if (!ref_text.empty()) {
      if (const auto ref_text_tag = tokens.token_id("<|ref_text|>")) {
        prompt.ids.push_back(*ref_text_tag);
        append(prompt.ids, tokens.encode(ref_text));
      }
    }
    prompt.ids.push_back(ref_audio);
    prompt.slot_rows = apply_delay_pattern(ref_codes, num_codebooks, codes, codes + 1);
    for (std::size_t r = 0; r < prompt.slot_rows.size(); ++r) {
      prompt.slot_positions.push_back(static_cast<std::int64_t>(prompt.ids.size()));
      prompt.ids.push_back(0);
    }
  }
  prompt.ids.push_back(text_tag);
  append(prompt.ids, tokens.encode(text));
  prompt.ids.push_back(audio);
  return prompt;
}

}  // namespace zoo::higgs
