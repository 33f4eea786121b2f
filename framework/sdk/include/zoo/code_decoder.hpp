#pragma once
// The decoder half of a neural codec that some models own: discrete code frames in, a mono
// waveform out. `zoo tts --codes` runs it on its own, without the model's other weights.
#include <cstdint>
#include <string>
#include <vector>

#include "zoo/diagnostic_hook.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/tensor.hpp"

namespace zoo {

// Mono float32 samples, nominally in [-1, 1] (decoders do not clamp; writers do).
struct Waveform {
  std::vector<float> samples;
  int sample_rate = 0;
};

class CodeDecoder {
 public:
  virtual ~CodeDecoder() = default;
  virtual std::int64_t num_codebooks() const = 0;      // columns of a code frame
  // Codes are [0, codebook_size()); the next two values (BOC, EOC) decode as 0; anything else is
  // an InputError from decode().
  virtual std::int64_t codebook_size() const = 0;
  virtual std::int64_t samples_per_frame() const = 0;
  virtual int sample_rate() const = 0;
  virtual std::string summary() const = 0;  // one line for humans: geometry as derived
  // The tensors it reads, named as in the owning model's weight_source().
  virtual std::vector<TensorRequirement> requirements() const = 0;
  // Reads its weights (independently of Model::load); call after its load plan is clean.
  virtual void load() = 0;
  // codes: I64 or I32 host tensor [frames, num_codebooks()], frames >= 1. Returns exactly
  // samples_per_frame() * frames samples. Negative codes are an InputError. Taps (float32,
  // [steps, channels]) go to `hook` when given.
  virtual Waveform decode(const TensorView& codes, DiagnosticHook* hook = nullptr) const = 0;
  // Frames of context on each side that a piece of frames needs for its samples to equal the whole
  // decode's (the receptive field, in frames): what decoding while frames arrive waits for.
  virtual std::int64_t context_frames() const = 0;
};

}  // namespace zoo
