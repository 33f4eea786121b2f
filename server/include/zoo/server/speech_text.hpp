#pragma once
// Long speech inputs in pieces: a text-to-speech model speaks an utterance of a few sentences well
// and drifts over a page, so a long input is cut at sentence ends into pieces of about `max_words`
// words, each spoken with the same voice (sglang-omni cuts at about 60 words the same way).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace zoo::engine {

// The pieces of `text`, in order: whole sentences (ended by . ! ? ; or their full-width forms, with
// any closing quotes or brackets after them) gathered while they fit in `max_words`
// whitespace-separated words; a sentence longer than that is cut after its last comma within the
// limit, else after `max_words` words. Whitespace between pieces is dropped and inside them kept;
// the pieces joined with single spaces hold every word of the text. A text of only whitespace gives
// none.
std::vector<std::string> split_speech_text(std::string_view text, std::size_t max_words = 60);

}  // namespace zoo::engine
