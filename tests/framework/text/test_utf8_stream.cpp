#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "zoo/utf8_stream.hpp"

using namespace zoo;

namespace {

std::string unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

// (bytes, Python's bytes.decode("utf-8", "replace") of them), both hex; generated with CPython 3.
const std::vector<std::pair<std::string, std::string>> kGoldens = {
    {"68656c6c6f", "68656c6c6f"},
    {"68c3a96c6c6f20e4b896e7958c20f09f988021", "68c3a96c6c6f20e4b896e7958c20f09f988021"},
    {"65cc8120f09f91a8e2808df09f91a9e2808df09f91a7", "65cc8120f09f91a8e2808df09f91a9e2808df09f91a7"},
    {"fffe616263", "efbfbdefbfbd616263"},
    {"618062", "61efbfbd62"},
    {"e4b8", "efbfbd"},
    {"e4b878", "efbfbd78"},
    {"f09f98", "efbfbd"},
    {"f09f9880f09f", "f09f9880efbfbd"},
    {"c0af", "efbfbdefbfbd"},
    {"e080af", "efbfbdefbfbdefbfbd"},
    {"eda080", "efbfbdefbfbdefbfbd"},
    {"f4908080", "efbfbdefbfbdefbfbdefbfbd"},
    {"f5616263", "efbfbd616263"},
    {"e282ace282", "e282acefbfbd"},
    {"c3", "efbfbd"},
    {"", ""},
};

}  // namespace

TEST_CASE("Utf8Stream holds back a character split across pieces", "[utf8]") {
  Utf8Stream s;
  CHECK(s.push("ab") == "ab");
  CHECK(s.push("\xE4") == "");  // first byte of U+4E16
  CHECK(s.pending() == 1);
  CHECK(s.push("\xB8") == "");
  CHECK(s.push("\x96z") == "\xE4\xB8\x96z");
  CHECK(s.pending() == 0);
  CHECK(s.push("\xF0\x9F\x98") == "");  // 3 of 4 bytes of an emoji
  CHECK(s.push("\x80") == "\xF0\x9F\x98\x80");
  CHECK(s.finish() == "");
}

TEST_CASE("Utf8Stream matches Python's replace decoding whatever the split, valid at every flush", "[utf8]") {
  for (const auto& [in_hex, want_hex] : kGoldens) {
    const std::string in = unhex(in_hex), want = unhex(want_hex);
    INFO("bytes " << in_hex);
    // Every way of cutting the input into three pieces, plus one byte at a time.
    for (std::size_t a = 0; a <= in.size(); ++a)
      for (std::size_t b = a; b <= in.size(); ++b) {
        Utf8Stream s;
        std::string got;
        for (const auto& piece : {in.substr(0, a), in.substr(a, b - a), in.substr(b)}) {
          const auto flushed = s.push(piece);
          CHECK(is_valid_utf8(flushed));
          got += flushed;
        }
        got += s.finish();
        CHECK(got == want);
      }
    Utf8Stream s;
    std::string got;
    for (char c : in) got += s.push(std::string(1, c));
    got += s.finish();
    CHECK(got == want);
    CHECK(is_valid_utf8(want));
  }
}

TEST_CASE("is_valid_utf8 rejects overlongs, surrogates, truncation and stray bytes", "[utf8]") {
  CHECK(is_valid_utf8(""));
  CHECK(is_valid_utf8("plain \xC3\xA9 \xF4\x8F\xBF\xBF"));
  CHECK_FALSE(is_valid_utf8("\xC0\xAF"));
  CHECK_FALSE(is_valid_utf8("\xED\xA0\x80"));
  CHECK_FALSE(is_valid_utf8("\xE4\xB8"));
  CHECK_FALSE(is_valid_utf8("a\x80"));
  CHECK_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));
}
