#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "tts_loop.hpp"
#include "zoo/model.hpp"

namespace zoo::higgs {

// The language-model side of Higgs TTS over a Session whose forward() returns the audio logits
// [K, V] of the last position as `logits` (HiggsSession): each row is fed back as one position
// whose embedding is sum_c E[code_c + c*V], through the Session's embedding overrides.
class SessionRowModel : public AudioRowModel {
 public:
  using EmbedFn = std::function<void(const CodeRow& row, float* out)>;  // writes `hidden` floats
  SessionRowModel(Session& session, EmbedFn embed, std::int64_t hidden) : session_(session), embed_(std::move(embed)), hidden_(hidden) {}
  std::vector<float> feed(const CodeRow& row) override;

 private:
  Session& session_;
  EmbedFn embed_;
  std::int64_t hidden_;
};

struct TtsShape {
  std::int64_t num_codebooks = 0;  // K
  std::int64_t codebook_size = 0;  // V (codes V-2, BOC V-2, EOC V-1)
  std::int64_t hidden = 0;
  std::int64_t max_context = 0;    // positions a session holds
};

// The codec's frame rate (24 kHz, 960 samples a frame), for progress in seconds of audio.
inline constexpr double kCodecFramesPerSecond = 25.0;

// Model::synthesize for Higgs: builds the prompt (reference codes in delay layout in the audio
// slots), prefills it in `session`, runs the sampler loop and returns codec frames.
SpeechResult synthesize_speech(Session& session, const SessionRowModel::EmbedFn& embed, const TtsShape& shape,
                               const SpeechRequest& request, const SpeechProgressFn& progress);

}  // namespace zoo::higgs
