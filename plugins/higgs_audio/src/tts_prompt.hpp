#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zoo::higgs {

// What the prompt builder needs of a tokenizer: plain text to ids (no special tokens added) and a
// special token's id by its string (nullopt when the vocabulary lacks it).
struct TextTokens {
  std::function<std::vector<std::int64_t>(std::string_view)> encode;
  std::function<std::optional<std::int64_t>(std::string_view)> token_id;
};

// A TTS prompt: ids, and the positions whose embeddings are audio slots with the row of codes
// (delay-pattern layout) each slot holds. Slot positions carry id 0 in `ids` (any valid id: the
// slot embedding replaces it).
struct TtsPrompt {
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> slot_positions;
  std::vector<std::vector<std::int64_t>> slot_rows;
};

// The first-party (sglang-omni build_prompt) layouts, no chat template, no BOS:
//   zero-shot:            <|tts|> <|text|> tok(text) <|audio|>
//   clone:                <|tts|> <|ref_audio|> slot x R <|text|> tok(text) <|audio|>
//   clone + transcript:   <|tts|> <|ref_text|> tok(ref_text) <|ref_audio|> slot x R <|text|> ...
// with R = T_ref + K - 1 delayed reference rows. The transcript is used only when it is
// non-empty, there is reference audio, and the vocabulary has <|ref_text|>. `ref_codes` are raw
// codes [T_ref][K] within [0, codes). InputError (messages name `ref_label`) on bad codes or a
// missing required special token.
TtsPrompt build_tts_prompt(const TextTokens& tokens, std::string_view text, std::string_view ref_text,
                           const std::vector<std::vector<std::int64_t>>& ref_codes, std::int64_t num_codebooks,
                           std::int64_t codes, const std::string& ref_label = "reference codes");

}  // namespace zoo::higgs
