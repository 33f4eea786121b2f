#pragma once
// The encoder half of a neural codec that some models own: a mono waveform in, discrete code
// frames out (what CodeDecoder decodes). `zoo tts --encode` runs it on its own; voice cloning
// from a sound file feeds its codes to the model as reference codes.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "zoo/diagnostic_hook.hpp"
#include "zoo/load_plan.hpp"

namespace zoo {

struct EncodedFrames {
  std::int64_t frames = 0, num_codebooks = 0;
  std::vector<std::int64_t> codes;  // [frames, num_codebooks], each in [0, codebook_size)
  // Per [frame, codebook]: how far the chosen code's score is ahead of the next best (a near tie
  // shows here); empty when the encoder has no such notion.
  std::vector<float> margins;
};

class CodeEncoder {
 public:
  virtual ~CodeEncoder() = default;
  virtual std::int64_t num_codebooks() const = 0;
  virtual std::int64_t codebook_size() const = 0;
  virtual int sample_rate() const = 0;              // the rate encode() takes its samples at
  virtual std::int64_t max_samples() const = 0;     // the longest input encode() accepts
  virtual std::string summary() const = 0;          // one line for humans: geometry as derived
  virtual std::vector<TensorRequirement> requirements() const = 0;
  virtual void load() = 0;                          // after its load plan is clean
  // samples: mono float32 at sample_rate(). Empty, non-finite, too short or too long input is an
  // InputError whose message starts with `what` (e.g. the file it came from). Taps (float32,
  // [steps, channels]) go to `hook` when given.
  virtual EncodedFrames encode(std::span<const float> samples, const std::string& what,
                              DiagnosticHook* hook = nullptr) const = 0;
};

}  // namespace zoo
