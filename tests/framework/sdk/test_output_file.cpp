// Outputs: every write goes through a temporary file and a rename, and no output may be an input.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "framework/weights_test_util.hpp"
#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/output_file.hpp"
#include "zoo/safetensors.hpp"

using namespace zoo;
using zoo::test::input_error;
using zoo::test::read_file;
using zoo::test::TempDir;
using zoo::test::write_file;
using Catch::Contains;

namespace {

std::size_t entries(const std::filesystem::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("write_file_atomic writes and replaces, leaving no temporary file", "[output]") {
  TempDir dir;
  write_file_atomic(dir / "a.txt", "first");
  CHECK(read_file(dir / "a.txt") == "first");
  write_file_atomic(dir / "a.txt", "second, longer");
  CHECK(read_file(dir / "a.txt") == "second, longer");
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("AtomicFileWriter without commit leaves the target untouched", "[output]") {
  TempDir dir;
  write_file(dir / "keep.bin", "original bytes");
  {
    AtomicFileWriter writer(dir / "keep.bin");
    writer.write("half of a new fi");
    CHECK(entries(dir.path()) == 2);  // the temporary file sits beside the target
    // destroyed here, as when an exception unwinds a failed write
  }
  CHECK(read_file(dir / "keep.bin") == "original bytes");
  CHECK(entries(dir.path()) == 1);
  // A brand-new target never appears half written either.
  { AtomicFileWriter writer(dir / "new.bin"); writer.write("partial"); }
  CHECK_FALSE(std::filesystem::exists(dir / "new.bin"));
}

TEST_CASE("AtomicFileWriter keeps a symlink and the file's permissions", "[output]") {
  TempDir dir;
  write_file(dir / "real.txt", "old");
  ::chmod((dir / "real.txt").c_str(), 0640);
  std::filesystem::create_symlink("real.txt", dir / "link.txt");
  write_file_atomic(dir / "link.txt", "new");
  CHECK(std::filesystem::is_symlink(dir / "link.txt"));
  CHECK(read_file(dir / "real.txt") == "new");
  struct stat st {};
  REQUIRE(::stat((dir / "real.txt").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
}

TEST_CASE("AtomicFileWriter errors name the target", "[output]") {
  TempDir dir;
  CHECK_THAT(input_error([&] { write_file_atomic(dir / "no-such-dir" / "x.bin", "x"); }),
             Contains("no-such-dir/x.bin") && Contains("no such directory"));
  std::filesystem::create_directory(dir / "d");
  CHECK_THAT(input_error([&] { write_file_atomic(dir / "d", "x"); }), Contains("is a directory"));
}

TEST_CASE("write_safetensors over a mapped file: the reader keeps its bytes", "[output]") {
  // Before: the writer truncated the file in place, and a reader that had mapped it (a golden
  // compared against its own trace) died of SIGBUS.
  TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4}, b = {9};
  write_safetensors(dir / "t.safetensors", {{"x", TensorView{a.data(), DType::F32, {4}}}});
  const auto mapped = SafetensorsFile::open(dir / "t.safetensors");
  write_safetensors(dir / "t.safetensors", {{"y", TensorView{b.data(), DType::F32, {1}}}});
  const auto view = mapped->view(*mapped->find("x"));
  CHECK(static_cast<const float*>(view.data)[3] == 4.0f);
  CHECK(SafetensorsFile::open(dir / "t.safetensors")->find("y") != nullptr);
  // A failed write (a duplicate name) leaves the previous file complete.
  CHECK_THROWS_AS(write_safetensors(dir / "t.safetensors", {{"z", TensorView{b.data(), DType::F32, {1}}},
                                                            {"z", TensorView{b.data(), DType::F32, {1}}}}),
                  InputError);
  CHECK(SafetensorsFile::open(dir / "t.safetensors")->find("y") != nullptr);
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("check_output_is_not_an_input compares files, not names", "[output]") {
  TempDir dir;
  write_file(dir / "golden.safetensors", "g");
  write_file(dir / "other", "o");
  std::filesystem::create_symlink("golden.safetensors", dir / "alias");
  std::filesystem::create_hard_link(dir / "golden.safetensors", dir / "hard");
  const std::vector<NamedPath> inputs = {{"request", dir / "missing.json"}, {"golden", dir / "golden.safetensors"}};
  for (const char* out : {"golden.safetensors", "alias", "hard", "./golden.safetensors"}) {
    INFO(out);
    CHECK_THAT(input_error([&] { check_output_is_not_an_input("--out", dir / out, inputs); }),
               Contains("--out") && Contains("same file as the golden") && Contains("golden.safetensors"));
  }
  CHECK_NOTHROW(check_output_is_not_an_input("--out", dir / "other", inputs));
  CHECK_NOTHROW(check_output_is_not_an_input("--out", dir / "not-yet", inputs));
}

TEST_CASE("escape_text: control characters cannot start a line or a sequence", "[output]") {
  CHECK(escape_text("layer.0.output") == "layer.0.output");
  CHECK(escape_text("x\nresult: PASS") == "x\\nresult: PASS");
  CHECK(escape_text("a\r\tb\x1b[31mred\x7f") == "a\\r\\tb\\e[31mred\\x7f");
  CHECK(escape_text(std::string("nul\0byte", 8)) == "nul\\x00byte");
  CHECK(escape_text("caf\xc3\xa9 \xe2\x9c\x93") == "caf\xc3\xa9 \xe2\x9c\x93");  // UTF-8 kept
  CHECK(escape_text("c1 \xc2\x9b" "31m") == "c1 \\u009b31m");                     // C1 CSI escaped
  // Cut at max_bytes, never inside a UTF-8 character, "..." marking the cut.
  CHECK(escape_text("abcdef", 4) == "abcd...");
  CHECK(escape_text("abcd", 4) == "abcd");
  CHECK(escape_text("ab\xc3\xa9z", 3) == "ab...");  // 3 bytes would split the two-byte e-acute
  CHECK(escape_text("a\nbcdef", 2) == "a\\n...");
}

TEST_CASE("AtomicFileWriter writes a FIFO or device directly instead of replacing it", "[output]") {
  // (/dev/null as root would be replaced by a regular file: tested on a FIFO, which is safe.)
  TempDir dir;
  const auto fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // so opening for writing does not block
  REQUIRE(reader >= 0);
  write_file_atomic(fifo, "through the pipe");
  char buffer[64] = {};
  CHECK(::read(reader, buffer, sizeof buffer) == 16);
  ::close(reader);
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(entries(dir.path()) == 1);
}
