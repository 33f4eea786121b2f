// The Higgs TTS prompt from a real tokenizer.json (the tiny fixture's, made by the `tokenizers`
// library with the special tokens at non-standard ids): ids equal the ones tools/fixtures built
// with that library for the three first-party layouts.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tts_prompt.hpp"
#include "zoo/tokenizer.hpp"

namespace zoo::higgs {

TEST_CASE("tts prompt: real tokenizer.json, ids as the tokenizers library builds them", "[higgs][tts]") {
  const auto dir = std::filesystem::path(ZOO_SOURCE_DIR) / "tests" / "fixtures" / "higgs-tiny";
  const Tokenizer tok = Tokenizer::from_file(dir / "tokenizer.json");
  std::ifstream in(dir / "tts_prompts.json");
  const auto cases = nlohmann::json::parse(in).at("cases");
  REQUIRE(cases.size() == 3);
  const TextTokens tokens{[&](std::string_view s) { return tok.encode(s); },
                          [&](std::string_view s) { return tok.token_to_id(s); }};
  for (const auto& c : cases) {
    std::vector<std::vector<std::int64_t>> ref;
    for (std::int64_t t = 0; t < c.at("ref_frames").get<std::int64_t>(); ++t) ref.push_back({t, t + 1, t + 2, t + 3});
    const TtsPrompt p = build_tts_prompt(tokens, c.at("text").get<std::string>(), c.at("ref_text").get<std::string>(),
                                         ref, 4, 64);
    auto want = c.at("ids").get<std::vector<std::int64_t>>();
    std::vector<std::int64_t> slots;
    for (std::size_t i = 0; i < want.size(); ++i)
      if (want[i] == -100) {
        slots.push_back(static_cast<std::int64_t>(i));
        want[i] = 0;
      }
    CHECK(p.ids == want);
    CHECK(p.slot_positions == slots);
  }
}

}  // namespace zoo::higgs
