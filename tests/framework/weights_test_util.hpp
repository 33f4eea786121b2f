#pragma once
// Helpers shared by the safetensors / weight source / load plan tests.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include "zoo/error.hpp"

namespace zoo::test {

// A fresh directory per test case, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    auto pattern = (std::filesystem::temp_directory_path() / "zoo-weights-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string le64(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

// A safetensors file made by hand: length prefix + header text + payload, no validation, so
// tests can build every kind of broken file.
inline std::string raw_safetensors(const std::string& header, const std::string& data = {}) {
  return le64(header.size()) + header + data;
}

// The InputError message `fn` throws; fails the test when it throws nothing or something else.
inline std::string input_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const zoo::InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected zoo::InputError, got another exception: " << e.what());
  }
  FAIL("expected zoo::InputError, nothing was thrown");
  return {};
}

}  // namespace zoo::test
