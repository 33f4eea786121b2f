#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "framework/validation_test_util.hpp"
#include "zoo/error.hpp"
#include "zoo/generation_config.hpp"

using namespace zoo;
using Catch::Contains;
using Catch::StartsWith;

TEST_CASE("generation defaults: generation_config.json's eos ids and sampling win over config.json",
          "[generation_config]") {
  vtest::ScratchDir d;
  // A released model's files (a sampling chat model with two stop ids).
  d.write("generation_config.json",
          R"({"bos_token_id": 7, "do_sample": true, "eos_token_id": [11, 12], "pad_token_id": 7,
              "temperature": 0.6, "top_k": 20, "top_p": 0.95})");
  const auto config = nlohmann::json::parse(R"({"eos_token_id": 12})");
  const auto g = load_generation_defaults(d.path(), config);
  CHECK(g.eos_token_ids == std::vector<std::int64_t>{11, 12});
  CHECK(g.eos_source == (d / "generation_config.json").string());
  CHECK(g.do_sample);
  const auto s = g.sampling();
  CHECK(s.temperature == Approx(0.6f));
  CHECK(s.top_k == 20);
  CHECK(s.top_p == Approx(0.95f));
}

TEST_CASE("generation defaults: transformers' defaults fill what the files leave out", "[generation_config]") {
  vtest::ScratchDir d;
  SECTION("no generation_config.json: eos from config.json, greedy") {
    const auto g = load_generation_defaults(d.path(), nlohmann::json::parse(R"({"eos_token_id": 5})"));
    CHECK(g.eos_token_ids == std::vector<std::int64_t>{5});
    CHECK(g.eos_source == (d / "config.json").string());
    CHECK_FALSE(g.do_sample);
    CHECK(g.sampling().temperature == 0.0f);  // greedy
    CHECK(g.sampling_source.empty());
  }
  SECTION("null or absent eos: nothing stops early") {
    CHECK(load_generation_defaults(d.path(), nlohmann::json::parse(R"({"eos_token_id": null})")).eos_token_ids.empty());
    CHECK(load_generation_defaults(d.path(), nlohmann::json::object()).eos_token_ids.empty());
  }
  SECTION("do_sample alone samples at temperature 1, top_k 50, top_p 1; eos falls back to config.json") {
    d.write("generation_config.json", R"({"do_sample": true})");
    const auto g = load_generation_defaults(d.path(), nlohmann::json::parse(R"({"eos_token_id": [3, 4]})"));
    CHECK(g.eos_token_ids == std::vector<std::int64_t>{3, 4});
    const auto s = g.sampling();
    CHECK(s.temperature == 1.0f);
    CHECK(s.top_k == 50);
    CHECK(s.top_p == 1.0f);
  }
  SECTION("sampling parameters without do_sample stay greedy, as in transformers") {
    d.write("generation_config.json", R"({"temperature": 0.7, "top_k": 5})");
    CHECK(load_generation_defaults(d.path(), nlohmann::json::object()).sampling().temperature == 0.0f);
  }
}

TEST_CASE("resolve_sampling: a sampling flag asks to sample, unset knobs take the model's, else GenerationConfig's",
          "[generation_config]") {
  GenerationDefaults greedy;  // no generation_config.json: do_sample false, 1 / 50 / 1
  SECTION("no flags on a greedy model: greedy, filters off") {
    const auto s = resolve_sampling(greedy, {});
    CHECK(s.temperature == 0.0f);
    CHECK(s.top_k == 0);
    CHECK(s.top_p == 1.0f);
  }
  SECTION("--temperature alone: top_k 50 and top_p 1, as transformers' defaults") {
    const auto s = resolve_sampling(greedy, {.temperature = 0.7f});
    CHECK(s.temperature == Approx(0.7f));
    CHECK(s.top_k == 50);
    CHECK(s.top_p == 1.0f);
  }
  SECTION("--top-p alone samples at temperature 1 with top_k 50") {
    const auto s = resolve_sampling(greedy, {.top_p = 0.9f});
    CHECK(s.temperature == 1.0f);
    CHECK(s.top_k == 50);
    CHECK(s.top_p == Approx(0.9f));
  }
  SECTION("--top-k alone samples at temperature 1, top_p 1") {
    const auto s = resolve_sampling(greedy, {.top_k = 5});
    CHECK(s.temperature == 1.0f);
    CHECK(s.top_k == 5);
    CHECK(s.top_p == 1.0f);
  }
  SECTION("--temperature 0 with --top-p stays greedy and keeps the flag, for Sampler to refuse") {
    const auto s = resolve_sampling(greedy, {.temperature = 0.0f, .top_p = 0.9f});
    CHECK(s.temperature == 0.0f);
    CHECK(s.top_p == Approx(0.9f));
    CHECK(s.top_k == 0);
    CHECK_THROWS_WITH(Sampler(s), Contains("--top-p 0.9") && Contains("greedy"));
  }
  SECTION("the model's values fill the knobs not given, even when its default is greedy") {
    GenerationDefaults file;
    file.temperature = 0.6f;
    file.top_k = 20;
    file.top_p = 0.95f;
    const auto s = resolve_sampling(file, {.top_p = 0.8f});
    CHECK(s.temperature == Approx(0.6f));
    CHECK(s.top_k == 20);
    CHECK(s.top_p == Approx(0.8f));
    CHECK(resolve_sampling(file, {}).temperature == 0.0f);
  }
  SECTION("--temperature 0 over a sampling model: greedy, the model's filters dropped") {
    GenerationDefaults file;
    file.do_sample = true;
    file.top_k = 20;
    const auto s = resolve_sampling(file, {.temperature = 0.0f});
    CHECK(s.temperature == 0.0f);
    CHECK(s.top_k == 0);
    CHECK_NOTHROW(Sampler(s));
  }
}

TEST_CASE("generation defaults: malformed fields are InputErrors naming the file", "[generation_config]") {
  vtest::ScratchDir d;
  const auto file = (d / "generation_config.json").string();
  auto error = [&](const std::string& text) -> std::string {
    d.write("generation_config.json", text);
    try {
      load_generation_defaults(d.path(), nlohmann::json::object());
    } catch (const InputError& e) {
      return e.what();
    }
    FAIL("no InputError for " << text);
    return {};
  };
  CHECK_THAT(error(R"({"eos_token_id": "x"})"), StartsWith(file + ": ") && Contains("eos_token_id"));
  CHECK_THAT(error(R"({"eos_token_id": [1, -2]})"), StartsWith(file + ": ") && Contains("eos_token_id"));
  CHECK_THAT(error(R"({"eos_token_id": 1.5})"), StartsWith(file + ": ") && Contains("eos_token_id"));
  CHECK_THAT(error(R"({"do_sample": "yes"})"), StartsWith(file + ": ") && Contains("do_sample"));
  CHECK_THAT(error(R"({"temperature": -1})"), StartsWith(file + ": ") && Contains("temperature"));
  // Past float's range a temperature became inf, and the sampler blamed --temperature.
  CHECK(error(R"({"temperature": 1e300})") == file + ": temperature must be within [0, 100], got 1e+300");
  CHECK_THAT(error(R"({"temperature": 101})"), StartsWith(file + ": temperature must be within [0, 100]"));
  CHECK_THAT(error(R"({"top_k": 2.5})"), StartsWith(file + ": ") && Contains("top_k"));
  CHECK_THAT(error(R"({"top_p": 2})"), StartsWith(file + ": ") && Contains("top_p"));
  CHECK_THAT(error("[1]"), StartsWith(file + ": "));
  CHECK_THROWS_WITH(parse_eos_token_ids(nlohmann::json::parse(R"({"eos_token_id": {}})"), "cfg"),
                    StartsWith("cfg: ") && Contains("eos_token_id"));
}

TEST_CASE("generation defaults: odd files are refused by name and quoted values are cut short",
          "[generation_config]") {
  vtest::ScratchDir d;
  const auto file = d / "generation_config.json";
  auto error = [&]() -> std::string {
    try {
      load_generation_defaults(d.path(), nlohmann::json::object());
    } catch (const InputError& e) {
      return e.what();
    }
    FAIL("no InputError");
    return {};
  };
  SECTION("a symlink loop is reported, not skipped as absent") {
    std::filesystem::create_symlink(file, file);
    CHECK_THAT(error(), StartsWith(file.string() + ": symlink loop"));
  }
  SECTION("a FIFO") {
    REQUIRE(::mkfifo(file.c_str(), 0600) == 0);
    CHECK_THAT(error(), StartsWith(file.string() + ": is a FIFO"));
  }
  SECTION("a directory") {
    std::filesystem::create_directory(file);
    CHECK_THAT(error(), StartsWith(file.string() + ": is a directory"));
  }
  SECTION("a huge or control-laden value is escaped and cut") {
    d.write("generation_config.json", R"({"do_sample": ")" + std::string(100000, 'y') + R"("})");
    const auto message = error();
    CHECK_THAT(message, Contains("do_sample") && Contains("..."));
    CHECK(message.size() < 400);
    d.write("generation_config.json", R"({"temperature": "a\nresult: PASS"})");
    CHECK_THAT(error(), !Contains("\n"));
  }
  SECTION("nested deeper than the JSON cap") {
    d.write("generation_config.json", "{\"x\": " + std::string(100, '[') + std::string(100, ']') + "}");
    CHECK_THAT(error(), StartsWith(file.string() + ": ") && Contains("nested"));
  }
}
