#pragma once
// Decoding code frames while they are still being generated: the waveform comes out in chunks,
// each decoded from a window with the decoder's context_frames() of context on both sides, so that
// the chunks put end to end equal the whole sequence's decode (the decoder is convolutional: a
// sample depends on the frames within its receptive field only). A chunk is decoded as soon as
// its right context exists; the last ones when the stream ends.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "zoo/code_decoder.hpp"

namespace zoo {

// Chunk lengths in frames: a short first one (the first samples wait for it plus the context), then
// longer ones, since each chunk also decodes 2 x context frames it does not keep.
inline const std::vector<std::int64_t> kStreamChunkFrames = {4, 8, 16, 32, 64, 128};

class CodeStream {
 public:
  // `sink` gets each chunk's samples, in order. `chunks`: the lengths of the first chunks, the
  // last repeated (every entry >= 1).
  CodeStream(const CodeDecoder& decoder, std::function<void(std::span<const float>)> sink,
             std::vector<std::int64_t> chunks = kStreamChunkFrames);

  // Appends frames ([num_codebooks] each) and decodes every chunk whose right context now exists.
  void push(std::span<const std::vector<std::int64_t>> frames);
  // Decodes the rest (the stream's end is the whole decode's end: no context is missing there).
  void finish();

  std::int64_t frames() const { return static_cast<std::int64_t>(codes_.size()) / K_; }
  std::int64_t frames_decoded() const { return done_; }
  std::int64_t chunks_decoded() const { return chunk_; }
  // How many frames had been pushed when the first chunk went out (-1: none yet).
  std::int64_t frames_at_first_chunk() const { return first_at_; }

 private:
  std::int64_t next_chunk() const;
  void decode_chunk(std::int64_t end);

  const CodeDecoder& decoder_;
  std::function<void(std::span<const float>)> sink_;
  std::vector<std::int64_t> chunks_;
  std::int64_t K_, context_;
  std::vector<std::int64_t> codes_;  // [frames, K], every frame pushed so far
  std::int64_t done_ = 0;            // frames whose samples went to the sink
  std::int64_t chunk_ = 0;
  std::int64_t first_at_ = -1;
};

}  // namespace zoo
