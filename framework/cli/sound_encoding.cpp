// Shared by `zoo tts` and `zoo bench` (sound_encoding.hpp).
#include "sound_encoding.hpp"

#include <fmt/format.h>

#include <cmath>

#include "run_helpers.hpp"
#include "zoo/error.hpp"
#include "zoo/sound_file.hpp"

namespace zoo::cli {

CodeEncoder& code_encoder_of(OpenedModel& opened) {
  Codec* codec = opened.model->extension<Codec>();
  CodeEncoder* encoder = codec ? codec->code_encoder() : nullptr;
  if (!encoder)
    throw InputError(fmt::format("{}: the checkpoint has no waveform-to-codes encoder (the {} plugin's model holds none "
                                 "here); give the voice as --ref-codes instead",
                                 opened.spec.file.string(), opened.model->info().plugin));
  return *encoder;
}

void load_code_encoder(OpenedModel& opened, CodeEncoder& encoder) {
  check_part_load_plan(opened, encoder.requirements(), "encoder");
  encoder.load();
}

std::vector<float> read_reference_sound(const std::string& command, const std::string& flag, const std::string& path,
                                        const CodeEncoder& encoder, bool quiet) {
  SoundFileContents sound = read_sound_file_downmixed(path);
  const std::string name = fmt::format("{} {}", flag, path);
  if (sound.samples.empty()) throw InputError(fmt::format("{}: no samples", name));
  const double seconds = static_cast<double>(sound.samples.size()) / sound.sample_rate;
  const double max_seconds = static_cast<double>(encoder.max_samples()) / encoder.sample_rate();
  if (seconds > max_seconds)
    throw InputError(fmt::format("{}: {:.1f} s of sound; the codec encoder takes at most {:.0f} s (cut the reference)",
                                 name, seconds, max_seconds));
  for (std::size_t i = 0; i < sound.samples.size(); ++i)
    if (!std::isfinite(sound.samples[i]))
      throw InputError(fmt::format("{}: sample {} is not a finite number", name, i));
  std::string how = sound.channels == 1 ? "mono" : fmt::format("{} channels downmixed to mono", sound.channels);
  if (sound.sample_rate != encoder.sample_rate()) {
    sound.samples = resample_sound(sound.samples, sound.sample_rate, encoder.sample_rate());
    how += fmt::format(", resampled {} -> {} Hz by libsoxr (high quality)", sound.sample_rate, encoder.sample_rate());
  } else {
    how += fmt::format(", {} Hz as is", sound.sample_rate);
  }
  if (!quiet) fmt::print(stderr, "{}: {}: {:.2f} s, {}\n", command, name, seconds, how);
  return sound.samples;
}

}  // namespace zoo::cli
