// Hostile input files (docs/safety.md, "Input files"): FIFOs and devices are refused without
// blocking, text inputs have a size cap, JSON and YAML have depth limits, YAML aliases cannot blow
// up, symlink loops say so, parse errors never echo the bytes of a file that is not what it
// should be, and a shard index cannot reach outside its checkpoint.
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include "framework/weights_test_util.hpp"
#include "zoo/checked.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/input_file.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/request.hpp"
#include "zoo/safetensors.hpp"
#include "zoo/weight_source.hpp"

using namespace zoo;
using namespace zoo::test;
using Catch::Contains;
using Catch::StartsWith;
namespace fs = std::filesystem;

namespace {

fs::path make_fifo(const TempDir& dir, const std::string& name) {
  const fs::path p = dir / name;
  REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
  return p;
}

// A file of `size` bytes that occupies no disk space.
void make_sparse(const fs::path& p, std::uint64_t size) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
  ::close(fd);
}

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST_CASE("a FIFO given as any input file is refused at once, never read", "[input]") {
  TempDir dir;
  // Without O_NONBLOCK each of these blocked forever in open(), waiting for a writer.
  const fs::path fifo = make_fifo(dir, "pipe");
  CHECK_THAT(input_error([&] { load_request(fifo); }), StartsWith(fifo.string() + ": is a FIFO"));
  CHECK_THAT(input_error([&] { load_json_object(fifo); }), StartsWith(fifo.string() + ": is a FIFO"));
  CHECK_THAT(input_error([&] { load_model_spec(fifo); }), StartsWith(fifo.string() + ": is a FIFO"));
  CHECK_THAT(input_error([&] { SafetensorsFile::open(fifo); }), StartsWith(fifo.string() + ": is a FIFO"));
  CHECK_THAT(input_error([&] { open_checkpoint(fifo); }), StartsWith(fifo.string() + ": is a FIFO"));

  // An index, a config.json or a shard that is a FIFO inside a checkpoint directory.
  fs::create_directories(dir / "ckpt");
  make_fifo(dir, "ckpt/model.safetensors.index.json");
  make_fifo(dir, "ckpt/config.json");
  CHECK_THAT(input_error([&] { open_checkpoint(dir / "ckpt"); }), Contains("model.safetensors.index.json: is a FIFO"));
  CHECK_THAT(input_error([&] { load_hf_config(dir / "ckpt"); }), Contains("config.json: is a FIFO"));
  fs::create_directories(dir / "sharded");
  write_file(dir / "sharded/model.safetensors.index.json", R"({"weight_map": {"w": "shard.safetensors"}})");
  make_fifo(dir, "sharded/shard.safetensors");
  CHECK_THAT(input_error([&] { open_checkpoint(dir / "sharded"); }), Contains("shard.safetensors: is a FIFO"));
}

TEST_CASE("a character device is refused, not read until memory runs out", "[input]") {
  REQUIRE(fs::exists("/dev/zero"));
  CHECK_THAT(input_error([] { load_request("/dev/zero"); }), StartsWith("/dev/zero: is a device"));
  CHECK_THAT(input_error([] { load_json_object("/dev/zero"); }), StartsWith("/dev/zero: is a device"));
  CHECK_THAT(input_error([] { load_model_spec("/dev/zero"); }), StartsWith("/dev/zero: is a device"));
  CHECK_THAT(input_error([] { SafetensorsFile::open("/dev/zero"); }), StartsWith("/dev/zero: is a device"));
}

TEST_CASE("text inputs larger than their cap are refused by size, before reading", "[input]") {
  TempDir dir;
  make_sparse(dir / "big.json", kMaxJsonFileBytes + 1);
  CHECK_THAT(input_error([&] { load_request(dir / "big.json"); }),
             StartsWith((dir / "big.json").string() + ": file is") && Contains("64 MiB limit"));
  CHECK_THAT(input_error([&] { load_json_object(dir / "big.json"); }), Contains("64 MiB limit"));
  make_sparse(dir / "big.yaml", kMaxYamlFileBytes + 1);
  CHECK_THAT(input_error([&] { load_model_spec(dir / "big.yaml"); }), Contains("4 MiB limit"));
  // At the cap itself the file is read (and here fails as JSON, not by size).
  make_sparse(dir / "at-cap.yaml", 16);
  CHECK_THAT(input_error([&] { load_model_spec(dir / "at-cap.yaml"); }), !Contains("limit"));
}

TEST_CASE("JSON nested 200k deep is an error naming the file, not a stack overflow", "[input]") {
  TempDir dir;
  const std::string deep = nested(200'000);
  write_file(dir / "config.json", "{\"a\": " + deep + "}");
  CHECK_THAT(input_error([&] { load_json_object(dir / "config.json"); }),
             StartsWith((dir / "config.json").string() + ": JSON is nested more than 64 levels deep"));
  write_file(dir / "request.json", "{\"input_ids\": [1], \"x\": " + deep + "}");
  CHECK_THAT(input_error([&] { load_request(dir / "request.json"); }), Contains("nested more than 64 levels"));
  fs::create_directories(dir / "ckpt");
  write_file(dir / "ckpt/model.safetensors.index.json", "{\"weight_map\": {}, \"metadata\": " + deep + "}");
  CHECK_THAT(input_error([&] { open_checkpoint(dir / "ckpt"); }), Contains("nested more than 64 levels"));
  // 64 levels are fine.
  CHECK(parse_json_text(nested(64), "x").is_array());
  CHECK_THROWS_AS(parse_json_text(nested(65), "x"), InputError);
}

TEST_CASE("JSON errors do not echo the bytes of a file that is not JSON", "[input]") {
  TempDir dir;
  // A file named as config.json or as a request that is really something else (a key, a password
  // file): the message says where parsing failed, never what was read.
  write_file(dir / "secret", "root:x:0:0:SECRET-TOKEN-123\n");
  const auto config_error = input_error([&] { load_json_object(dir / "secret"); });
  CHECK_THAT(config_error, StartsWith((dir / "secret").string() + ": not valid JSON"));
  CHECK_THAT(config_error, !Contains("SECRET") && !Contains("root:x"));
  CHECK_THAT(input_error([&] { load_request(dir / "secret"); }), !Contains("root"));
  write_file(dir / "secret2", "{\"a\": tSECRET}");
  CHECK_THAT(input_error([&] { load_json_object(dir / "secret2"); }), !Contains("SECRET"));
  write_file(dir / "secret3", "{\"a\" SECRET}");
  CHECK_THAT(input_error([&] { load_json_object(dir / "secret3"); }), !Contains("SECRET") && Contains("expected"));
  // A number too large for a double names the problem, not the digits.
  CHECK_THAT(input_error([] { parse_json_text("{\"rope_theta\": 1e400}", "c.json"); }),
             Contains("number overflow") && !Contains("1e400"));
}

TEST_CASE("symlink loops are named as such", "[input]") {
  TempDir dir;
  fs::create_symlink(dir / "loop", dir / "loop");
  CHECK_THAT(input_error([&] { load_request(dir / "loop"); }), Contains("symlink loop"));
  CHECK_THAT(input_error([&] { load_json_object(dir / "loop"); }), Contains("symlink loop"));
  CHECK_THAT(input_error([&] { open_checkpoint(dir / "loop"); }), Contains("symlink loop"));
  CHECK_THAT(input_error([&] { SafetensorsFile::open(dir / "loop"); }), Contains("symlink loop"));
  write_file(dir / "m.yaml", "model:\n  checkpoint: loop\n");
  CHECK_THAT(input_error([&] { load_model_spec(dir / "m.yaml"); }), Contains("m.yaml:2:") && Contains("symlink loop"));
}

TEST_CASE("an index whose weight_map leaves the checkpoint directory is refused before opening", "[input]") {
  TempDir dir;
  fs::create_directories(dir / "ckpt");
  write_file(dir / "outside.safetensors", raw_safetensors("{}"));
  for (const std::string shard : {"../outside.safetensors", "../../etc/passwd", "/etc/passwd", "a/../../x", ""}) {
    INFO(shard);
    write_file(dir / "ckpt/model.safetensors.index.json",
               nlohmann::json{{"weight_map", {{"w", shard}}}}.dump());
    const auto error = input_error([&] { open_checkpoint(dir / "ckpt"); });
    CHECK_THAT(error, Contains("not a file inside the checkpoint directory"));
    CHECK_THAT(error, !Contains("root:"));
  }
  // A file in a subdirectory of the checkpoint is fine.
  fs::create_directories(dir / "ckpt/sub");
  write_file(dir / "ckpt/sub/s.safetensors",
             raw_safetensors(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"));
  write_file(dir / "ckpt/model.safetensors.index.json", R"({"weight_map": {"w": "sub/s.safetensors"}})");
  CHECK(open_checkpoint(dir / "ckpt")->contains("w"));
}

TEST_CASE("a checkpoint directory with both a single file and an index is an error naming both", "[input]") {
  TempDir dir;
  write_file(dir / "model.safetensors", raw_safetensors(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"));
  write_file(dir / "model.safetensors.index.json", R"({"weight_map": {}})");
  CHECK_THAT(input_error([&] { open_checkpoint(dir.path()); }),
             StartsWith(dir.path().string() + ": ") && Contains("model.safetensors and model.safetensors.index.json"));
  fs::remove(dir / "model.safetensors.index.json");
  CHECK(open_checkpoint(dir.path())->contains("w"));
}

TEST_CASE("YAML nesting and alias expansion are bounded", "[input]") {
  TempDir dir;
  const auto yaml_error = [&](const std::string& text) {
    write_file(dir / "m.yaml", text);
    return input_error([&] { load_model_spec(dir / "m.yaml"); });
  };
  // 100k levels overflowed yaml-cpp's recursive parser (or hit its own 2000-level guard only after
  // deep recursion); now the limit is 64 and the message names the line.
  CHECK_THAT(yaml_error("model: " + nested(100'000) + "\n"), Contains("m.yaml:1:") && Contains("nested more than 64"));
  CHECK_THAT(yaml_error("model: " + nested(65) + "\n"), Contains("nested more than 64"));
  CHECK_THAT(yaml_error("model: " + nested(60) + "\n"), Contains("model must be a map"));

  // A billion-laughs document: each level doubles; 30 levels expand to 2^30 copies.
  std::string bomb = "a0: &a0 [\"" + std::string(100, 'x') + "\"]\n";
  for (int i = 1; i <= 30; ++i) bomb += fmt::format("a{}: &a{} [*a{}, *a{}]\n", i, i, i - 1, i - 1);
  CHECK_THAT(yaml_error(bomb), Contains("alias bomb"));
  // 20k aliases of a 1 MB scalar as validation points: each was copied and parsed, 20 GB in all.
  fs::create_directories(dir / "ckpt");
  std::string wide = "model:\n  checkpoint: ckpt\nvalidation:\n  points: [&big \"" + std::string(1 << 20, 'y') + "\"";
  for (int i = 0; i < 20000; ++i) wide += ", *big";
  CHECK_THAT(yaml_error(wide + "]\n"), Contains("alias bomb"));
  CHECK_THAT(yaml_error("model: &m {checkpoint: *m}\n"), Contains("cycle"));
  // Ordinary aliases still work.
  write_file(dir / "ok.yaml", "x: &c ckpt\nmodel:\n  checkpoint: *c\n");
  CHECK_THAT(input_error([&] { load_model_spec(dir / "ok.yaml"); }), Contains("unknown key 'x'"));
  write_file(dir / "ok.yaml", "model: &m\n  checkpoint: ckpt\n  max_context: 64\n");
  CHECK(load_model_spec(dir / "ok.yaml").max_context == 64);
}

TEST_CASE("model.max_context is bounded in the YAML, before any allocation", "[input]") {
  TempDir dir;
  fs::create_directories(dir / "ckpt");
  write_file(dir / "m.yaml", "model:\n  checkpoint: ckpt\n  max_context: 576460752303423489\n");
  CHECK_THAT(input_error([&] { load_model_spec(dir / "m.yaml"); }),
             Contains("m.yaml:3:") && Contains("model.max_context 576460752303423489 is larger than the limit"));
  write_file(dir / "m.yaml", fmt::format("model:\n  checkpoint: ckpt\n  max_context: {}\n", kMaxContextTokens));
  CHECK(load_model_spec(dir / "m.yaml").max_context == kMaxContextTokens);
}

TEST_CASE("checked size arithmetic names the quantity and never wraps", "[input]") {
  CHECK(checked_mul(1 << 20, 1 << 20, "x") == std::int64_t{1} << 40);
  CHECK_THAT(input_error([] { checked_mul(std::int64_t{1} << 62, 4, "heads x head_dim"); }),
             StartsWith("heads x head_dim: ") && Contains("does not fit"));
  CHECK_THAT(input_error([] { checked_add(INT64_MAX, 1, "sum"); }), StartsWith("sum: "));
  // A later zero must not hide an earlier overflow.
  CHECK_THROWS_AS(checked_product({std::int64_t{1} << 40, std::int64_t{1} << 40, 0}, "p"), InputError);
  CHECK(checked_product({2, 3, 7}, "p") == 42);
  CHECK_THAT(input_error([] { check_range(0, 1, 10, "n"); }), Contains("n = 0 is out of range (expected 1..10)"));
  CHECK_THAT(input_error([] { check_open_range(std::nan(""), 0, 1, "eps"); }), Contains("eps = nan is not a finite"));
  CHECK_THAT(input_error([] { check_open_range(1e308, 0, 1, "eps"); }), Contains("eps = 1e+308 is out of range"));
}

TEST_CASE("a 100k-tensor safetensors header parses in linear time", "[input][safetensors]") {
  // Measured on the (heavily shared) 2-core dev box, Release: 0.6 s of CPU for this whole test
  // case, building the 6.5 MB header included. The old parser (nlohmann's callback parser, which
  // rescans the parent object at every object end) was quadratic: 40k tensors took over 120 s.
  // No timed assertion (it would flake): correctness at this size is the check, and a quadratic
  // parser runs into ctest's timeout.
  constexpr int kTensors = 100'000;
  std::string header = "{";
  for (int i = 0; i < kTensors; ++i)
    header += fmt::format("{}\"t{}\":{{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[{},{}]}}", i ? "," : "", i,
                          i, i + 1);
  header += "}";
  const std::string file = raw_safetensors(header, std::string(kTensors, 'z'));
  const auto parsed = parse_safetensors_header(std::as_bytes(std::span(file)), "big");
  REQUIRE(parsed.entries.size() == kTensors);
  CHECK(parsed.entries.front().name == "t0");
  CHECK(parsed.entries.back().name == "t99999");
  CHECK(parsed.entries.back().begin == kTensors - 1);
}
