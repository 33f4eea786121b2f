#include "zoo/encoder_input.hpp"

#include <fmt/format.h>

#include <cmath>

#include "zoo/error.hpp"

namespace zoo {

std::vector<float> encoder_input(SoundFileContents sound, const CodeEncoder& encoder, const std::string& name,
                                 std::string* how) {
  if (sound.samples.empty()) throw InputError(fmt::format("{}: no samples", name));
  const double seconds = static_cast<double>(sound.samples.size()) / sound.sample_rate;
  const double max_seconds = static_cast<double>(encoder.max_samples()) / encoder.sample_rate();
  if (seconds > max_seconds)
    throw InputError(fmt::format("{}: {:.1f} s of sound; the codec encoder takes at most {:.0f} s (cut the reference)",
                                 name, seconds, max_seconds));
  for (std::size_t i = 0; i < sound.samples.size(); ++i)
    if (!std::isfinite(sound.samples[i]))
      throw InputError(fmt::format("{}: sample {} is not a finite number", name, i));
  std::string note = sound.channels == 1 ? "mono" : fmt::format("{} channels downmixed to mono", sound.channels);
  if (sound.sample_rate != encoder.sample_rate()) {
    sound.samples = resample_sound(sound.samples, sound.sample_rate, encoder.sample_rate());
    note += fmt::format(", resampled {} -> {} Hz by libsoxr (high quality)", sound.sample_rate, encoder.sample_rate());
  } else {
    note += fmt::format(", {} Hz as is", sound.sample_rate);
  }
  if (how) *how = fmt::format("{:.2f} s, {}", seconds, note);
  return std::move(sound.samples);
}

}  // namespace zoo
