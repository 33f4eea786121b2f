// TextStream (zoo/engine/text_stream.hpp).
#include "zoo/engine/text_stream.hpp"

#include <algorithm>

namespace zoo::engine {

TextStream::TextStream(const Tokenizer* tokenizer, std::vector<std::string> stop)
    : tokenizer_(tokenizer), stop_(std::move(stop)) {
  for (const auto& s : stop_) longest_stop_ = std::max(longest_stop_, s.size());
}

bool TextStream::push(std::int64_t id) {
  if (stopped_ || !tokenizer_ || tokenizer_->is_special(id)) return stopped_;
  if (const auto bytes = tokenizer_->token_bytes(id)) text_ += utf8_.push(*bytes);
  return find_stop();
}

void TextStream::finish() {
  if (stopped_ || !tokenizer_) return;
  text_ += utf8_.finish();
  find_stop();
}

bool TextStream::find_stop() {
  std::size_t best = std::string::npos;
  for (const auto& s : stop_) {
    const auto at = text_.find(s, searched_);
    if (at != std::string::npos) best = std::min(best, at);
  }
  if (best != std::string::npos) {
    text_.resize(best);
    stopped_ = true;
    return true;
  }
  // A stop string may still begin in the last longest - 1 bytes; none can begin before them.
  const std::size_t keep = std::max<std::size_t>(longest_stop_, 1) - 1;
  if (text_.size() > keep) searched_ = std::max(searched_, text_.size() - keep);
  return false;
}

std::string TextStream::take(bool over) {
  std::size_t until = text_.size();
  if (!over && !stopped_) {
    until = std::min(until, searched_);
    while (until > sent_ && until < text_.size() && (static_cast<unsigned char>(text_[until]) & 0xC0) == 0x80) --until;
  }
  if (until <= sent_) return {};
  std::string out = text_.substr(sent_, until - sent_);
  sent_ = until;
  return out;
}

}  // namespace zoo::engine
