#pragma once
// The speech extension: text to codec frames, in the model's own loop (the frames go to its codec,
// zoo/codec.hpp, for a waveform).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zoo/extension.hpp"
#include "zoo/sequence_driver.hpp"

namespace zoo {

// Text to speech (the Speech extension): text in, codec frames out. The caller supplies the
// tokenizer as two functions so the model builds its own prompt.
struct SpeechRequest {
  std::string text;
  std::string reference_text;                               // transcript of the reference (optional)
  std::vector<std::vector<std::int64_t>> reference_codes;   // [T, codebooks] frames of a voice to clone
  std::string reference_label = "reference codes";          // names them in messages (a file)
  std::function<std::vector<std::int64_t>(std::string_view)> encode;     // text -> ids, no specials added
  std::function<std::optional<std::int64_t>(std::string_view)> token_id;  // special token -> id
  float temperature = 0.8f;  // <= 1e-5: greedy
  int top_k = 50;            // 0: off
  float top_p = 1.0f;        // 1: off
  std::uint64_t seed = 0;
  std::int64_t max_steps = 1024;  // decode steps, the model's unit of the length limit
};

struct SpeechProgress {
  std::int64_t steps = 0;   // decode steps so far
  std::int64_t frames = 0;  // complete codec frames so far
  double seconds = 0;       // of speech in those frames
  // The frames completed since the previous call ([codebooks] each, ready for the codec, the same
  // values SpeechResult::frames will hold), so that a caller can decode while the model generates.
  std::span<const std::vector<std::int64_t>> new_frames;
};

struct SpeechResult {
  std::vector<std::vector<std::int64_t>> frames;  // [T, codebooks], ready for the codec
  std::int64_t prompt_tokens = 0;
  std::int64_t steps = 0;
  bool finished = false;  // the model ended the speech (else the length limit did)
  double frames_per_second = 0;
};

using SpeechProgressFn = std::function<void(const SpeechProgress&)>;

class Speech : public Extension {
 public:
  static constexpr std::string_view kName = "zoo.speech.v1";
  static constexpr std::string_view kLacking = "does not synthesize speech";
  virtual SpeechResult synthesize(const SpeechRequest& request, const SpeechProgressFn& progress = {}) = 0;

 protected:
  ~Speech() = default;
};

// One speech request as a sequence a scheduler drives (the SpeechSteps extension): the same prompt,
// sampler and stopping rule as Speech::synthesize, so a request gives the same frames alone or
// batched with others (for a seed).
class SpeechSequence : public SequenceDriver {
 public:
  // Decode steps and frames so far; new_frames: those completed since the previous call (each
  // handed out once).
  virtual SpeechProgress progress() = 0;
  // Once done(): every frame, as synthesize() returns them.
  virtual SpeechResult result() const = 0;
};

// Speech that many requests can share forward passes for: the model's batch Runner
// (Model::new_runner) runs any number of these sequences at once, each step a slice.
class SpeechSteps : public Extension {
 public:
  static constexpr std::string_view kName = "zoo.speech_steps.v1";
  static constexpr std::string_view kLacking = "does not synthesize speech in batches";
  // The request checked and its prompt built: InputError for what synthesize() refuses. The
  // sequence may not outlive the model.
  virtual std::unique_ptr<SpeechSequence> start_speech(const SpeechRequest& request) = 0;

 protected:
  ~SpeechSteps() = default;
};

}  // namespace zoo
