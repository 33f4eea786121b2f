// The sampling rule against transformers' own logits processors: tests/fixtures/sampling/goldens.json
// (tools/golden/make_sampling_goldens.py, run where torch and transformers are).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "zoo/model_spec.hpp"
#include "zoo/sampling.hpp"

using namespace zoo;

TEST_CASE("sampling goldens: penalties, temperature, top-k, top-p and min-p give transformers' distribution and "
          "greedy pick",
          "[generation]") {
  // tests/fixtures/sampling/goldens.json: tools/golden/make_sampling_goldens.py (transformers' logits
  // processors; presence and frequency by vLLM's rule, which transformers lacks).
  const auto file = std::filesystem::path(ZOO_SOURCE_DIR) / "tests/fixtures/sampling/goldens.json";
  const auto doc = load_json_object(file);
  const auto& cases = doc.at("cases");
  REQUIRE(cases.size() >= 12);
  int sampled = 0, penalized = 0;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const auto& k = cases[c];
    INFO("case " << c);
    std::vector<float> row;
    for (const auto& x : k.at("logits")) row.push_back(static_cast<float>(x.get<double>()));
    const auto tokens = k.at("tokens").get<std::vector<std::int32_t>>();
    const SampleRequest r{.temperature = k.at("temperature").get<float>(),
                          .top_k = k.at("top_k").get<int>(),
                          .top_p = k.at("top_p").get<float>(),
                          .min_p = k.at("min_p").get<float>(),
                          .repetition_penalty = k.at("repetition_penalty").get<float>(),
                          .frequency_penalty = k.at("frequency_penalty").get<float>(),
                          .presence_penalty = k.at("presence_penalty").get<float>(),
                          .output_start = k.at("output_start").get<std::int64_t>()};
    penalized += r.penalized();
    apply_penalties(row, tokens, r);
    CHECK(sample_logits(row, SampleRequest{}).id == k.at("greedy").get<std::int64_t>());
    if (!k.contains("probs")) continue;
    ++sampled;
    const auto want = k.at("probs").get<std::vector<double>>();
    const auto got = sampling_distribution(row, r);
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t v = 0; v < got.size(); ++v) {
      worst = std::max(worst, std::abs(got[v] - want[v]));
      CHECK((got[v] == 0) == (want[v] == 0));  // the same ids kept
    }
    CHECK(worst <= 1e-6);
  }
  CHECK(sampled >= 8);
  CHECK(penalized >= 10);
}
