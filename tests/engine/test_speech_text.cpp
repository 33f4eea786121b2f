// split_speech_text: long speech inputs cut at sentence ends into pieces of at most N words.
#include <catch2/catch.hpp>

#include <sstream>

#include "zoo/server/speech_text.hpp"

namespace zoo::engine {
namespace {

std::size_t words(const std::string& s) {
  std::istringstream in(s);
  std::size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

TEST_CASE("speech text: sentences are gathered into pieces within the word limit", "[engine][speech]") {
  using V = std::vector<std::string>;
  CHECK(split_speech_text("Hello there.", 60) == V{"Hello there."});
  CHECK(split_speech_text("  \n ", 60).empty());
  CHECK(split_speech_text("One two. Three four! Five six? Seven.", 4) == V{"One two. Three four!", "Five six? Seven."});
  // Closing quotes stay with their sentence; a dot inside a word (3.5) ends nothing, one before a
  // space does (an abbreviation too: a rule of thumb, not a parser).
  CHECK(split_speech_text("He said \"stop.\" It cost 3.5 dollars, e.g. a lot.", 3) ==
        V{"He said \"stop.\"", "It cost 3.5", "dollars, e.g.", "a lot."});
  // A long sentence is cut after its last comma within the limit, else at the limit.
  CHECK(split_speech_text("a b c, d e f g h", 5) == V{"a b c,", "d e f g h"});
  CHECK(split_speech_text("a b c d e f g", 3) == V{"a b c", "d e f", "g"});
  // Full-width ends need no space after them.
  CHECK(split_speech_text("\u4f60\u597d\u3002\u518d\u89c1\uff01", 1) == V{"\u4f60\u597d\u3002", "\u518d\u89c1\uff01"});
  // Inner whitespace is kept, the words all there, every piece within the limit.
  std::string text;
  for (int i = 0; i < 300; ++i) text += "word" + std::to_string(i) + (i % 7 == 6 ? ". " : i % 5 == 4 ? ", " : "  ");
  const auto pieces = split_speech_text(text, 60);
  std::size_t total = 0;
  for (const auto& p : pieces) {
    CHECK(words(p) <= 60);
    CHECK(words(p) >= 1);
    total += words(p);
  }
  CHECK(total == 300);
  CHECK(pieces.size() >= 5);
  CHECK(pieces.front().back() == '.');  // sentence ends where sentences fit
}

}  // namespace
}  // namespace zoo::engine
