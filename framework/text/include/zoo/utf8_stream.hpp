#pragma once
#include <string>
#include <string_view>

namespace zoo {

// Turns a stream of byte pieces (what a byte-level tokenizer decodes one token at a time) into text
// that is valid UTF-8 at every flush: a multi-byte character split across pieces is held back until
// its last byte arrives. Bytes that can never become a character are replaced by U+FFFD, one per
// maximal ill-formed subpart, which is what Python's bytes.decode("utf-8", "replace") (and so a
// Hugging Face decode of the whole sequence) produces.
class Utf8Stream {
 public:
  // Appends `bytes`; returns the text now complete (possibly empty).
  std::string push(std::string_view bytes);
  // The end of the stream: an incomplete character still held back becomes U+FFFD.
  std::string finish();
  // Bytes held back (at most 3).
  std::size_t pending() const { return pending_.size(); }

 private:
  std::string pending_;
};

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view text);

}  // namespace zoo
