#pragma once
// Sound as a codec encoder takes it (voice cloning from a file or from a request's sound bytes).
#include <string>
#include <vector>

#include "zoo/code_encoder.hpp"
#include "zoo/sound_file.hpp"

namespace zoo {

// The samples of `sound` (mono) at the encoder's rate, resampled by libsoxr where the rate
// differs. Empty, non-finite or longer sound than the encoder takes is an InputError naming
// `name`. `how` (optional) gets a note for humans: channels, rate, what was done.
std::vector<float> encoder_input(SoundFileContents sound, const CodeEncoder& encoder, const std::string& name,
                                 std::string* how = nullptr);

}  // namespace zoo
