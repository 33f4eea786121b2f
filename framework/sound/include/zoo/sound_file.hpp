#pragma once
// Sound files through libsndfile; resampling through libsoxr.
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace zoo {

enum class SoundFormat { Wav, Flac, OggVorbis, OggOpus, Mp3 };

// The format the name's extension (any case) asks for: .wav or none (so /dev/stdout works), .flac,
// .ogg/.oga (Vorbis), .opus, .mp3. nullopt for any other extension: writing WAV bytes under a
// name that says MP3 would mislead every player.
std::optional<SoundFormat> sound_format_for(const std::filesystem::path& path);

// Writes mono float samples in the format sound_format_for names (WAV and FLAC as 16-bit PCM:
// exactly pcm16_le's integers; the lossy formats from the floats, with libsndfile's clipping mode:
// values past full scale saturate instead of wrapping). The file is encoded in memory and written through an
// AtomicFileWriter (output_file.hpp): complete or absent, the target's mode kept, a device or
// FIFO written directly. Throws InputError naming the path on failure (an unknown extension
// included); a failed write leaves no file behind.
void write_sound_file(const std::filesystem::path& path, std::span<const float> samples, int sample_rate);
// The same file's bytes in memory (`name` names it in messages; InputError as above).
std::vector<unsigned char> encode_sound(std::span<const float> samples, int sample_rate, SoundFormat format,
                                        const std::string& name);
// The samples as 16-bit little-endian PCM bytes, as write_sound_file stores them in a WAV or FLAC
// (x * 32768 rounded, saturated to [-32768, 32767], as libsndfile scales; NaN is 0): what `zoo tts --stream` writes.
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

// A sound file held in memory (sent in a request), every channel averaged into one; `name` names it
// in messages. The same limits and errors as read_sound_file.
SoundFileContents decode_sound(std::span<const unsigned char> bytes, const std::string& name);

// `samples` at `from` Hz resampled to `to` Hz by libsoxr (its high-quality preset, linear phase):
// round(n * to / from) samples; from == to returns them unchanged. InputError on a bad rate.
std::vector<float> resample_sound(std::span<const float> samples, int from, int to);

}  // namespace zoo
