#include "zoo/sound_file.hpp"

#include <fmt/format.h>
#include <sndfile.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <string>
#include <system_error>

#include "zoo/error.hpp"

namespace zoo {
namespace {

struct CloseSndfile {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndfilePtr = std::unique_ptr<SNDFILE, CloseSndfile>;

// Removes the temporary file unless the write went through.
class TempFileGuard {
 public:
  explicit TempFileGuard(std::filesystem::path path) : path_(std::move(path)) {}
  ~TempFileGuard() {
    if (!committed_) {
      std::error_code ec;
      std::filesystem::remove(path_, ec);
    }
  }
  void commit() { committed_ = true; }

 private:
  std::filesystem::path path_;
  bool committed_ = false;
};

}  // namespace

SoundFormat sound_format_for(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".flac" ? SoundFormat::Flac : SoundFormat::Wav;
}

void write_sound_file(const std::filesystem::path& path, std::span<const float> samples, int sample_rate) {
  const std::string name = path.string();
  if (sample_rate <= 0) throw InputError(fmt::format("{}: invalid sample rate {}", name, sample_rate));
  if (path.filename().empty()) throw InputError(fmt::format("{}: not a file name", name));
  const SoundFormat format = sound_format_for(path);
  if (format == SoundFormat::Flac && sample_rate > 655350)
    throw InputError(fmt::format("{}: FLAC cannot store a sample rate of {}", name, sample_rate));

  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = (format == SoundFormat::Flac ? SF_FORMAT_FLAC : SF_FORMAT_WAV) | SF_FORMAT_PCM_16;
  if (!sf_format_check(&info)) throw InputError(fmt::format("{}: libsndfile rejects this format", name));

  // Same directory, so the rename is atomic; the pid keeps concurrent writers apart.
  const std::filesystem::path temp =
      path.parent_path() / fmt::format(".{}.{}.tmp", path.filename().string(), static_cast<long>(::getpid()));
  TempFileGuard guard(temp);
  {
    SndfilePtr file(sf_open(temp.c_str(), SFM_WRITE, &info));
    if (!file) throw InputError(fmt::format("{}: cannot write: {}", name, sf_strerror(nullptr)));
    // Full scale is 1.0; past it, saturate rather than wrap around.
    sf_command(file.get(), SFC_SET_CLIPPING, nullptr, SF_TRUE);
    sf_command(file.get(), SFC_SET_NORM_FLOAT, nullptr, SF_TRUE);
    const auto n = static_cast<sf_count_t>(samples.size());
    if (n > 0 && sf_writef_float(file.get(), samples.data(), n) != n)
      throw InputError(fmt::format("{}: write failed: {}", name, sf_strerror(file.get())));
    // sf_close flushes (FLAC encodes its last block there); check it rather than the destructor.
    if (sf_close(file.release()) != 0) throw InputError(fmt::format("{}: write failed while closing", name));
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) throw InputError(fmt::format("{}: cannot move the finished file into place: {}", name, ec.message()));
  guard.commit();
}

SoundFileContents read_sound_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  SF_INFO info{};
  SndfilePtr file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) throw InputError(fmt::format("{}: cannot read as a sound file: {}", name, sf_strerror(nullptr)));
  SoundFileContents out;
  out.sample_rate = info.samplerate;
  out.channels = info.channels;
  out.format = (info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_FLAC ? SoundFormat::Flac : SoundFormat::Wav;
  std::vector<float> interleaved(static_cast<std::size_t>(info.frames * std::max(info.channels, 1)));
  const sf_count_t got = sf_readf_float(file.get(), interleaved.data(), info.frames);
  if (got != info.frames) throw InputError(fmt::format("{}: truncated ({} of {} frames)", name, got, info.frames));
  out.samples.resize(static_cast<std::size_t>(got));
  for (sf_count_t i = 0; i < got; ++i) out.samples[static_cast<std::size_t>(i)] = interleaved[static_cast<std::size_t>(i * info.channels)];
  return out;
}

}  // namespace zoo
