#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "framework/weights_test_util.hpp"
#include "zoo/mapped_file.hpp"
#include "zoo/safetensors.hpp"

using namespace zoo;
using zoo::test::input_error;
using zoo::test::raw_safetensors;
using zoo::test::TempDir;

namespace {

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

// Parses an in-memory file and returns the InputError message (the test fails if it parses).
std::string header_error(const std::string& header, const std::string& data = {}) {
  auto file = raw_safetensors(header, data);
  auto message = input_error([&] { parse_safetensors_header(bytes_of(file), "bad.safetensors"); });
  CHECK_THAT(message, Catch::StartsWith("bad.safetensors: "));
  return message;
}

SafetensorsHeader parse(const std::string& header, const std::string& data = {}) {
  auto file = raw_safetensors(header, data);
  return parse_safetensors_header(bytes_of(file), "good.safetensors");
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, std::size_t begin,
                  std::size_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

// Builds the header object with += (GCC 12 warns falsely on "{" + std::string).
std::string obj(std::initializer_list<std::string> entries) {
  std::string out = "{";
  for (const auto& e : entries) {
    if (out.size() > 1) out += ',';
    out += e;
  }
  out += '}';
  return out;
}

template <class T>
T element(const TensorView& view, std::size_t i) {
  T value;
  std::memcpy(&value, static_cast<const std::byte*>(view.data) + i * sizeof(T), sizeof(T));
  return value;
}

const std::filesystem::path kPythonSample =
    std::filesystem::path(ZOO_SOURCE_DIR) / "tests/fixtures/safetensors_python/sample.safetensors";

}  // namespace

TEST_CASE("safetensors: writer output reads back with names, order, dtypes, shapes, values and metadata",
          "[safetensors]") {
  TempDir dir;
  const std::vector<float> weights{1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
  const std::vector<std::int64_t> ids{1, -2, std::numeric_limits<std::int64_t>::max()};
  const std::vector<std::uint8_t> bytes{1, 2, 3};
  const std::vector<std::uint16_t> halves{0x3c00, 0xc000, 0x7bff};
  const float scalar = 7.5f;
  const std::vector<std::pair<std::string, TensorView>> tensors{
      {"z.weight", {weights.data(), DType::F32, {2, 3}, {}}},
      {"a.ids", {ids.data(), DType::I64, {3}, {}}},
      {"odd.bytes", {bytes.data(), DType::U8, {3}, {}}},  // leaves the next tensor unaligned
      {"m.half", {halves.data(), DType::F16, {3, 1}, {}}},
      {"s.scalar", {&scalar, DType::F32, {}, {}}},
      {"e.empty", {nullptr, DType::BF16, {0, 4}, {}}},
  };
  const auto path = dir / "out.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "quote \" and \xc3\xa9"}});

  auto file = SafetensorsFile::open(path);
  REQUIRE(file->entries().size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].first);
    const auto& e = file->entries()[i];
    CHECK(e.name == tensors[i].first);  // order given, not sorted
    CHECK(e.dtype == tensors[i].second.dtype);
    CHECK(e.shape == tensors[i].second.shape);
    CHECK(e.end - e.begin == tensors[i].second.nbytes());
    auto view = file->view(e);
    if (view.nbytes()) CHECK(std::memcmp(view.data, tensors[i].second.data, view.nbytes()) == 0);
  }
  CHECK(file->metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"note", "quote \" and \xc3\xa9"}});

  const auto raw = zoo::test::read_file(path);
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, raw.data(), 8);
  CHECK((8 + header_len) % 8 == 0);
  CHECK(raw.substr(8, 15) == "{\"__metadata__\"");
  CHECK(raw.find_last_not_of(' ', 8 + header_len - 1) < 8 + header_len);  // padding is spaces

  // A view into the mapping can be unaligned for its dtype; element reads go through memcpy.
  const auto* half = file->find("m.half");
  REQUIRE(half != nullptr);
  auto half_view = file->view(*half);
  CHECK(reinterpret_cast<std::uintptr_t>(half_view.data) % 2 == 1);
  CHECK(to_f32(half_view) == std::vector<float>{1.0f, -2.0f, 65504.0f});
  CHECK(file->find("missing") == nullptr);
}

TEST_CASE("safetensors: file written by the Python library reads correctly and rewrites byte for byte",
          "[safetensors]") {
  auto file = SafetensorsFile::open(kPythonSample);
  CHECK(file->metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(file->entries().size() == 17);

  auto get = [&](const char* name) {
    const auto* e = file->find(name);
    REQUIRE(e != nullptr);
    return file->view(*e);
  };
  // Formulas from tools/fixtures/make_safetensors_sample.py.
  auto embed = get("embed.weight");
  CHECK(embed.dtype == DType::F32);
  CHECK(embed.shape == Shape{4, 6});
  for (std::size_t i = 0; i < 24; ++i) CHECK(element<float>(embed, i) == static_cast<float>(i) * 0.125f - 1.5f);
  auto norm = get("norm.weight");
  CHECK(norm.dtype == DType::BF16);
  CHECK(norm.shape == Shape{6});
  auto norm_f32 = to_f32(norm);
  for (std::size_t i = 0; i < 6; ++i) CHECK(norm_f32[i] == 1.0f + static_cast<float>(i) / 64.0f);
  auto half = get("half.weight");
  CHECK(half.dtype == DType::F16);
  CHECK(half.shape == Shape{2, 3});
  auto half_f32 = to_f32(half);
  for (std::size_t i = 0; i < 6; ++i) CHECK(half_f32[i] == static_cast<float>(i) * 0.5f - 1.0f);
  auto f64 = get("f64");
  CHECK(f64.dtype == DType::F64);
  CHECK(element<double>(f64, 0) == 1.0 / 3.0);
  CHECK(element<double>(f64, 1) == -2.5);
  auto ids = get("ids");
  CHECK(ids.dtype == DType::I64);
  CHECK(element<std::int64_t>(ids, 2) == (std::int64_t{1} << 40));
  CHECK(element<std::int64_t>(ids, 3) == -(std::int64_t{1} << 62));
  CHECK(element<std::int64_t>(ids, 1) == -1);
  auto i32 = get("i32");
  CHECK(i32.dtype == DType::I32);
  CHECK(element<std::int32_t>(i32, 0) == std::numeric_limits<std::int32_t>::min());
  CHECK(element<std::int32_t>(i32, 1) == std::numeric_limits<std::int32_t>::max());
  auto i16 = get("i16");
  CHECK(i16.dtype == DType::I16);
  CHECK(element<std::int16_t>(i16, 0) == std::numeric_limits<std::int16_t>::min());
  CHECK(to_f32(get("i8")) == std::vector<float>{-128, -1, 0, 127});
  CHECK(get("i8").dtype == DType::I8);
  CHECK(to_f32(get("u8")) == std::vector<float>{0, 128, 255});
  CHECK(get("u8").dtype == DType::U8);
  CHECK(get("mask").dtype == DType::BOOL);
  CHECK(to_f32(get("mask")) == std::vector<float>{1, 0, 0, 1});
  auto scalar = get("scalar");
  CHECK(scalar.shape.empty());
  CHECK(element<float>(scalar, 0) == 2.5f);
  auto empty = get("empty");
  CHECK(empty.shape == Shape{0, 3});
  CHECK(empty.nbytes() == 0);

  // Rewrite in the file's own order: the bytes must match what Python wrote.
  std::vector<std::pair<std::string, TensorView>> tensors;
  for (const auto& e : file->entries()) tensors.emplace_back(e.name, file->view(e));
  TempDir dir;
  write_safetensors(dir / "copy.safetensors", tensors, file->metadata());
  const auto original = zoo::test::read_file(kPythonSample);
  const auto copy = zoo::test::read_file(dir / "copy.safetensors");
  CHECK(copy.size() == original.size());
  CHECK(copy == original);
}

TEST_CASE("safetensors: well-formed headers that are easy to get wrong", "[safetensors]") {
  SECTION("no tensors at all") {
    auto h = parse("{}");
    CHECK(h.entries.empty());
    CHECK(h.data_offset == 10);
  }
  SECTION("trailing space padding") {
    auto h = parse(obj({entry("a", "F32", "[1]", 0, 4)}) + "     ", std::string(4, '\0'));
    REQUIRE(h.entries.size() == 1);
    CHECK(h.data_offset == 8 + 2 + entry("a", "F32", "[1]", 0, 4).size() + 5);
  }
  SECTION("entries come back sorted by offset whatever the header order") {
    auto h = parse(obj({entry("b", "U8", "[2]", 2, 4), entry("a", "U8", "[2]", 0, 2)}), "abcd");
    REQUIRE(h.entries.size() == 2);
    CHECK(h.entries[0].name == "a");
    CHECK(h.entries[1].name == "b");
  }
  SECTION("zero-size tensors may sit at the boundary between others") {
    auto h = parse(obj({entry("x", "U8", "[2]", 0, 2), entry("e", "F32", "[0]", 2, 2), entry("y", "U8", "[1,1]", 2, 3)}),
                   "abc");
    REQUIRE(h.entries.size() == 3);
    CHECK(h.entries[1].name == "e");
  }
  SECTION("unknown keys in an entry are ignored, metadata kept") {
    auto h = parse(R"({"__metadata__":{"k":"v"},"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2],"x":1}})", "ab");
    CHECK(h.metadata.at("k") == "v");
  }
}

TEST_CASE("safetensors: every malformed header is an InputError naming the file and the problem", "[safetensors]") {
  using Catch::Contains;
  SECTION("too short for the length prefix") {
    for (std::size_t n : {0, 1, 7}) {
      std::string file(n, '\0');
      auto message = input_error([&] { parse_safetensors_header(bytes_of(file), "short.safetensors"); });
      CHECK_THAT(message, Catch::StartsWith("short.safetensors: ") && Contains("too short"));
    }
  }
  SECTION("header length past the end of the file") {
    std::string file = zoo::test::le64(100) + "{}";
    auto message = input_error([&] { parse_safetensors_header(bytes_of(file), "cut.safetensors"); });
    CHECK_THAT(message, Contains("runs past the end of the file"));
  }
  SECTION("header length over 100 MB, including lengths that would overflow") {
    for (std::uint64_t n : {std::uint64_t{100'000'001}, std::uint64_t{1} << 40, ~std::uint64_t{0}}) {
      std::string file = zoo::test::le64(n) + "{}";
      auto message = input_error([&] { parse_safetensors_header(bytes_of(file), "big.safetensors"); });
      CHECK_THAT(message, Contains("100 MB"));
    }
  }
  SECTION("not JSON") {
    CHECK_THAT(header_error("{not json}"), Contains("not valid JSON"));
    CHECK_THAT(header_error("{\"a\":"), Contains("not valid JSON"));
    CHECK_THAT(header_error("{}  x"), Contains("not valid JSON"));
    CHECK_THAT(header_error(std::string("{\"\xff\xfe\":1}")), Contains("not valid JSON"));  // bad UTF-8
  }
  SECTION("not an object") {
    CHECK_THAT(header_error("[]"), Contains("does not start with '{'"));
    CHECK_THAT(header_error(""), Contains("does not start with '{'"));
    CHECK_THAT(header_error(" {}"), Contains("does not start with '{'"));
    CHECK_THAT(header_error("\"str\""), Contains("does not start with '{'"));
  }
  SECTION("unknown dtype, naming the tensor") {
    auto message = header_error(obj({entry("w", "Q4", "[1]", 0, 1)}), "a");
    CHECK_THAT(message, Contains("tensor 'w'") && Contains("dtype 'Q4'"));
    CHECK_THAT(header_error(obj({entry("w", "F8_E4M3", "[1]", 0, 1)}), "a"), Contains("dtype 'F8_E4M3'"));
    CHECK_THAT(header_error(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,1]}})", "a"),
               Contains("dtype must be a string"));
  }
  SECTION("offsets outside the data section") {
    CHECK_THAT(header_error(obj({entry("w", "F32", "[2]", 0, 8)}), "1234"),
               Contains("tensor 'w'") && Contains("run past the data section"));
    CHECK_THAT(header_error(obj({entry("w", "U8", "[0]", 8, 8)}), "1234"),
               Contains("run past the data section"));
    CHECK_THAT(header_error(obj({entry("w", "U8", "[2]", 4, 2)}), "1234"), Contains("end before they begin"));
  }
  SECTION("offsets that do not match the shape") {
    CHECK_THAT(header_error(obj({entry("w", "F32", "[2]", 0, 4)}), "1234"),
               Contains("tensor 'w'") && Contains("span 4 bytes but F32 [2] needs 8"));
    CHECK_THAT(header_error(obj({entry("w", "BF16", "[3]", 0, 4)}), "1234"), Contains("needs 6"));
  }
  SECTION("overlapping tensors") {
    auto message = header_error(obj({entry("a", "U8", "[3]", 0, 3), entry("b", "U8", "[2]", 2, 4)}), "abcd");
    CHECK_THAT(message, Contains("tensor 'b'") && Contains("overlaps tensor 'a'"));
    CHECK_THAT(header_error(obj({entry("a", "U8", "[2]", 0, 2), entry("b", "U8", "[2]", 0, 2)}), "ab"),
               Contains("overlaps"));
    CHECK_THAT(header_error(obj({entry("a", "U8", "[4]", 0, 4), entry("e", "U8", "[0]", 2, 2)}), "abcd"),
               Contains("tensor 'e'") && Contains("overlaps tensor 'a'"));
  }
  SECTION("bytes that belong to no tensor") {
    CHECK_THAT(header_error(obj({entry("a", "U8", "[2]", 2, 4)}), "abcd"), Contains("bytes 0..2"));
    CHECK_THAT(header_error(obj({entry("a", "U8", "[2]", 0, 2)}), "abcd"), Contains("2 bytes after the last tensor"));
    CHECK_THAT(header_error("{}", "x"), Contains("1 bytes after the last tensor"));
  }
  SECTION("duplicate names") {
    CHECK_THAT(header_error(obj({entry("a", "U8", "[1]", 0, 1), entry("a", "U8", "[1]", 1, 2)}), "ab"),
               Contains("duplicate tensor name 'a'"));
    CHECK_THAT(header_error(R"({"__metadata__":{},"__metadata__":{}})"), Contains("duplicate tensor name '__metadata__'"));
    CHECK_THAT(header_error(R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "a"),
               Contains("duplicate key 'dtype'"));
  }
  SECTION("names in messages are escaped (one rule: escape_text) and cut short") {
    // A crafted name must not start a line of its own ("result: PASS") or send escape sequences.
    CHECK_THAT(header_error(obj({entry("a\\nresult: PASS", "U8", "[1]", 0, 1), entry("a\\nresult: PASS", "U8", "[1]", 1, 2)}),
                            "ab"),
               Contains("duplicate tensor name 'a\\nresult: PASS'"));
    CHECK_THAT(header_error(obj({entry("w\\u001b[31m", "Q9", "[1]", 0, 1)}), "a"), Contains("tensor 'w\\e[31m'"));
    const std::string long_name(5000, 'n');
    const auto message = header_error(obj({entry(long_name, "Q9", "[1]", 0, 1)}), "a");
    CHECK_THAT(message, Contains("tensor '" + std::string(200, 'n') + "...'"));
    CHECK(message.size() < 400);
  }
  SECTION("bad __metadata__") {
    CHECK_THAT(header_error(R"({"__metadata__":"x"})"), Contains("__metadata__ must be an object of strings"));
    CHECK_THAT(header_error(R"({"__metadata__":["a"]})"), Contains("__metadata__ must be an object"));
    CHECK_THAT(header_error(R"({"__metadata__":{"a":1}})"), Contains("__metadata__ value for 'a' must be a string"));
    CHECK_THAT(header_error(R"({"__metadata__":{"a":{"b":"c"}}})"), Contains("must be a string"));
  }
  SECTION("bad shapes, including products that overflow") {
    CHECK_THAT(header_error(obj({entry("w", "F32", "[-1]", 0, 0)})), Contains("non-negative integers"));
    CHECK_THAT(header_error(obj({entry("w", "F32", "[1.5]", 0, 0)})), Contains("fractional"));
    CHECK_THAT(header_error(obj({entry("w", "F32", "[\"2\"]", 0, 0)})), Contains("non-negative integers"));
    CHECK_THAT(header_error(obj({entry("w", "F32", "3", 0, 0)})), Contains("shape must be an array"));
    CHECK_THAT(header_error(obj({entry("w", "F32", "[4611686018427387904,4,0]", 0, 0)})),
               Contains("too many elements"));
    CHECK_THAT(header_error(obj({entry("w", "F32", "[9223372036854775808]", 0, 0)})),
               Contains("too many elements"));
    CHECK_THAT(header_error(obj({entry("w", "F32", "[4294967296,4294967296]", 0, 0)})),
               Contains("too many elements"));
    CHECK_THAT(header_error(obj({entry("w", "F64", "[2305843009213693952]", 0, 0)})),
               Contains("too many elements"));  // element count fits, byte count does not
    CHECK_THAT(header_error(obj({entry("w", "F32", "[99999999999999999999999]", 0, 0)})),
               Contains("non-negative integers"));  // beyond 64 bits: JSON gives a float
  }
  SECTION("bad entries") {
    CHECK_THAT(header_error(R"({"w":[1,2]})"), Contains("tensor 'w': entry must be an object"));
    CHECK_THAT(header_error(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", "a"), Contains("missing \"dtype\""));
    CHECK_THAT(header_error(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", "a"), Contains("missing \"shape\""));
    CHECK_THAT(header_error(R"({"w":{"dtype":"U8","shape":[1]}})", "a"), Contains("missing \"data_offsets\""));
    CHECK_THAT(header_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", "a"),
               Contains("two integers"));
    CHECK_THAT(header_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":["0",1]}})", "a"),
               Contains("non-negative integers"));
    CHECK_THAT(header_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "a"),
               Contains("non-negative integers"));
    CHECK_THAT(header_error(R"({"w":{"dtype":"U8","shape":[[[[[[[[1]]]]]]]],"data_offsets":[0,1]}})", "a"),
               Contains("nested"));
  }
}

TEST_CASE("safetensors: every truncation and many byte flips of a valid file fail cleanly", "[safetensors]") {
  TempDir dir;
  const std::vector<float> a{1, 2, 3};
  const std::vector<std::int16_t> b{4, 5};
  write_safetensors(dir / "ok.safetensors", {{"a", {a.data(), DType::F32, {3}, {}}}, {"b", {b.data(), DType::I16, {2}, {}}}},
                    {{"k", "v"}});
  const auto good = zoo::test::read_file(dir / "ok.safetensors");
  REQUIRE_NOTHROW(parse_safetensors_header(bytes_of(good), "ok"));

  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n << " bytes");
    const auto cut = good.substr(0, n);
    input_error([&] { parse_safetensors_header(bytes_of(cut), "cut"); });
  }
  // Any outcome but a crash or a foreign exception type is fine for a flipped byte.
  std::size_t rejected = 0;
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (unsigned char value : {0x00, 0x20, 0x22, 0x2c, 0x30, 0x39, 0x5b, 0x5d, 0x7b, 0x7d, 0xff}) {
      auto mutated = good;
      mutated[i] = static_cast<char>(value);
      try {
        parse_safetensors_header(bytes_of(mutated), "flip");
      } catch (const InputError&) {
        ++rejected;
      }
    }
  }
  CHECK(rejected > good.size());  // the header is most of the file: most flips must be caught
}

TEST_CASE("safetensors: opening files names the path in every error", "[safetensors]") {
  TempDir dir;
  using Catch::Contains;
  using Catch::StartsWith;
  const auto missing = dir / "missing.safetensors";
  CHECK_THAT(input_error([&] { SafetensorsFile::open(missing); }),
             StartsWith(missing.string() + ": ") && Contains("no such file"));
  CHECK_THAT(input_error([&] { SafetensorsFile::open(dir.path()); }), Contains("is a directory"));

  const auto empty = dir / "empty.safetensors";
  zoo::test::write_file(empty, "");
  CHECK(MappedFile(empty).bytes().empty());
  CHECK_THAT(input_error([&] { SafetensorsFile::open(empty); }), StartsWith(empty.string() + ": "));

  const auto bad = dir / "bad.safetensors";
  zoo::test::write_file(bad, raw_safetensors(obj({entry("layer.0.w", "F32", "[2]", 0, 8)}), "1234"));
  CHECK_THAT(input_error([&] { SafetensorsFile::open(bad); }),
             StartsWith(bad.string() + ": tensor 'layer.0.w'") && Contains("run past the data section"));
}

TEST_CASE("safetensors: MappedFile maps the bytes and moves ownership", "[safetensors]") {
  TempDir dir;
  zoo::test::write_file(dir / "f.bin", "hello");
  MappedFile a(dir / "f.bin");
  REQUIRE(a.bytes().size() == 5);
  CHECK(std::memcmp(a.bytes().data(), "hello", 5) == 0);
  const auto* data = a.bytes().data();
  MappedFile b(std::move(a));
  CHECK(b.bytes().data() == data);
  CHECK(a.bytes().empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  MappedFile c(dir / "f.bin");
  c = std::move(b);
  CHECK(c.bytes().data() == data);
  CHECK(c.path() == dir / "f.bin");
}

TEST_CASE("safetensors: writer rejects what it cannot write", "[safetensors]") {
  TempDir dir;
  const float x = 1;
  const TensorView v{&x, DType::F32, {1}, {}};
  using Catch::Contains;
  CHECK_THAT(input_error([&] { write_safetensors(dir / "d.safetensors", {{"a", v}, {"a", v}}); }),
             Contains("duplicate tensor name 'a'"));
  CHECK_THAT(input_error([&] { write_safetensors(dir / "m.safetensors", {{"__metadata__", v}}); }),
             Contains("reserved"));
  CHECK_THAT(input_error([&] { write_safetensors(dir / "n.safetensors", {{"a", {&x, DType::F32, {-1}, {}}}}); }),
             Contains("negative shape"));
  CHECK_THAT(input_error([&] { write_safetensors(dir / "c.safetensors", {{"a", {&x, DType::F32, {1}, {DeviceKind::CUDA, 0}}}}); }),
             Contains("not in host memory"));
  CHECK_THAT(input_error([&] { write_safetensors(dir / "u.safetensors", {{"bad\xff", v}}); }),
             Contains("not valid UTF-8"));
  const auto nowhere = dir / "no" / "such" / "dir.safetensors";
  CHECK_THAT(input_error([&] { write_safetensors(nowhere, {{"a", v}}); }),
             Catch::StartsWith(nowhere.string() + ": cannot write"));
}
