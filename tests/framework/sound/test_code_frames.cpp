// Codec frame files ([T, codebooks] codes, JSON or safetensors; zoo/code_frames.hpp): round trips
// and the errors that name the file.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sys/stat.h>

#include "framework/weights_test_util.hpp"
#include "zoo/code_frames.hpp"
#include "zoo/error.hpp"
#include "zoo/safetensors.hpp"

namespace zoo::test {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {
using Rows = std::vector<std::vector<std::int64_t>>;
Rows read_rows(const std::filesystem::path& file, std::int64_t columns = 0) {
  return code_frames_rows(load_code_frames(file, columns).view());
}
}  // namespace

TEST_CASE("code frames: JSON and safetensors round trip", "[codes]") {
  TempDir dir;
  const Rows frames{{1, 2, 3}, {1023, 0, 7}};
  for (const char* name : {"a.json", "a.safetensors", "a.codes"}) {
    write_code_frames(dir / name, code_frames_tensor(frames).view());
    CHECK(read_rows(dir / name) == frames);
    CHECK(read_rows(dir / name, 3) == frames);
  }
  write_file(dir / "wrapped.json", R"({"codes": [[4, 5], [6, 7]]})");
  CHECK(read_rows(dir / "wrapped.json") == Rows{{4, 5}, {6, 7}});
  write_file(dir / "bare.json", "  \n[[4, 5], [6, 7]]");
  CHECK(read_rows(dir / "bare.json") == Rows{{4, 5}, {6, 7}});
  // Any single integer tensor of rank 2, I32 and I16 here.
  const std::vector<std::int32_t> v{9, 8, 7, 6};
  write_safetensors(dir / "i32.safetensors", {{"x", TensorView{v.data(), DType::I32, {2, 2}, Device{}}}});
  CHECK(read_rows(dir / "i32.safetensors") == Rows{{9, 8}, {7, 6}});
  const std::vector<std::int16_t> w{1, 2, 3, 4, 5, 6};
  write_safetensors(dir / "i16.safetensors", {{"codes", TensorView{w.data(), DType::I16, {3, 2}, Device{}}}});
  CHECK(read_rows(dir / "i16.safetensors") == Rows{{1, 2}, {3, 4}, {5, 6}});
}

TEST_CASE("code frames: malformed files are InputErrors naming the file", "[codes]") {
  TempDir dir;
  auto error_at = [&](const std::filesystem::path& path, std::int64_t columns = 0) {
    try {
      load_code_frames(path, columns);
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), StartsWith(path.string()));
      return std::string(e.what());
    }
    FAIL("no InputError for " << path);
    return std::string();
  };
  auto error = [&](const std::string& name, const std::string& text, std::int64_t columns = 0) {
    write_file(dir / name, text);
    return error_at(dir / name, columns);
  };
  CHECK_THAT(error("a.json", "[[1, 2], [3]]"), Contains("codes[1] has 1 codes, codes[0] has 2"));
  CHECK_THAT(error("b.json", "[[1, -2]]"), Contains("codes[0][1] = -2 is negative"));
  CHECK_THAT(error("c.json", "[[1, 2.5]]"), Contains("codes[0][1] is not an integer"));
  CHECK_THAT(error("c2.json", "[[1, 18446744073709551615]]"), Contains("codes[0][1] is not an integer"));
  CHECK_THAT(error("d.json", "{\"codez\": []}"), Contains("\"codes\""));
  CHECK_THAT(error("e.json", "[]"), Contains("no code frames"));
  CHECK_THAT(error("f.json", "[[1"), Contains("not valid JSON"));
  CHECK_THAT(error("g.json", "[1, 2]"), Contains("codes[0] is not an array"));
  CHECK_THAT(error("h.json", "[[1, 2]]", 3), Contains("frames have 2 codes, expected 3"));
  CHECK_THAT(error("i.json", std::string(200, '[') + std::string(200, ']')), Contains("nested"));
  CHECK_THAT(error("empty.json", ""), Contains("not valid JSON"));
  CHECK_THAT(error_at(dir / "missing.json"), Contains("no such file"));
  // A FIFO is refused at once, never read (the old readers blocked in open()).
  REQUIRE(::mkfifo((dir / "fifo.json").c_str(), 0600) == 0);
  CHECK_THAT(error_at(dir / "fifo.json"), Contains("is a FIFO"));
  const std::vector<float> f{1.0f, 2.0f};
  write_safetensors(dir / "f.safetensors", {{"codes", TensorView{f.data(), DType::F32, {1, 2}, Device{}}}});
  CHECK_THAT(error_at(dir / "f.safetensors"), Contains("expected I64, I32 or I16"));
  const std::vector<std::int64_t> flat{1, 2};
  write_safetensors(dir / "r1.safetensors", {{"codes", TensorView{flat.data(), DType::I64, {2}, Device{}}}});
  CHECK_THAT(error_at(dir / "r1.safetensors"), Contains("expected [frames, codebooks]"));
  write_safetensors(dir / "two.safetensors", {{"a", TensorView{flat.data(), DType::I64, {1, 2}, Device{}}},
                                              {"b", TensorView{flat.data(), DType::I64, {1, 2}, Device{}}}});
  CHECK_THAT(error_at(dir / "two.safetensors"), Contains("no tensor named \"codes\" and 2 tensors"));
  // Shapes that hold no bytes are checked before anything is sized from them: [2^40, 0] asked for
  // 2^40 rows (bad_alloc, or the memory exhausted).
  const auto empty_tensor = [&](const std::string& name, const std::string& shape) {
    std::string header = fmt::format("{{\"codes\":{{\"dtype\":\"I64\",\"shape\":{},\"data_offsets\":[0,0]}}}}", shape);
    header.resize((header.size() + 7) / 8 * 8, ' ');
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    write_file(dir / name, bytes + header);
    return error_at(dir / name);
  };
  CHECK_THAT(empty_tensor("wide0.safetensors", "[1099511627776,0]"),
             Contains("\"codes\" has shape [1099511627776, 0]: frames of no codes"));
  CHECK_THAT(empty_tensor("none.safetensors", "[0,4]"), Contains("no code frames"));
}

}  // namespace zoo::test
