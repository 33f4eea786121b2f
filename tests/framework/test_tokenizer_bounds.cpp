// tokenizer.json is untrusted input: ids, regexes, added tokens and normalizers in it must not
// make loading or encoding allocate or run without bound. Each case is sized so the code before
// the bounds took many seconds (or gigabytes) on it; with them it takes milliseconds.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "framework/tokenizer_fixture_util.hpp"
#include "zoo/error.hpp"
#include "zoo/tokenizer.hpp"

namespace fs = std::filesystem;
using Json = nlohmann::json;
using zoo::Tokenizer;
using Ids = std::vector<int64_t>;

namespace {

// A minimal BPE tokenizer.json: the given vocab, no merges, optional parts merged in.
Json minimal(Json vocab) {
  return Json{{"model", {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", Json::array()}}}};
}

fs::path write_json(const std::string& name, const Json& j) {
  const fs::path p = fs::temp_directory_path() / fmt::format("zoo-tokb-{}-{}.json", ::getpid(), name);
  std::ofstream(p) << j.dump();
  return p;
}

// The message of the InputError that f throws ("" and a failed check if it throws none).
template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const zoo::InputError& e) {
    return e.what();
  }
  FAIL_CHECK("no InputError");
  return "";
}

Json added(int64_t id, const std::string& content, Json extra = Json::object()) {
  Json t{{"id", id}, {"content", content}, {"special", true}, {"normalized", false}};
  t.update(extra);
  return t;
}

}  // namespace

TEST_CASE("tokenizer bounds: ids beyond the file's entries are refused, not allocated", "[tokenizer][bounds]") {
  // Tables are indexed by id: an id far beyond the entry count used to size them (2^28 -> 8.5 GB).
  {
    const auto f = write_json("vocab-id", minimal({{"a", 0}, {"far", 1 << 24}}));
    const auto msg = input_error([&] { Tokenizer::from_file(f); });
    CHECK_THAT(msg, Catch::Contains(f.string()) && Catch::Contains("'far'") && Catch::Contains("16777216"));
    fs::remove(f);
  }
  {
    Json j = minimal({{"a", 0}, {"b", 1}});
    j["decoder"] = {{"type", "ByteLevel"}};
    j["added_tokens"] = Json::array({added(1 << 28, "<far>")});
    const auto f = write_json("added-id", j);
    const auto msg = input_error([&] { Tokenizer::from_file(f); });
    CHECK_THAT(msg, Catch::Contains(f.string()) && Catch::Contains("<far>"));
    fs::remove(f);
  }
  // Out of range or not an integer: refused without overflow (UBSan watches the INT64_MAX case).
  const std::vector<std::pair<std::string, Json>> bad_ids = {
      {"int64max", std::numeric_limits<int64_t>::max()},
      {"uint64max", std::numeric_limits<uint64_t>::max()},
      {"negative", -1},
      {"2^31", int64_t{1} << 31},
      {"fraction", 1.5},
      {"string", "3"}};
  for (const auto& [name, id] : bad_ids) {
    INFO(name);
    Json j = minimal({{"a", 0}});
    j["decoder"] = {{"type", "ByteLevel"}};
    j["added_tokens"] = Json::array({{{"id", id}, {"content", "<bad>"}, {"special", true}}});
    const auto f = write_json("added-" + name, j);
    CHECK_THAT(input_error([&] { Tokenizer::from_file(f); }), Catch::Contains(f.string()));
    Json v = minimal({{"a", 0}, {"b", id}});
    const auto g = write_json("vocab-" + name, v);
    CHECK_THAT(input_error([&] { Tokenizer::from_file(g); }), Catch::Contains(g.string()) && Catch::Contains("'b'"));
    fs::remove(f);
    fs::remove(g);
  }
  // Small holes stay legal (some real files have them): an added token a few ids past the vocab.
  Json j = minimal({{"a", 0}, {"b", 1}, {"c", 2}});
  j["added_tokens"] = Json::array({added(9, "<x>")});
  const auto f = write_json("hole", j);
  const auto tok = Tokenizer::from_file(f);
  CHECK(tok.vocab_size() == 10);
  CHECK(tok.encode("ab<x>") == Ids{0, 1, 9});
  CHECK(tok.id_to_token(5) == std::nullopt);
  fs::remove(f);
}
