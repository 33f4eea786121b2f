#include "zoo/code_stream.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "zoo/error.hpp"

namespace zoo {

CodeStream::CodeStream(const CodeDecoder& decoder, std::function<void(std::span<const float>)> sink,
                       std::vector<std::int64_t> chunks)
    : decoder_(decoder), sink_(std::move(sink)), chunks_(std::move(chunks)), K_(decoder.num_codebooks()),
      context_(decoder.context_frames()) {
  if (chunks_.empty() || std::any_of(chunks_.begin(), chunks_.end(), [](std::int64_t n) { return n < 1; }))
    throw std::invalid_argument("CodeStream: chunk lengths must be >= 1");
  if (context_ < 0) throw std::invalid_argument("CodeStream: the decoder's context is negative");
}

std::int64_t CodeStream::next_chunk() const {
  return chunks_[static_cast<std::size_t>(std::min<std::int64_t>(chunk_, static_cast<std::int64_t>(chunks_.size()) - 1))];
}

void CodeStream::push(std::span<const std::vector<std::int64_t>> frames) {
  for (const auto& frame : frames) {
    if (static_cast<std::int64_t>(frame.size()) != K_)
      throw InputError(fmt::format("a streamed code frame has {} codes, the decoder takes {}", frame.size(), K_));
    codes_.insert(codes_.end(), frame.begin(), frame.end());
  }
  // A chunk is final once the frames its right edge reads exist.
  while (done_ + next_chunk() + context_ <= this->frames()) decode_chunk(done_ + next_chunk());
}

void CodeStream::finish() {
  while (done_ < frames()) decode_chunk(std::min(frames(), done_ + next_chunk()));
}

void CodeStream::decode_chunk(std::int64_t end) {
  const std::int64_t lo = std::max<std::int64_t>(0, done_ - context_), hi = std::min(frames(), end + context_);
  const TensorView window{codes_.data() + lo * K_, DType::I64, {hi - lo, K_}, Device{}};
  const Waveform wave = decoder_.decode(window);
  const std::int64_t spf = decoder_.samples_per_frame();
  if (static_cast<std::int64_t>(wave.samples.size()) != (hi - lo) * spf)
    throw std::logic_error("CodeStream: the decoder returned the wrong number of samples");
  sink_(std::span<const float>(wave.samples).subspan(static_cast<std::size_t>((done_ - lo) * spf),
                                                     static_cast<std::size_t>((end - done_) * spf)));
  if (chunk_ == 0) first_at_ = frames();
  done_ = end;
  ++chunk_;
}

}  // namespace zoo
