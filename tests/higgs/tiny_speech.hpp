#pragma once
// A speech request for the tiny Higgs fixtures, which ship no tokenizer.json.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zoo/speech.hpp"

namespace zoo::ptest {

// Text "tokenizer" for a tiny fixture: a byte per id (modulo vocab - 16), the special tokens near
// the top of the vocabulary (higgs-tiny: 320, higgs-tiny-hd128: 256).
inline SpeechRequest tiny_speech(const std::string& text, std::int64_t vocab = 320) {
  SpeechRequest r;
  r.text = text;
  r.encode = [vocab](std::string_view s) {
    std::vector<std::int64_t> ids;
    for (char ch : s) ids.push_back(static_cast<unsigned char>(ch) % (vocab - 16));
    return ids;
  };
  r.token_id = [vocab](std::string_view s) -> std::optional<std::int64_t> {
    const std::int64_t top = vocab - 10;
    const std::map<std::string, std::int64_t, std::less<>> specials{
        {"<|tts|>", top}, {"<|text|>", top + 1}, {"<|audio|>", top + 2}, {"<|ref_audio|>", top + 3},
        {"<|ref_text|>", top + 4}};
    auto it = specials.find(s);
    if (it == specials.end()) return std::nullopt;
    return it->second;
  };
  return r;
}

}  // namespace zoo::ptest
