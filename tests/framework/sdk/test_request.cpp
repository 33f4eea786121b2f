#include <catch2/catch.hpp>

#include "framework/validation_test_util.hpp"
#include "zoo/error.hpp"
#include "zoo/request.hpp"

using namespace zoo;
using Catch::Contains;
using Catch::StartsWith;

TEST_CASE("parse_request takes input_ids and keeps every other field", "[request]") {
  const auto r = parse_request(R"({"input_ids": [1, -2, 9007199254740993], "audio_codes": [[1, 2]], "note": "x"})",
                               "req.json");
  CHECK(r.file == "req.json");
  CHECK(r.input_ids == std::vector<std::int64_t>{1, -2, 9007199254740993LL});  // above 2^53: exact
  CHECK_FALSE(r.fields.contains("input_ids"));
  CHECK(r.fields.size() == 2);
  CHECK(r.fields.at("audio_codes") == nlohmann::json::parse("[[1, 2]]"));
  CHECK(r.fields.at("note") == "x");

  const auto plain = parse_request(R"({"input_ids": [5]})", "p.json");
  CHECK(plain.fields.is_object());
  CHECK(plain.fields.empty());
}

TEST_CASE("parse_request accepts the int64 extremes", "[request]") {
  const auto r = parse_request(R"({"input_ids": [9223372036854775807, -9223372036854775808]})", "r.json");
  CHECK(r.input_ids[0] == std::numeric_limits<std::int64_t>::max());
  CHECK(r.input_ids[1] == std::numeric_limits<std::int64_t>::min());
}

TEST_CASE("parse_request errors name the file and what is wrong", "[request]") {
  const auto fails = [](const std::string& text) {
    try {
      parse_request(text, "dir/req.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    FAIL("no InputError for " << text);
    return std::string();
  };
  CHECK_THAT(fails("{\"input_ids\": [1, 2"), StartsWith("dir/req.json: not valid JSON"));
  CHECK_THAT(fails(""), StartsWith("dir/req.json: not valid JSON"));
  CHECK_THAT(fails("[1, 2, 3]"), StartsWith("dir/req.json: ") && Contains("JSON object"));
  CHECK_THAT(fails("{\"ids\": [1]}"), StartsWith("dir/req.json: ") && Contains("input_ids"));
  CHECK_THAT(fails("{\"input_ids\": []}"), StartsWith("dir/req.json: input_ids is empty"));
  CHECK_THAT(fails("{\"input_ids\": 5}"), StartsWith("dir/req.json: input_ids must be an array"));
  CHECK_THAT(fails("{\"input_ids\": [1, 2, 3, 4.5]}"), StartsWith("dir/req.json: input_ids[3] is not an integer"));
  CHECK_THAT(fails("{\"input_ids\": [1, \"2\"]}"), StartsWith("dir/req.json: input_ids[1] is not an integer"));
  CHECK_THAT(fails("{\"input_ids\": [null]}"), StartsWith("dir/req.json: input_ids[0] is not an integer"));
  CHECK_THAT(fails("{\"input_ids\": [[1]]}"), StartsWith("dir/req.json: input_ids[0] is not an integer"));
  CHECK_THAT(fails("{\"input_ids\": [1, 9223372036854775808]}"),
             StartsWith("dir/req.json: input_ids[1]") && Contains("int64"));
  CHECK_THAT(fails("{\"input_ids\": [1e30]}"), StartsWith("dir/req.json: input_ids[0] is not an integer"));
  // Deep nesting is refused while parsing, before any recursive walk of the tree.
  const std::string deep = "{\"input_ids\": [" + std::string(20000, '[') + std::string(20000, ']') + "]}";
  CHECK_THAT(fails(deep), StartsWith("dir/req.json: JSON is nested more than 64 levels deep"));
  const std::string shallow = "{\"input_ids\": [" + std::string(10, '[') + std::string(10, ']') + "]}";
  CHECK_THAT(fails(shallow), StartsWith("dir/req.json: input_ids[0] is not an integer (a JSON array)"));
}

TEST_CASE("load_request reads files and reports unreadable ones", "[request]") {
  vtest::ScratchDir dir;
  const auto file = dir.write("r.json", R"({"input_ids": [3, 4], "extra": {"a": 1}})");
  const auto r = load_request(file);
  CHECK(r.input_ids == std::vector<std::int64_t>{3, 4});
  CHECK(r.file == file);
  CHECK(r.fields.at("extra").at("a") == 1);

  const auto missing = dir / "nope.json";
  CHECK_THROWS_WITH(load_request(missing), StartsWith(missing.string() + ": ") && Contains("no such file"));
  CHECK_THROWS_WITH(load_request(dir.path()), StartsWith(dir.path().string() + ": ") && Contains("directory"));
  const auto bad = dir.write("bad.json", "{\"input_ids\": [1,]}");
  CHECK_THROWS_WITH(load_request(bad), StartsWith(bad.string() + ": not valid JSON"));
}
