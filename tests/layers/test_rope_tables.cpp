// RoPE tables (layers/src/rope.cpp) against the tables transformers computes for the same
// config.json fields (tests/fixtures/rope/inv_freq.json, tools/fixtures/make_rope_tables.py).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "zoo/error.hpp"
#include "zoo/layers/hf_config.hpp"

namespace {

using nlohmann::json;

json golden() {
  std::ifstream in(std::filesystem::path(ZOO_SOURCE_DIR) / "tests/fixtures/rope/inv_freq.json");
  return json::parse(in);
}

}  // namespace

TEST_CASE("rope tables equal transformers' for default, linear, llama3 and yarn scaling", "[layers][rope]") {
  const json cases = golden().at("cases");
  REQUIRE(cases.size() >= 7);
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    INFO(name);
    const json& config = c.at("config");
    const auto p = zoo::layers::read_hf_rope_parameters(config, name);
    const auto table = zoo::layers::make_rope_table(p, config.at("head_dim").get<std::int64_t>(), name);
    const auto& want = c.at("inv_freq");
    REQUIRE(table.inv_freq.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double w = want[i].get<double>();
      worst = std::max(worst, std::abs(table.inv_freq[i] - w) / w);
    }
    // float32 arithmetic in transformers' order: equal up to an ulp or two of float32.
    CHECK(worst <= 3e-7);
    CHECK(table.attention_scaling == Approx(c.at("attention_scaling").get<double>()).epsilon(1e-6));
  }
}

TEST_CASE("llama3 scaling changes the low and middle bands and keeps the high one", "[layers][rope]") {
  const json all = golden();  // range-for over golden().at(...) would outlive the temporary
  for (const auto& c : all.at("cases")) {
    if (c.at("name") != "llama3.1 8B hd128") continue;
    const json& config = c.at("config");
    auto p = zoo::layers::read_hf_rope_parameters(config, "llama3");
    const auto scaled = zoo::layers::make_rope_table(p, 128, "llama3");
    p.type = "default";
    const auto plain = zoo::layers::make_rope_table(p, 128, "default");
    int kept = 0, divided = 0, blended = 0;
    for (std::size_t i = 0; i < plain.inv_freq.size(); ++i) {
      const float a = plain.inv_freq[i], b = scaled.inv_freq[i];
      if (a == b) ++kept;
      else if (std::abs(b - a / 8) <= 1e-7 * a) ++divided;
      else ++blended;
    }
    CHECK(kept > 0);
    CHECK(divided > 0);
    CHECK(blended > 0);
  }
}

TEST_CASE("rope parameters that make no sense are InputErrors naming the field", "[layers][rope][input]") {
  auto error_for = [](const json& config) {
    try {
      (void)zoo::layers::make_rope_table(zoo::layers::read_hf_rope_parameters(config, "ckpt/config.json"), 64,
                                         "ckpt/config.json");
    } catch (const zoo::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(error_for({{"rope_scaling", {{"rope_type", "linear"}}}}), Contains("factor"));
  CHECK_THAT(error_for({{"rope_scaling", {{"rope_type", "linear"}, {"factor", -2.0}}}}), Contains("factor"));
  CHECK_THAT(error_for({{"rope_scaling",
                         {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0},
                          {"original_max_position_embeddings", 8192}}}}),
             Contains("low_freq_factor"));
  CHECK_THAT(error_for({{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}}),
             Contains("original_max_position_embeddings"));
  CHECK_THAT(error_for({{"rope_parameters", {{"rope_type", "dynamic"}, {"factor", 4.0}}}}), Contains("dynamic"));
  CHECK_THAT(error_for({{"rope_parameters", {{"rope_type", "linear"}, {"factor", 2.0}, {"partial_rotary_factor", 0.5}}}}),
             Contains("partial_rotary_factor"));
  CHECK_THAT(error_for({{"rope_theta", "big"}}), Contains("rope_theta"));
}
