#pragma once
// What `zoo tts --encode/--ref-audio` and `zoo bench --encode` share: finding the model's
// waveform-to-codes encoder, reading only its weights, and turning a sound file into the samples
// it takes.
#include <string>
#include <vector>

#include "zoo/codec.hpp"
#include "zoo/runtime.hpp"

namespace zoo::cli {

// The model's codes-to-waveform decoder (built from tensor headers; nothing read yet), or an
// InputError naming the model when its plugin holds none.
CodeDecoder& code_decoder_of(OpenedModel& opened);

// Checks the decoder's own load plan and reads its weights (not the rest of the model's).
void load_code_decoder(OpenedModel& opened, CodeDecoder& decoder);

// The model's encoder (built from tensor headers; nothing read yet), or an InputError naming the
// model when its plugin holds none.
CodeEncoder& code_encoder_of(OpenedModel& opened);

// Checks the encoder's own load plan and reads its weights (not the rest of the model's).
void load_code_encoder(OpenedModel& opened, CodeEncoder& encoder);

// The samples of sound file `path` as the encoder takes them: downmixed to mono, resampled to its
// rate by libsoxr when the file has another (said on stderr as "COMMAND: ..." unless quiet). Empty,
// non-finite or too long sound is an InputError naming `flag` and the file, before anything is
// resampled or loaded.
std::vector<float> read_reference_sound(const std::string& command, const std::string& flag, const std::string& path,
                                        const CodeEncoder& encoder, bool quiet);

}  // namespace zoo::cli
