#include "zoo/server/speech_text.hpp"

#include <algorithm>

namespace zoo::engine {
namespace {

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Bytes of a sentence end at `at` (0: none): ASCII . ! ? ; or a full-width one (3 UTF-8 bytes).
std::size_t sentence_end(std::string_view text, std::size_t at) {
  const char c = text[at];
  if (c == '.' || c == '!' || c == '?' || c == ';') return 1;
  for (const std::string_view wide : {"\u3002", "\uff01", "\uff1f", "\uff1b"})
    if (text.substr(at, wide.size()) == wide) return wide.size();
  return 0;
}

bool closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}'; }

struct Word {
  std::size_t begin, end;
  bool ends_sentence, ends_clause;
};

std::vector<Word> words_of(std::string_view text) {
  std::vector<Word> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && space(text[i])) ++i;
    if (i == text.size()) break;
    Word w{i, i, false, false};
    while (i < text.size() && !space(text[i])) {
      if (const std::size_t n = sentence_end(text, i); n > 0) {
        i += n;
        while (i < text.size() && closer(text[i])) ++i;
        // A full-width end needs no space after it: the sentence (and this word) ends here.
        if (n > 1 || i == text.size() || space(text[i])) {
          w.ends_sentence = true;
          break;
        }
        continue;
      }
      ++i;
    }
    w.end = i;
    w.ends_clause = !w.ends_sentence && w.end > w.begin && text[w.end - 1] == ',';
    words.push_back(w);
  }
  return words;
}

}  // namespace

std::vector<std::string> split_speech_text(std::string_view text, std::size_t max_words) {
  max_words = std::max<std::size_t>(max_words, 1);
  const std::vector<Word> words = words_of(text);
  std::vector<std::string> pieces;
  std::size_t first = 0;  // the piece's first word
  while (first < words.size()) {
    // The longest run of whole sentences within the limit; else the last clause; else the limit.
    const std::size_t limit = std::min(words.size(), first + max_words);
    std::size_t cut = 0;
    for (std::size_t w = first; w < limit; ++w)
      if (words[w].ends_sentence || w + 1 == words.size()) cut = w + 1;
    if (cut == 0)
      for (std::size_t w = first; w < limit; ++w)
        if (words[w].ends_clause) cut = w + 1;
    if (cut == 0) cut = limit;
    pieces.emplace_back(text.substr(words[first].begin, words[cut - 1].end - words[first].begin));
    first = cut;
  }
  return pieces;
}

}  // namespace zoo::engine
