#pragma once
// A generated sequence's text as its tokens arrive (detokenization and stop strings), for clients of
// the engine that stream text: each token's bytes (special tokens skipped) go through a UTF-8
// stream, so every piece handed out is valid UTF-8; stop strings are searched in what is not yet
// handed out, and while the sequence runs the tail that could still begin one is held back. The
// text handed out piece by piece adds up to the whole text exactly. Not thread-safe: one owner
// (zoo serve keeps one per choice on its connection's thread, so the engine steps on meanwhile).
#include <cstdint>
#include <string>
#include <vector>

#include "zoo/tokenizer.hpp"
#include "zoo/utf8_stream.hpp"

namespace zoo::engine {

class TextStream {
 public:
  // No tokenizer: no text (every push adds nothing). Stop strings must be non-empty.
  explicit TextStream(const Tokenizer* tokenizer = nullptr, std::vector<std::string> stop = {});
  // Adds a token's text; true when a stop string ends the text (it is cut before the match).
  bool push(std::int64_t id);
  // The sequence ended: bytes of an unfinished character become U+FFFD, and the stop strings are
  // searched once more.
  void finish();
  // What may be handed out now: all new text but a tail that could still start a stop string (cut
  // back to a character boundary), or everything new once `over` (or stopped).
  std::string take(bool over);
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }

 private:
  bool find_stop();

  const Tokenizer* tokenizer_;
  std::vector<std::string> stop_;
  std::size_t longest_stop_ = 0;
  Utf8Stream utf8_;
  std::string text_;         // all of it so far (cut at a stop string)
  std::size_t sent_ = 0;     // bytes of text_ already handed out
  std::size_t searched_ = 0; // stop strings cannot start before this byte
  bool stopped_ = false;
};

}  // namespace zoo::engine
