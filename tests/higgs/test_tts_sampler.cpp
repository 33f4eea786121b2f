// The Higgs TTS per-codebook sampler against the first-party filter formula (goldens computed with
// torch by tools/fixtures/make_higgs_tts_fixtures.py), greedy rules, and the draws statistically.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "tts_sampler.hpp"
#include "zoo/error.hpp"

namespace zoo::higgs {
namespace {

nlohmann::json sampler_cases() {
  std::ifstream in(std::filesystem::path(ZOO_SOURCE_DIR) / "tests" / "fixtures" / "higgs-tts-sampler.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in).at("cases");
}

std::vector<float> floats(const nlohmann::json& values) {
  std::vector<float> out;
  for (const auto& v : values)
    out.push_back(v.is_null() ? -std::numeric_limits<float>::infinity() : static_cast<float>(v.get<double>()));
  return out;
}

TtsSampling params(const nlohmann::json& c, std::uint64_t seed = 0) {
  return {c.at("temperature").get<float>(), c.at("top_k").get<int>(), c.at("top_p").get<float>(), seed};
}

}  // namespace

TEST_CASE("tts sampler: filtered probabilities equal the first-party formula", "[higgs][tts]") {
  const auto cases = sampler_cases();
  REQUIRE(cases.size() >= 10);
  for (const auto& c : cases) {
    INFO(c.at("name").get<std::string>());
    const auto logits = floats(c.at("logits"));
    const auto want = c.at("probs").get<std::vector<double>>();
    const auto got = filtered_probabilities(logits, params(c));
    REQUIRE(got.size() == want.size());
    double worst = 0;
    int kept = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::abs(got[i] - want[i]));
      // The kept set is exact: ties at the k-th value stay, the token crossing top-p stays.
      CHECK((got[i] > 0) == (want[i] > 0));
      kept += got[i] > 0;
    }
    CHECK(worst <= 1e-6);
    CHECK(kept == c.at("kept").get<int>());
  }
}

TEST_CASE("tts sampler: greedy at temperature <= 1e-5 takes the first maximum", "[higgs][tts]") {
  const std::vector<float> logits{0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  for (float t : {0.0f, 1e-6f, 1e-5f}) {
    TtsSampler s({t, 50, 1.0f, 7});
    for (int i = 0; i < 5; ++i) CHECK(s.sample(logits) == 1);
  }
  // Just above the threshold it samples: index 3 (tied with 1) must come up.
  TtsSampler warm({0.5f, 0, 1.0f, 7});
  bool saw3 = false;
  for (int i = 0; i < 200; ++i) saw3 |= warm.sample(logits) == 3;
  CHECK(saw3);
  CHECK_THROWS_AS(argmax_first(std::vector<float>{1.0f, std::nanf("")}), std::invalid_argument);
}

TEST_CASE("tts sampler: seeded draws are reproducible", "[higgs][tts]") {
  const auto c = sampler_cases().at(0);
  const auto logits = floats(c.at("logits"));
  auto draws = [&](std::uint64_t seed) {
    TtsSampler s(params(c, seed));
    std::vector<std::int64_t> out;
    for (int i = 0; i < 300; ++i) out.push_back(s.sample(logits));
    return out;
  };
  CHECK(draws(42) == draws(42));
  CHECK(draws(42) != draws(43));
  // sample_rows draws codebook 0 first, from consecutive slices.
  std::vector<float> two(logits);
  two.insert(two.end(), logits.begin(), logits.end());
  TtsSampler a(params(c, 9)), b(params(c, 9));
  const auto rows = a.sample_rows(two, 2);
  CHECK(rows == std::vector<std::int64_t>{b.sample(logits), b.sample(logits)});
}

TEST_CASE("tts sampler: draws follow the filtered distribution (chi-square)", "[higgs][tts]") {
  for (const auto& c : sampler_cases()) {
    const int kept = c.at("kept").get<int>();
    // Cases with enough cells, each with a useful expected count: the top-k path (ties at the k-th
    // value) and the top-p path (crossing token). The plain top-k case adds time, not coverage.
    if (kept < 5 || kept > 30) continue;
    INFO(c.at("name").get<std::string>());
    const auto logits = floats(c.at("logits"));
    const auto probs = c.at("probs").get<std::vector<double>>();  // the reference's, not ours
    TtsSampler s(params(c, 20261130));
    const int n = 100000;
    std::map<std::int64_t, int> counts;
    for (int i = 0; i < n; ++i) ++counts[s.sample(logits)];
    double chi2 = 0;
    int cells = 0;
    for (std::size_t i = 0; i < probs.size(); ++i) {
      if (probs[i] == 0) {
        CHECK(counts.count(static_cast<std::int64_t>(i)) == 0);  // removed tokens never come up
        continue;
      }
      const double expected = probs[i] * n;
      const double d = counts[static_cast<std::int64_t>(i)] - expected;
      chi2 += d * d / expected;
      ++cells;
    }
    // dof = cells - 1 <= 29; the 1e-4 upper quantile of chi-square(29) is ~63. Generous bound
    // with a fixed seed: a wrong filter or a biased draw lands far above it.
    INFO("chi2 " << chi2 << " over " << cells << " cells");
    CHECK(chi2 < cells - 1 + 6.0 * std::sqrt(2.0 * (cells - 1)) + 10);
  }
}

TEST_CASE("tts sampler: bad parameters and rows", "[higgs][tts]") {
  CHECK_THROWS_AS(TtsSampler({-1.0f, 0, 1.0f, 0}), InputError);
  CHECK_THROWS_AS(TtsSampler({std::numeric_limits<float>::infinity(), 0, 1.0f, 0}), InputError);
  CHECK_THROWS_AS(TtsSampler({1.0f, 0, 1.5f, 0}), InputError);
  TtsSampler s({1.0f, 0, 1.0f, 0});
  const float inf = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(s.sample(std::vector<float>{-inf, -inf}), std::invalid_argument);
  CHECK_THROWS_AS(s.sample(std::vector<float>{0.0f, std::nanf("")}), std::invalid_argument);
  CHECK_THROWS_AS(s.sample_rows(std::vector<float>{0, 1, 2}, 2), std::invalid_argument);
}


TEST_CASE("tts sampler: uniforms drawn ahead pick what sample_rows picks", "[higgs][tts]") {
  // The device path draws a row's K uniforms before the forward step; the codes and the stream
  // must not change for it.
  std::vector<float> logits;
  for (int i = 0; i < 3 * 40; ++i) logits.push_back(static_cast<float>((i * 7919) % 23) * 0.3f - 2.0f);
  for (const TtsSampling s :
       {TtsSampling{0.8f, 50, 1.0f, 5}, TtsSampling{1.0f, 4, 0.8f, 9}, TtsSampling{0.0f, 50, 1.0f, 1}}) {
    TtsSampler a(s), b(s);
    for (int row = 0; row < 10; ++row) {
      const std::vector<double> u = b.uniforms(3);
      CHECK(u.size() == (s.temperature > 0 ? 3u : 0u));
      CHECK(b.sample_rows(logits, 3, u) == a.sample_rows(logits, 3));
      CHECK(a.state() == b.state());
    }
    const HeadSampleRequest r = b.head_request(3, b.uniforms(3));
    CHECK(r.rule == SegmentSampleRule::threshold_top_k_index_cdf);
    CHECK(r.segments == 3);
    CHECK(r.temperature == s.temperature);
    CHECK(r.u.size() == (s.temperature > 0 ? 3u : 0u));
  }
  // Greedy by the threshold asks the device for temperature 0, its greedy.
  CHECK(TtsSampler({1e-6f, 50, 1.0f, 0}).head_request(3, {}).temperature == 0.0f);
}

TEST_CASE("tts sampler: accept() refuses device picks of broken rows as sample() refuses the rows", "[higgs][tts]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const SampledToken good{.id = 3}, with_nan{.id = 0, .bad_index = 4, .bad_value = nan},
      with_inf{.id = 2, .bad_index = 2, .bad_value = inf}, masked{.id = 0, .all_masked = true};
  const TtsSampler sampled({0.8f, 50, 1.0f, 0}), greedy({0.0f, 50, 1.0f, 0});
  CHECK(sampled.accept(std::vector{good, good}) == std::vector<std::int64_t>{3, 3});
  CHECK_THROWS_WITH(sampled.accept(std::vector{good, with_nan}), "logits hold NaN at index 4");
  CHECK_THROWS_WITH(greedy.accept(std::vector{with_nan}), "logits hold NaN at index 4");
  CHECK_THROWS_WITH(sampled.accept(std::vector{with_inf}), "logits are all -inf (or +inf present)");
  CHECK_THROWS_WITH(sampled.accept(std::vector{masked}), "logits are all -inf (or +inf present)");
  // Greedy takes the first maximum: a +inf, or index 0 of an all -inf row, as argmax_first does.
  CHECK(greedy.accept(std::vector{with_inf, masked}) == std::vector<std::int64_t>{2, 0});
}

}  // namespace zoo::higgs
