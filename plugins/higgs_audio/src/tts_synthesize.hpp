#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "tts_loop.hpp"
#include "tts_sampler.hpp"
#include "zoo/model.hpp"
#include "zoo/speech.hpp"

namespace zoo::higgs {

struct TtsShape {
  std::int64_t num_codebooks = 0;  // K
  std::int64_t codebook_size = 0;  // V (codes V-2, BOC V-2, EOC V-1)
  std::int64_t hidden = 0;
  std::int64_t max_context = 0;    // positions a session holds
  int table = -1;                  // the audio row table (the body's RowTables extension) of the session's body
  double frames_per_second = 25.0; // of the codec the frames are for (the released one: 24 kHz / 960)
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

// Rows picked by a TtsSampler from a session's forward steps. Each step asks the session to pick
// the K codes on its device (OutputRequest::head_sample, the row's uniforms drawn here), so only
// K ids cross per row; a session that cannot returns the audio logits instead and the sampler
// picks them on the host with the same uniforms: the same codes and the same stream either way.
class SessionRowSampler {
 public:
  // on_device false: never ask (the host path, e.g. to compare against).
  SessionRowSampler(Session& session, const TtsShape& shape, TtsSampler& sampler, bool on_device = true)
      : session_(session), shape_(shape), sampler_(sampler), on_device_(on_device) {}
  // The codes of the next row after running `step` (its outputs are set here).
  CodeRow next(ForwardStep step);
  // The codes after feeding `row` back as one position (as SessionRowModel::feed).
  CodeRow feed(const CodeRow& row);
  std::int64_t device_rows() const { return device_rows_; }  // rows the session picked itself

 private:
  Session& session_;
  TtsShape shape_;
  TtsSampler& sampler_;
  bool on_device_;
  std::int64_t device_rows_ = 0;
};

// How synthesize_speech picked its rows (for tests and measurements).
struct SynthesisStats {
  std::int64_t device_rows = 0;  // rows the session picked on its device
};

// Model::synthesize for Higgs: builds the prompt (reference codes in delay layout in the audio
// slots), prefills it in `session`, runs the sampler loop and returns codec frames. Rows are
// picked on the session's device where it can (SessionRowSampler) unless `device_sampling` is off.
SpeechResult synthesize_speech(Session& session, const TtsShape& shape, const SpeechRequest& request,
                               const SpeechProgressFn& progress, bool device_sampling = true,
                               SynthesisStats* stats = nullptr);

}  // namespace zoo::higgs
