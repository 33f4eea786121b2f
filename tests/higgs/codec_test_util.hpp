#pragma once
// What the codec tests share: the relative L2 distance their stage gates use, and a loaded
// codec encoder over a fixture directory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <vector>

#include "codec_encoder.hpp"
#include "higgs_config.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/load_plan.hpp"

namespace zoo::ptest {

// |got - want| / |want| over the whole tensor (float64 sums).
inline double rel_l2(const std::vector<float>& want, const std::vector<float>& got) {
  REQUIRE(want.size() == got.size());
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// The Higgs codec encoder of checkpoint `dir`, its load plan checked clean, loaded (CPU).
inline std::unique_ptr<higgs::CodecEncoder> loaded_encoder(const std::filesystem::path& dir) {
  auto weights = open_checkpoint(dir);
  auto encoder = std::make_unique<higgs::CodecEncoder>(weights, higgs::kCodecPrefix);
  const LoadPlan plan = make_load_plan(encoder->requirements(), *weights);
  INFO(plan.table());
  REQUIRE(plan.ok());
  encoder->load();
  return encoder;
}

}  // namespace zoo::ptest
