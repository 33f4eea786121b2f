// write_sound_file: the format the extension names (WAV by default), clipping, and the output rules
// of AtomicFileWriter (mode kept, no planted temporary followed, FIFOs written directly).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cmath>
#include <thread>
#include <fstream>

#include "framework/weights_test_util.hpp"
#include "zoo/error.hpp"
#include "zoo/sound_file.hpp"

namespace zoo::test {
namespace {

using Catch::Matchers::Contains;

std::vector<float> tone(std::size_t n) {
  std::vector<float> s(n);
  for (std::size_t i = 0; i < n; ++i) s[i] = 0.8f * std::sin(0.05f * static_cast<float>(i));
  return s;
}

void check_round_trip(const std::filesystem::path& path, SoundFormat format) {
  const auto samples = tone(4801);
  write_sound_file(path, samples, 24000);
  const SoundFileContents got = read_sound_file(path);
  CHECK(got.format == format);
  CHECK(got.sample_rate == 24000);
  CHECK(got.channels == 1);
  REQUIRE(got.samples.size() == samples.size());
  float worst = 0.0f;
  for (std::size_t i = 0; i < samples.size(); ++i) worst = std::max(worst, std::abs(got.samples[i] - samples[i]));
  CHECK(worst <= 1.0f / 32767.0f);  // 16-bit quantization, nothing else
}

TEST_CASE("sound files: WAV by default, FLAC when the name says so", "[framework][sound]") {
  TempDir dir;
  CHECK(sound_format_for("x.wav") == SoundFormat::Wav);
  CHECK(sound_format_for("x") == SoundFormat::Wav);
  CHECK(sound_format_for("x.FLAC") == SoundFormat::Flac);
  CHECK(sound_format_for("x.ogg") == SoundFormat::OggVorbis);
  CHECK(sound_format_for("x.opus") == SoundFormat::OggOpus);
  CHECK(sound_format_for("x.Mp3") == SoundFormat::Mp3);
  CHECK_FALSE(sound_format_for("x.aiff").has_value());
  check_round_trip(dir / "a.wav", SoundFormat::Wav);
  check_round_trip(dir / "a.flac", SoundFormat::Flac);
  check_round_trip(dir / "noext", SoundFormat::Wav);
  // The WAV header says PCM (format 1), 16 bits, mono, 24 kHz.
  std::ifstream in(dir / "a.wav", std::ios::binary);
  char header[36];
  in.read(header, sizeof header);
  CHECK(std::string(header, 4) == "RIFF");
  CHECK(std::string(header + 8, 4) == "WAVE");
  CHECK(static_cast<int>(header[20]) == 1);
  CHECK(static_cast<int>(header[22]) == 1);
  CHECK(static_cast<int>(static_cast<unsigned char>(header[34])) == 16);
}

TEST_CASE("sound files: samples past full scale saturate, they do not wrap", "[framework][sound]") {
  TempDir dir;
  write_sound_file(dir / "loud.wav", std::vector<float>{2.0f, -3.0f, 1.0f, -1.0f, 0.5f}, 16000);
  const auto got = read_sound_file(dir / "loud.wav").samples;
  REQUIRE(got.size() == 5);
  CHECK(got[0] >= 0.9999f);
  CHECK(got[1] <= -0.9999f);
  CHECK(got[2] >= 0.9999f);
  CHECK(got[3] <= -0.9999f);
  CHECK(std::abs(got[4] - 0.5f) <= 1.0f / 32767.0f);
}

TEST_CASE("sound files: atomic replacement, nothing left behind on failure", "[framework][sound]") {
  TempDir dir;
  const auto path = dir / "out.wav";
  write_sound_file(path, tone(100), 24000);
  write_sound_file(path, tone(300), 24000);  // replaces
  CHECK(read_sound_file(path).samples.size() == 300);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  CHECK(files == 1);  // no temporary file left

  const auto missing = dir / "no-such-dir" / "x.wav";
  CHECK_THROWS_WITH(write_sound_file(missing, tone(10), 24000), Contains(missing.string()));
  CHECK_FALSE(std::filesystem::exists(missing));
  CHECK_THROWS_AS(write_sound_file(dir / "bad.wav", tone(10), 0), InputError);
  CHECK_THROWS_WITH(read_sound_file(dir / "nothing.wav"), Contains("nothing.wav"));
}

std::string head(const std::filesystem::path& path, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(n, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  return bytes.substr(0, static_cast<std::size_t>(in.gcount()));
}

TEST_CASE("sound files: the bytes are the format the extension names", "[framework][sound]") {
  // Before: everything but .flac was written as WAV, so x.mp3 held RIFF bytes.
  TempDir dir;
  write_sound_file(dir / "a.mp3", tone(4800), 24000);
  const auto mp3 = head(dir / "a.mp3", 3);
  CHECK((mp3 == "ID3" || (mp3.size() == 3 && static_cast<unsigned char>(mp3[0]) == 0xff)));
  write_sound_file(dir / "a.ogg", tone(4800), 24000);
  CHECK(head(dir / "a.ogg", 4) == "OggS");
  CHECK(read_sound_file(dir / "a.ogg").format == SoundFormat::OggVorbis);
  write_sound_file(dir / "a.opus", tone(4800), 24000);
  CHECK(head(dir / "a.opus", 4) == "OggS");
  CHECK(read_sound_file(dir / "a.opus").format == SoundFormat::OggOpus);
  CHECK_THROWS_WITH(write_sound_file(dir / "a.xyz", tone(10), 24000),
                    Contains("a.xyz") && Contains("unknown sound file extension"));
  CHECK_FALSE(std::filesystem::exists(dir / "a.xyz"));
  CHECK_THROWS_WITH(write_sound_file(dir / "a.opus", tone(10), 22050), Contains("Opus cannot store"));
}

TEST_CASE("sound files: a replaced file keeps its mode, a planted temporary name is not followed", "[framework][sound]") {
  // Before: the writer created .NAME.PID.tmp with O_TRUNC, following a symlink planted there (the
  // write went wherever it pointed), and the rename widened a 0600 file to 0644.
  TempDir dir;
  const auto path = dir / "out.wav";
  write_sound_file(path, tone(10), 24000);
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  write_file(dir / "victim", "keep me");
  std::filesystem::create_symlink(dir / "victim", dir / fmt::format(".out.wav.{}.tmp", static_cast<long>(::getpid())));
  write_sound_file(path, tone(20), 24000);
  CHECK(read_file(dir / "victim") == "keep me");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(read_sound_file(path).samples.size() == 20);
}

TEST_CASE("sound files: a FIFO target is written into, not replaced", "[framework][sound]") {
  // Before: the temporary file was renamed over the FIFO (as root, --out /dev/null would have
  // replaced /dev/null by a file).
  TempDir dir;
  const auto fifo = dir / "pipe.wav";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = read_file(fifo); });
  write_sound_file(fifo, tone(100), 24000);
  reader.join();
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(got.substr(0, 4) == "RIFF");
  CHECK(got.size() == 44 + 200);
}

}  // namespace
}  // namespace zoo::test
