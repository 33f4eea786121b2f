// TextStream (zoo/engine/text_stream.hpp): detokenization and stop strings as tokens arrive, on the
// Qwen tokenizer of the tiny text fixture. Whatever the split, the pieces handed out add up to the
// whole text, each is valid UTF-8, and a stop string cuts the text before its first match, also
// when it spans tokens.
#include <string>
#include <vector>

#include "qwen3/fixture_test_util.hpp"
#include "zoo/engine/text_stream.hpp"

namespace zoo::ptest {
namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer t = Tokenizer::from_file(fixture_dir("qwen3-tiny-text") / "tokenizer.json");
  return t;
}

// Streams `ids` through a TextStream, taking after each token; the pieces and the final text.
struct Streamed {
  std::vector<std::string> pieces;
  std::string whole;
  bool stopped = false;
};
Streamed stream(const std::vector<std::int64_t>& ids, std::vector<std::string> stop) {
  engine::TextStream text(&tokenizer(), std::move(stop));
  Streamed out;
  for (const auto id : ids) {
    const bool stopped = text.push(id);
    out.pieces.push_back(text.take(stopped));
    if (stopped) break;
  }
  text.finish();
  out.pieces.push_back(text.take(true));
  out.stopped = text.stopped();
  out.whole = text.text();
  return out;
}

std::string joined(const Streamed& s) {
  std::string all;
  for (const auto& p : s.pieces) all += p;
  return all;
}

TEST_CASE("text stream: the pieces add up to the decoded text, each valid UTF-8, special tokens skipped") {
  // Characters of 1 to 4 bytes, split across byte-level tokens.
  const std::string text = "Hé, naïve café — 数据 🦊 done";
  auto ids = tokenizer().encode(text);
  const auto special = tokenizer().encode("<|im_end|>");
  REQUIRE(special.size() == 1);
  REQUIRE(tokenizer().is_special(special[0]));
  ids.insert(ids.begin() + 3, special[0]);
  const Streamed s = stream(ids, {});
  CHECK(joined(s) == text);
  CHECK(s.whole == text);
  CHECK_FALSE(s.stopped);
  for (const auto& piece : s.pieces) CHECK(is_valid_utf8(piece));
}

TEST_CASE("text stream: a stop string cuts the text before its first match, across tokens, and is never handed "
          "out") {
  const std::string text = "The cat sat on the mat. The dog sat too.";
  const auto ids = tokenizer().encode(text);
  for (const std::string stop : {"sat", " on the m", ".", "dog sat too.", "t."}) {
    INFO("stop " << stop);
    const Streamed s = stream(ids, {stop, "never there"});
    const auto at = text.find(stop);
    CHECK(s.stopped);
    CHECK(s.whole == text.substr(0, at));
    CHECK(joined(s) == text.substr(0, at));
    // Before the stop, nothing that could begin it was handed out early: no piece ends inside it.
    std::string sent;
    for (const auto& piece : s.pieces) {
      sent += piece;
      CHECK(sent.size() <= at);
    }
  }
  const Streamed none = stream(ids, {"zebra"});
  CHECK_FALSE(none.stopped);
  CHECK(joined(none) == text);
}

TEST_CASE("text stream: without a tokenizer there is no text") {
  engine::TextStream text(nullptr, {"x"});
  CHECK_FALSE(text.push(5));
  text.finish();
  CHECK(text.take(true).empty());
}

}  // namespace
}  // namespace zoo::ptest
