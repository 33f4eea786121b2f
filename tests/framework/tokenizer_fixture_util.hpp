#pragma once
// The tokenizer fixtures (tests/fixtures/tokenizer/fixtures.tar.xz, made by
// tools/tokenizer/make_fixtures.py from HF `tokenizers`), unpacked once into the build tree with
// `cmake -E tar` (CMake reads xz itself). Safe when several test processes start at once: each
// unpacks into its own directory and renames it into place.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace zoo::test {

inline std::filesystem::path tokenizer_fixture_dir() {
  namespace fs = std::filesystem;
  const fs::path archive = fs::path(ZOO_SOURCE_DIR) / "tests/fixtures/tokenizer/fixtures.tar.xz";
  const fs::path dir = fs::path(ZOO_BINARY_DIR) / "tests/tokenizer-fixtures";
  const std::string stamp = std::to_string(fs::file_size(archive)) + " " +
                            std::to_string(fs::last_write_time(archive).time_since_epoch().count());
  const auto current = [&] {
    std::ifstream in(dir / ".complete");
    std::string have;
    return in && std::getline(in, have) && have == stamp;
  };
  if (current()) return dir;
  const fs::path tmp = dir.string() + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::string cmd = "cd '" + tmp.string() + "' && cmake -E tar xf '" + archive.string() + "'";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("cannot unpack " + archive.string());
  std::ofstream(tmp / ".complete") << stamp << "\n";
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (!ec) return dir;
  if (current()) {  // another process put the same copy in place first: keep it (it may be reading it)
    fs::remove_all(tmp, ec);
    return dir;
  }
  // A copy from an older archive: move it aside, then put ours in place.
  const fs::path old = dir.string() + ".old." + std::to_string(::getpid());
  fs::rename(dir, old, ec);
  fs::rename(tmp, dir);
  fs::remove_all(old, ec);
  return dir;
}

}  // namespace zoo::test
