#include "zoo/sound_file.hpp"

#include <fmt/format.h>
#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstring>
#include <memory>
#include <string>

#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/input_file.hpp"
#include "zoo/output_file.hpp"

namespace zoo {
namespace {

struct CloseSndfile {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndfilePtr = std::unique_ptr<SNDFILE, CloseSndfile>;

// The encoded file is built in memory through libsndfile's virtual I/O and then handed to an
// AtomicFileWriter: libsndfile never opens a path itself, so the output rules (temporary file,
// no symlink followed for it, the target's mode kept, devices and FIFOs written directly) are
// the writer's. WAV and FLAC seek back to patch their headers, which a FIFO could not take.
struct MemoryFile {
  std::string bytes;
  std::size_t pos = 0;
};

sf_count_t mem_length(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size()); }

sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
  auto& f = *static_cast<MemoryFile*>(user);
  const sf_count_t base = whence == SEEK_CUR   ? static_cast<sf_count_t>(f.pos)
                          : whence == SEEK_END ? static_cast<sf_count_t>(f.bytes.size())
                                               : 0;
  if (base + offset < 0) return -1;
  f.pos = static_cast<std::size_t>(base + offset);
  return static_cast<sf_count_t>(f.pos);
}

sf_count_t mem_read(void* out, sf_count_t count, void* user) {
  auto& f = *static_cast<MemoryFile*>(user);
  if (f.pos >= f.bytes.size() || count <= 0) return 0;
  const auto n = std::min(static_cast<std::size_t>(count), f.bytes.size() - f.pos);
  std::memcpy(out, f.bytes.data() + f.pos, n);
  f.pos += n;
  return static_cast<sf_count_t>(n);
}

sf_count_t mem_write(const void* in, sf_count_t count, void* user) {
  auto& f = *static_cast<MemoryFile*>(user);
  if (count <= 0) return 0;
  const auto n = static_cast<std::size_t>(count);
  if (f.pos + n > f.bytes.size()) f.bytes.resize(f.pos + n);
  std::memcpy(f.bytes.data() + f.pos, in, n);
  f.pos += n;
  return count;
}

sf_count_t mem_tell(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->pos); }

std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

int libsndfile_format(SoundFormat format) {
  switch (format) {
    case SoundFormat::Wav: return SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    case SoundFormat::Flac: return SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
    case SoundFormat::OggVorbis: return SF_FORMAT_OGG | SF_FORMAT_VORBIS;
    case SoundFormat::OggOpus: return SF_FORMAT_OGG | SF_FORMAT_OPUS;
    case SoundFormat::Mp3: return SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
  }
  return 0;
}

}  // namespace

std::optional<SoundFormat> sound_format_for(const std::filesystem::path& path) {
  const std::string ext = lower_extension(path);
  // No extension: WAV, so /dev/stdout and a FIFO can be written.
  if (ext.empty() || ext == ".wav") return SoundFormat::Wav;
  if (ext == ".flac") return SoundFormat::Flac;
  if (ext == ".ogg" || ext == ".oga") return SoundFormat::OggVorbis;
  if (ext == ".opus") return SoundFormat::OggOpus;
  if (ext == ".mp3") return SoundFormat::Mp3;
  return std::nullopt;
}

namespace {

// libsndfile's scale (it reads 16-bit samples back divided by 32768): x * 32768 rounded,
// saturated to [-32768, 32767], NaN 0.
std::vector<std::int16_t> to_pcm16(std::span<const float> samples) {
  std::vector<std::int16_t> out(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const float v = samples[i] * 32768.0f;
    out[i] = static_cast<std::int16_t>(!(v == v) ? 0 : v >= 32767.0f ? 32767 : v <= -32768.0f ? -32768 : std::lrintf(v));
  }
  return out;
}

}  // namespace

std::vector<unsigned char> encode_sound(std::span<const float> samples, int sample_rate, SoundFormat format,
                                        const std::string& name) {
  if (sample_rate <= 0) throw InputError(fmt::format("{}: invalid sample rate {}", name, sample_rate));
  if (format == SoundFormat::Flac && sample_rate > 655350)
    throw InputError(fmt::format("{}: FLAC cannot store a sample rate of {}", name, sample_rate));
  if (format == SoundFormat::OggOpus && sample_rate != 8000 && sample_rate != 12000 && sample_rate != 16000 &&
      sample_rate != 24000 && sample_rate != 48000)
    throw InputError(fmt::format("{}: Opus cannot store a sample rate of {} (8, 12, 16, 24 or 48 kHz)", name, sample_rate));

  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = libsndfile_format(format);
  if (!sf_format_check(&info)) throw InputError(fmt::format("{}: libsndfile rejects this format", name));

  MemoryFile memory;
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SndfilePtr file(sf_open_virtual(&io, SFM_WRITE, &info, &memory));
  if (!file) throw InputError(fmt::format("{}: cannot encode: {}", name, sf_strerror(nullptr)));
  // Full scale is 1.0; past it, saturate rather than wrap around.
  sf_command(file.get(), SFC_SET_CLIPPING, nullptr, SF_TRUE);
  sf_command(file.get(), SFC_SET_NORM_FLOAT, nullptr, SF_TRUE);
  const auto n = static_cast<sf_count_t>(samples.size());
  // The 16-bit formats get pcm16_le's integers: a WAV holds exactly the PCM a stream of the same
  // samples sends, by construction.
  const bool pcm16 = format == SoundFormat::Wav || format == SoundFormat::Flac;
  const bool written = pcm16 ? n == 0 || sf_writef_short(file.get(), to_pcm16(samples).data(), n) == n
                             : n == 0 || sf_writef_float(file.get(), samples.data(), n) == n;
  if (!written) throw InputError(fmt::format("{}: encoding failed: {}", name, sf_strerror(file.get())));
  // sf_close flushes (FLAC and the lossy encoders emit their last block there).
  if (sf_close(file.release()) != 0) throw InputError(fmt::format("{}: encoding failed while closing", name));
  return {memory.bytes.begin(), memory.bytes.end()};
}

void write_sound_file(const std::filesystem::path& path, std::span<const float> samples, int sample_rate) {
  const std::string name = escape_text(path.string());
  if (path.filename().empty()) throw InputError(fmt::format("{}: not a file name", name));
  const auto format = sound_format_for(path);
  if (!format)
    throw InputError(fmt::format("{}: unknown sound file extension '{}' (use .wav, .flac, .ogg, .opus or .mp3)", name,
                                 escape_text(path.extension().string())));
  const std::vector<unsigned char> bytes = encode_sound(samples, sample_rate, *format, name);
  AtomicFileWriter out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

std::vector<unsigned char> pcm16_le(std::span<const float> samples) {
  std::vector<unsigned char> out;
  out.reserve(samples.size() * 2);
  for (const std::int16_t s : to_pcm16(samples)) {
    const auto u = static_cast<std::uint16_t>(s);
    out.push_back(static_cast<unsigned char>(u & 0xff));
    out.push_back(static_cast<unsigned char>(u >> 8));
  }
  return out;
}

namespace {

// The samples of an open sound file (`name` names it in messages).
SoundFileContents decode_open(SNDFILE* file, const SF_INFO& info, const std::string& name, bool downmix) {
  // A header may claim any length; a billion samples is over an hour at 192 kHz.
  constexpr sf_count_t kMaxSamples = sf_count_t{1} << 30;
  if (info.channels < 1 || info.channels > 1024 || info.frames < 0 || info.frames > kMaxSamples / info.channels)
    throw InputError(fmt::format("{}: implausible sound file header ({} channels, {} frames)", name, info.channels,
                                 info.frames));
  if (info.samplerate < 1) throw InputError(fmt::format("{}: invalid sample rate {}", name, info.samplerate));
  SoundFileContents out;
  out.sample_rate = info.samplerate;
  out.channels = info.channels;
  const int major = info.format & SF_FORMAT_TYPEMASK, sub = info.format & SF_FORMAT_SUBMASK;
  out.format = major == SF_FORMAT_FLAC                         ? SoundFormat::Flac
               : major == SF_FORMAT_OGG && sub == SF_FORMAT_OPUS ? SoundFormat::OggOpus
               : major == SF_FORMAT_OGG                          ? SoundFormat::OggVorbis
               : major == SF_FORMAT_MPEG                         ? SoundFormat::Mp3
                                                                 : SoundFormat::Wav;
  std::vector<float> interleaved(static_cast<std::size_t>(info.frames * info.channels));
  const sf_count_t got = sf_readf_float(file, interleaved.data(), info.frames);
  if (got != info.frames) throw InputError(fmt::format("{}: truncated ({} of {} frames)", name, got, info.frames));
  out.samples.resize(static_cast<std::size_t>(got));
  const int channels = downmix ? info.channels : 1;
  for (sf_count_t i = 0; i < got; ++i) {
    float sum = 0.0f;
    for (int c = 0; c < channels; ++c) sum += interleaved[static_cast<std::size_t>(i * info.channels + c)];
    out.samples[static_cast<std::size_t>(i)] = channels == 1 ? sum : sum / static_cast<float>(channels);
  }
  return out;
}

SoundFileContents read_sound(const std::filesystem::path& path, bool downmix) {
  const std::string name = escape_text(path.string());
  const InputFile input(path, "a sound file");
  SF_INFO info{};
  // The descriptor stays the InputFile's (closed by it), so libsndfile opens nothing itself.
  SndfilePtr file(sf_open_fd(input.fd(), SFM_READ, &info, SF_FALSE));
  if (!file) throw InputError(fmt::format("{}: cannot read as a sound file: {}", name, sf_strerror(nullptr)));
  return decode_open(file.get(), info, name, downmix);
}

struct DeleteSoxr {
  void operator()(soxr_t s) const { soxr_delete(s); }
};

}  // namespace

SoundFileContents read_sound_file(const std::filesystem::path& path) { return read_sound(path, false); }

SoundFileContents read_sound_file_downmixed(const std::filesystem::path& path) { return read_sound(path, true); }

SoundFileContents decode_sound(std::span<const unsigned char> bytes, const std::string& name) {
  MemoryFile memory;
  memory.bytes.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  SndfilePtr file(sf_open_virtual(&io, SFM_READ, &info, &memory));
  if (!file) throw InputError(fmt::format("{}: cannot read as a sound file: {}", name, sf_strerror(nullptr)));
  return decode_open(file.get(), info, name, true);
}

std::vector<float> resample_sound(std::span<const float> samples, int from, int to) {
  if (from < 1 || to < 1) throw InputError(fmt::format("resample: invalid rates {} -> {} Hz", from, to));
  if (from == to || samples.empty()) return {samples.begin(), samples.end()};
  // libsoxr's one-shot API with its high-quality preset (linear phase, -rolloff small): the output
  // is round(n * to / from) samples, aligned with the input (no delay to trim).
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  const double ratio = static_cast<double>(to) / static_cast<double>(from);
  const auto out_len = static_cast<std::size_t>(std::llround(static_cast<double>(samples.size()) * ratio));
  std::vector<float> out(std::max<std::size_t>(out_len, 1));
  std::size_t done = 0;
  const soxr_error_t error = soxr_oneshot(from, to, 1, samples.data(), samples.size(), nullptr, out.data(), out.size(),
                                          &done, &io, &quality, nullptr);
  if (error) throw InputError(fmt::format("resample {} -> {} Hz: libsoxr: {}", from, to, error));
  out.resize(done);
  return out;
}

}  // namespace zoo
