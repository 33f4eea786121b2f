// write_sound_file: WAV (16-bit PCM) by default, FLAC by name, clipping, atomic replacement.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "weights_test_util.hpp"
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

}  // namespace
}  // namespace zoo::test
