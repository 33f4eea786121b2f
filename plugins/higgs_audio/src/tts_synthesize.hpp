#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "tts_loop.hpp"
#include "zoo/model.hpp"

namespace zoo::higgs {

struct TtsShape {
  std::int64_t num_codebooks = 0;  // K
  std::int64_t codebook_size = 0;  // V (codes V-2, BOC V-2, EOC V-1)
  std::int64_t hidden = 0;
  std::int64_t max_context = 0;    // positions a session holds
  int table = -1;                  // the audio row table (Model::add_row_table) of the session's body
};

// The language-model side of Higgs TTS over a Session whose forward() returns the audio logits
// [K, V] of the last position as extra "audio_logits" (HiggsSession): each row is fed back as one
// position whose embedding is sum_c E[code_c + c*V], the rows summed from the audio row table on
// the model's device (ForwardStep::table_rows).
class SessionRowModel : public AudioRowModel {
 public:
  SessionRowModel(Session& session, const TtsShape& shape) : session_(session), shape_(shape) {}
  std::vector<float> feed(const CodeRow& row) override;

 private:
  Session& session_;
  TtsShape shape_;
};

// The codec's frame rate (24 kHz, 960 samples a frame), for progress in seconds of audio.
inline constexpr double kCodecFramesPerSecond = 25.0;

// Model::synthesize for Higgs: builds the prompt (reference codes in delay layout in the audio
// slots), prefills it in `session`, runs the sampler loop and returns codec frames.
SpeechResult synthesize_speech(Session& session, const TtsShape& shape, const SpeechRequest& request,
                               const SpeechProgressFn& progress);

}  // namespace zoo::higgs
