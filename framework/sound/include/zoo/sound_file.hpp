#pragma once
// Sound files through libsndfile; resampling through libsoxr.
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

namespace zoo {

enum class SoundFormat { Wav, Flac, OggVorbis, OggOpus, Mp3 };

// The format the name's extension (any case) asks for: .wav or none (so /dev/stdout works), .flac,
// .ogg/.oga (Vorbis), .opus, .mp3. nullopt for any other extension: writing WAV bytes under a
// name that says MP3 would mislead every player.
std::optional<SoundFormat> sound_format_for(const std::filesystem::path& path);

// Writes mono float samples in the format sound_format_for names (WAV and FLAC as 16-bit PCM).
// Samples are clipped to [-1, 1] first (libsndfile's clipping mode: values past full scale
// saturate instead of wrapping). The file is encoded in memory and written through an
// AtomicFileWriter (output_file.hpp): complete or absent, the target's mode kept, a device or
// FIFO written directly. Throws InputError naming the path on failure (an unknown extension
// included); a failed write leaves no file behind.
void write_sound_file(const std::filesystem::path& path, std::span<const float> samples, int sample_rate);
// The samples as 16-bit little-endian PCM bytes, as write_sound_file stores them in a WAV (full
// scale 1.0 is 32767, saturated past it; NaN is 0): what `zoo tts --stream` writes.
std::vector<unsigned char> pcm16_le(std::span<const float> samples);

// What read_sound_file returns: the samples of the first channel as float in [-1, 1].
struct SoundFileContents {
  std::vector<float> samples;
  int sample_rate = 0;
  int channels = 0;
  SoundFormat format = SoundFormat::Wav;
};
SoundFileContents read_sound_file(const std::filesystem::path& path);
// The same with every channel averaged into one (a mono file as is).
SoundFileContents read_sound_file_downmixed(const std::filesystem::path& path);

// `samples` at `from` Hz resampled to `to` Hz by libsoxr (its high-quality preset, linear phase):
// round(n * to / from) samples; from == to returns them unchanged. InputError on a bad rate.
std::vector<float> resample_sound(std::span<const float> samples, int from, int to);

}  // namespace zoo
