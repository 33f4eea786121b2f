#pragma once
// The codec extension: a model's own codes <-> waveform converters (a sound tokenizer).
#include <string_view>

#include "zoo/code_decoder.hpp"
#include "zoo/code_encoder.hpp"
#include "zoo/extension.hpp"

namespace zoo {

class Codec : public Extension {
 public:
  static constexpr std::string_view kName = "zoo.codec.v1";
  static constexpr std::string_view kLacking = "has no codec";
  // The codes-to-waveform decoder, or nullptr when the checkpoint holds none. Built on first call
  // from the checkpoint's tensor headers (InputError when they do not fit together); its weights
  // load separately, through CodeDecoder::load.
  virtual CodeDecoder* code_decoder() = 0;
  // The waveform-to-codes encoder, or nullptr when the checkpoint holds none; built and loaded
  // like code_decoder().
  virtual CodeEncoder* code_encoder() = 0;

 protected:
  ~Codec() = default;
};

}  // namespace zoo
