// The Higgs delay pattern against its definition (DESIGN.md): for reference codes [T, K], row t of
// codebook c is BOC if t < c, codes[t-c][c] if c <= t < c+T, else EOC; T+K-1 rows.
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "delay_pattern.hpp"
#include "qwen3/fixture_test_util.hpp"
#include "zoo/model_spec.hpp"

namespace {

using Codes = std::vector<std::vector<std::int64_t>>;

Codes random_codes(std::mt19937_64& rng, std::int64_t T, std::int64_t K, std::int64_t codes) {
  std::uniform_int_distribution<std::int64_t> pick(0, codes - 1);
  Codes out(static_cast<std::size_t>(T), std::vector<std::int64_t>(static_cast<std::size_t>(K)));
  for (auto& row : out)
    for (auto& c : row) c = pick(rng);
  return out;
}

}  // namespace

TEST_CASE("higgs delay pattern matches its definition on random codes", "[higgs]") {
  std::mt19937_64 rng(20240611);
  for (const std::int64_t K : {1, 2, 3, 4, 8}) {
    for (const std::int64_t T : {1, 2, 3, 7, 20}) {
      INFO("T " << T << ", K " << K);
      const std::int64_t V = 1026;  // the real codebook: 1024 codes, BOC 1024, EOC 1025
      const std::int64_t boc = V - 2, eoc = V - 1;
      const Codes codes = random_codes(rng, T, K, V - 2);
      const Codes rows = zoo::higgs::apply_delay_pattern(codes, K, boc, eoc);
      REQUIRE(static_cast<std::int64_t>(rows.size()) == T + K - 1);
      for (std::size_t t = 0; t < rows.size(); ++t) {
        REQUIRE(static_cast<std::int64_t>(rows[t].size()) == K);
        for (std::int64_t c = 0; c < K; ++c) {
          const auto ti = static_cast<std::int64_t>(t);
          const std::int64_t expected = ti < c ? boc : (ti < c + T ? codes[ti - c][c] : eoc);
          REQUIRE(rows[t][c] == expected);
        }
      }
      // Column view: codebook c is the reference column shifted down by c, BOC before, EOC after,
      // so every column holds exactly c BOCs, T codes in order and K-1-c EOCs.
      for (std::int64_t c = 0; c < K; ++c) {
        std::vector<std::int64_t> column;
        for (const auto& row : rows) column.push_back(row[c]);
        std::vector<std::int64_t> expected(static_cast<std::size_t>(c), boc);
        for (const auto& row : codes) expected.push_back(row[c]);
        expected.insert(expected.end(), static_cast<std::size_t>(K - 1 - c), eoc);
        REQUIRE(column == expected);
      }
      // The first row has codebook 0's first code and BOC elsewhere; the last has EOC except the
      // last codebook's last code.
      CHECK(rows.front()[0] == codes.front()[0]);
      CHECK(rows.back()[K - 1] == codes.back()[K - 1]);
    }
  }
}

TEST_CASE("higgs delay pattern edge cases", "[higgs]") {
  using zoo::higgs::apply_delay_pattern;
  CHECK(apply_delay_pattern({}, 4, 64, 65).empty());
  CHECK_THROWS_AS(apply_delay_pattern({{1, 2, 3}}, 4, 64, 65), std::invalid_argument);
  CHECK_THROWS_AS(apply_delay_pattern({{1, 2, 3, 4}, {1, 2}}, 4, 64, 65), std::invalid_argument);
  CHECK_THROWS_AS(apply_delay_pattern({{1}}, 0, 64, 65), std::invalid_argument);
  // K = 1 is the identity.
  const Codes one{{5}, {6}, {7}};
  CHECK(apply_delay_pattern(one, 1, 64, 65) == one);
}

// The fixtures' requests were laid out by the Python generator: undoing the delay (reference code
// [t][c] = row[t+c][c]) and redoing it with our implementation must give the same rows back.
TEST_CASE("higgs delay pattern reproduces the fixture requests", "[higgs]") {
  for (const char* name : {"higgs-tiny", "higgs-tiny-k3", "higgs-tiny-hd128"}) {
    INFO("fixture " << name);
    const auto dir = zoo::ptest::fixture_dir(name);
    const auto config = zoo::load_hf_config(dir);
    const auto K = config.at("audio_encoder_config").at("num_codebooks").get<std::int64_t>();
    const auto V = config.at("audio_encoder_config").at("vocab_size").get<std::int64_t>();
    const auto request = nlohmann::json::parse(zoo::ptest::read_text(dir / "request.json"));
    const auto rows = request.at("audio_codes").get<Codes>();
    const auto T = static_cast<std::int64_t>(rows.size()) - K + 1;
    REQUIRE(T >= 1);
    Codes reference(static_cast<std::size_t>(T), std::vector<std::int64_t>(static_cast<std::size_t>(K)));
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < K; ++c) reference[t][c] = rows[t + c][c];
    CHECK(zoo::higgs::apply_delay_pattern(reference, K, V - 2, V - 1) == rows);
  }
}
