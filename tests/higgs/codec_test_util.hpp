#pragma once
// What the codec tests share: the relative L2 distance their stage gates use, a loaded codec
// encoder over a fixture directory, and a weight source of the real codec's shapes alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "codec_encoder.hpp"
#include "higgs_config.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/model_spec.hpp"

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

// Headers only, from a `zoo synth --extra-tensors` list: what the plugin derives from the real
// codec's names and shapes, without 0.4 GB of weights (and no codec_config.json beside it).
class ShapesOnlySource : public WeightSource {
 public:
  explicit ShapesOnlySource(const fs::path& list) {
    const nlohmann::json doc = load_json_object(list);
    for (const auto& t : doc.at("tensors")) {
      TensorInfo info;
      info.stored_name = t.at("name").get<std::string>();
      info.dtype = DType::BF16;
      for (const auto& d : t.at("shape")) info.shape.push_back(d.get<std::int64_t>());
      infos_[info.stored_name] = info;
    }
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, info] : infos_) out.push_back(name);
    return out;
  }
  std::optional<TensorInfo> info(std::string_view name) const override {
    auto it = infos_.find(std::string(name));
    if (it == infos_.end()) return std::nullopt;
    return it->second;
  }
  TensorView view(std::string_view name) const override {
    throw InputError(fmt::format("{}: headers only", name));
  }
  std::string describe() const override { return "a shapes list"; }
  void set_shape(const std::string& name, Shape shape) { infos_.at(name).shape = std::move(shape); }

 private:
  std::map<std::string, TensorInfo> infos_;
};

}  // namespace zoo::ptest
