#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "tts_loop.hpp"
#include "tts_sampler.hpp"
#include "zoo/model.hpp"
#include "tts_prompt.hpp"
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

// One Higgs TTS request as a sequence any scheduler drives (zoo::SpeechSequence): the prompt
// (reference codes in delay layout in the audio slots), then one position per generated row fed
// back through the audio row table. Its steps speak the Higgs model's contract, for a Session or a
// Runner alike: with `logits` the audio logits [K, V] come back as extra "audio_logits", or with
// head_sample the K codes picked on the device (the row's uniforms drawn here, so only K ids cross
// per row); where the device cannot pick, the TtsSampler picks the logits on the host with the same
// uniforms: the same codes and the same stream either way. The delay state machine decides the end.
class HiggsSpeechSequence : public SpeechSequence {
 public:
  // device_sampling false: never ask the device to pick (the host path, e.g. to compare against).
  HiggsSpeechSequence(const TtsShape& shape, const SpeechRequest& request, bool device_sampling = true);

  std::int64_t known() const override;
  std::int64_t max_positions() const override { return P_ + max_steps_ - 1; }
  ForwardStep step(std::int64_t begin, std::int64_t end) override;
  bool accept(const ForwardResult& result) override;
  bool done() const override { return done_; }
  SpeechProgress progress() override;
  SpeechResult result() const override;
  std::int64_t device_rows() const { return device_rows_; }  // rows the device picked

 private:
  TtsShape shape_;
  TtsSampler sampler_;
  DelayStateMachine machine_;
  bool device_sampling_;
  TtsPrompt prompt_;
  std::int64_t P_ = 0, max_steps_ = 0;
  std::vector<CodeRow> rows_;  // emitted, in delay layout; all but the last are fed back
  bool done_ = false, finished_ = false;
  std::int64_t device_rows_ = 0;
  // The last step's inputs (its spans point here) and the pending row's uniforms.
  std::vector<std::int64_t> ids_, table_positions_, table_ids_;
  std::vector<double> u_;
  std::int64_t u_row_ = -1;  // the row u_ was drawn for
  std::int64_t sent_ = 0;    // frames handed out by progress()
  std::vector<CodeRow> fresh_;
};

// How synthesize_speech picked its rows (for tests and measurements).
struct SynthesisStats {
  std::int64_t device_rows = 0;  // rows the session picked on its device
};

// Model::synthesize for Higgs: a HiggsSpeechSequence driven through `session` alone (the prompt in
// one step, then a step per row), returning codec frames. Rows are picked on the session's device
// where it can unless `device_sampling` is off.
SpeechResult synthesize_speech(Session& session, const TtsShape& shape, const SpeechRequest& request,
                               const SpeechProgressFn& progress, bool device_sampling = true,
                               SynthesisStats* stats = nullptr);

}  // namespace zoo::higgs
