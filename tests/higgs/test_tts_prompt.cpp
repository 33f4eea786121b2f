// The Higgs TTS prompt layouts (first-party build_prompt) with a mock tokenizer: special tokens
// looked up by their strings, fake ids 100..104 as in the first-party adapter test.
#include <catch2/catch.hpp>

#include <map>

#include "delay_pattern.hpp"
#include "tts_prompt.hpp"
#include "zoo/error.hpp"

namespace zoo::higgs {
namespace {

using Ids = std::vector<std::int64_t>;

TextTokens mock(std::map<std::string, std::int64_t> specials) {
  TextTokens t;
  // One id per byte (ids < 100 for lower-case text), so encodings are easy to write down.
  t.encode = [](std::string_view s) {
    Ids ids;
    for (char ch : s) ids.push_back(static_cast<unsigned char>(ch) - 'a');
    return ids;
  };
  t.token_id = [specials](std::string_view s) -> std::optional<std::int64_t> {
    auto it = specials.find(std::string(s));
    if (it == specials.end()) return std::nullopt;
    return it->second;
  };
  return t;
}

const std::map<std::string, std::int64_t> kAll{{"<|tts|>", 100}, {"<|text|>", 101}, {"<|audio|>", 102},
                                               {"<|ref_audio|>", 103}, {"<|ref_text|>", 104}};

std::vector<std::vector<std::int64_t>> ref(std::int64_t T, std::int64_t K) {
  std::vector<std::vector<std::int64_t>> codes;
  for (std::int64_t t = 0; t < T; ++t) {
    codes.emplace_back();
    for (std::int64_t c = 0; c < K; ++c) codes.back().push_back((t * 7 + c) % 1024);
  }
  return codes;
}

}  // namespace

TEST_CASE("tts prompt: zero-shot layout", "[higgs][tts]") {
  const TtsPrompt p = build_tts_prompt(mock(kAll), "abc", "", {}, 8, 1024);
  CHECK(p.ids == Ids{100, 101, 0, 1, 2, 102});
  CHECK(p.slot_positions.empty());
  CHECK(p.slot_rows.empty());
  // A transcript without reference audio is ignored.
  CHECK(build_tts_prompt(mock(kAll), "abc", "xyz", {}, 8, 1024).ids == p.ids);
}

TEST_CASE("tts prompt: voice clone, with and without transcript", "[higgs][tts]") {
  const auto codes = ref(3, 8);
  const TtsPrompt p = build_tts_prompt(mock(kAll), "ab", "cd", codes, 8, 1024);
  // <|tts|> <|ref_text|> tok(cd) <|ref_audio|> slot x R <|text|> tok(ab) <|audio|>, R = 3 + 7.
  Ids want{100, 104, 2, 3, 103};
  for (int i = 0; i < 10; ++i) want.push_back(0);
  for (std::int64_t x : {101, 0, 1, 102}) want.push_back(x);
  CHECK(p.ids == want);
  REQUIRE(p.slot_positions.size() == 10);
  for (std::size_t i = 0; i < 10; ++i) CHECK(p.slot_positions[i] == static_cast<std::int64_t>(5 + i));
  CHECK(p.slot_rows == apply_delay_pattern(codes, 8, 1024, 1025));
  CHECK(p.slot_rows[0] == std::vector<std::int64_t>{codes[0][0], 1024, 1024, 1024, 1024, 1024, 1024, 1024});
  CHECK(p.slot_rows[9][7] == codes[2][7]);
  CHECK(p.slot_rows[9][0] == 1025);

  // Empty transcript, or a vocabulary without <|ref_text|> (older checkpoints): no transcript.
  auto no_ref_text = kAll;
  no_ref_text.erase("<|ref_text|>");
  for (const auto& q : {build_tts_prompt(mock(kAll), "ab", "", codes, 8, 1024),
                        build_tts_prompt(mock(no_ref_text), "ab", "cd", codes, 8, 1024)}) {
    Ids w{100, 103};
    for (int i = 0; i < 10; ++i) w.push_back(0);
    for (std::int64_t x : {101, 0, 1, 102}) w.push_back(x);
    CHECK(q.ids == w);
    CHECK(q.slot_positions.front() == 2);
  }
}

TEST_CASE("tts prompt: ids come from the tokenizer, never fixed", "[higgs][tts]") {
  const std::map<std::string, std::int64_t> other{{"<|tts|>", 151667}, {"<|text|>", 151672}, {"<|audio|>", 151670}};
  CHECK(build_tts_prompt(mock(other), "a", "", {}, 8, 1024).ids == Ids{151667, 151672, 0, 151670});
}

TEST_CASE("tts prompt: errors", "[higgs][tts]") {
  for (const char* missing : {"<|tts|>", "<|text|>", "<|audio|>"}) {
    auto specials = kAll;
    specials.erase(missing);
    try {
      build_tts_prompt(mock(specials), "a", "", {}, 8, 1024);
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains(missing));
    }
  }
  auto no_ref_audio = kAll;
  no_ref_audio.erase("<|ref_audio|>");
  CHECK_THROWS_AS(build_tts_prompt(mock(no_ref_audio), "a", "", ref(2, 8), 8, 1024), InputError);
  CHECK_NOTHROW(build_tts_prompt(mock(no_ref_audio), "a", "", {}, 8, 1024));
  CHECK_THROWS_AS(build_tts_prompt(mock(kAll), "", "", {}, 8, 1024), InputError);
  try {
    build_tts_prompt(mock(kAll), "a", "", {{1, 2, 3}}, 8, 1024, "voice.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::StartsWith("voice.json: frame 0 has 3 codes"));
  }
  auto bad = ref(2, 8);
  bad[1][4] = 1024;  // BOC is not a code
  CHECK_THROWS_WITH(build_tts_prompt(mock(kAll), "a", "", bad, 8, 1024, "voice.json"),
                    Catch::Matchers::Contains("voice.json: codes[1][4] = 1024 is outside [0, 1024)"));
}

}  // namespace zoo::higgs
