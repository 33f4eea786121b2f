// Codec frame files ([T, codebooks] codes, JSON or safetensors): round trips and the errors that
// name the file.
#include <catch2/catch.hpp>

#include "weights_test_util.hpp"
#include "zoo/codes_file.hpp"
#include "zoo/error.hpp"
#include "zoo/safetensors.hpp"

namespace zoo::test {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("codes file: JSON and safetensors round trip", "[codes]") {
  TempDir dir;
  const CodeFrames frames{{1, 2, 3}, {1023, 0, 7}};
  for (const char* name : {"a.json", "a.safetensors", "a.codes"}) {
    write_codes_file(dir / name, frames);
    CHECK(read_codes_file(dir / name) == frames);
  }
  write_file(dir / "wrapped.json", R"({"codes": [[4, 5], [6, 7]]})");
  CHECK(read_codes_file(dir / "wrapped.json") == CodeFrames{{4, 5}, {6, 7}});
  // Any single integer tensor of rank 2, I32 here.
  const std::vector<std::int32_t> v{9, 8, 7, 6};
  write_safetensors(dir / "i32.safetensors", {{"x", TensorView{v.data(), DType::I32, {2, 2}, Device{}}}});
  CHECK(read_codes_file(dir / "i32.safetensors") == CodeFrames{{9, 8}, {7, 6}});
}

TEST_CASE("codes file: malformed files are InputErrors naming the file", "[codes]") {
  TempDir dir;
  auto error = [&](const std::string& name, const std::string& text) {
    const auto path = dir / name;
    write_file(path, text);
    try {
      read_codes_file(path);
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), StartsWith(path.string()));
      return std::string(e.what());
    }
    FAIL("no InputError for " << text);
    return std::string();
  };
  CHECK_THAT(error("a.json", "[[1, 2], [3]]"), Contains("frame 1 has 1 codes"));
  CHECK_THAT(error("b.json", "[[1, -2]]"), Contains("negative"));
  CHECK_THAT(error("c.json", "[[1, 2.5]]"), Contains("code [0][1] is not an integer"));
  CHECK_THAT(error("d.json", "{\"codez\": []}"), Contains("codes"));
  CHECK_THAT(error("e.json", "[]"), Contains("no frames"));
  CHECK_THAT(error("f.json", "[[1"), Contains("not JSON"));
  CHECK_THAT(error("g.json", "[1, 2]"), Contains("frame 0 is not an array"));
  CHECK_THROWS_AS(read_codes_file(dir / "missing.json"), InputError);
  const std::vector<float> f{1.0f, 2.0f};
  write_safetensors(dir / "f.safetensors", {{"codes", TensorView{f.data(), DType::F32, {1, 2}, Device{}}}});
  CHECK_THROWS_WITH(read_codes_file(dir / "f.safetensors"), Contains("want I64, I32 or I16"));
  const std::vector<std::int64_t> flat{1, 2};
  write_safetensors(dir / "r1.safetensors", {{"codes", TensorView{flat.data(), DType::I64, {2}, Device{}}}});
  CHECK_THROWS_WITH(read_codes_file(dir / "r1.safetensors"), Contains("want [T, codebooks]"));
}

}  // namespace zoo::test
