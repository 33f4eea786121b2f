#pragma once
// Sound files through libsndfile.
#include <filesystem>
#include <span>
#include <vector>

namespace zoo {

enum class SoundFormat { Wav, Flac };

// FLAC when the name ends in ".flac" (any case), else WAV.
SoundFormat sound_format_for(const std::filesystem::path& path);

// Writes mono float samples as 16-bit PCM (WAV or FLAC, per sound_format_for). Samples are
// clipped to [-1, 1] first (libsndfile's clipping mode: values past full scale saturate instead
// of wrapping). The file appears atomically: written to a temporary file in the same directory,
// then renamed over `path`. Throws InputError naming the path on failure; a failed write leaves
// no file behind.
void write_sound_file(const std::filesystem::path& path, std::span<const float> samples, int sample_rate);

// What read_sound_file returns: the samples of the first channel as float in [-1, 1].
struct SoundFileContents {
  std::vector<float> samples;
  int sample_rate = 0;
  int channels = 0;
  SoundFormat format = SoundFormat::Wav;
};
SoundFileContents read_sound_file(const std::filesystem::path& path);

}  // namespace zoo
