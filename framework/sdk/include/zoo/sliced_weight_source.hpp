#pragma once
// A WeightSource that presents fused stored tensors as their parts (sliced_weight_source.cpp): a
// checkpoint that keeps q|k|v in one qkv_proj, or gate|up in one gate_up_proj, read by a model that
// asks for q_proj, k_proj, ... The parts are row ranges of the stored tensor (dimension 0, as a
// Linear's output features), so a view is a pointer into the stored bytes: nothing is copied.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zoo/weight_source.hpp"

namespace zoo {

// Rows [begin, begin + count) of a view along its first dimension: a pointer into the same bytes
// (a fused tensor's part here, a rank's rows in ShardedWeightSource).
TensorView row_range(const TensorView& whole, std::int64_t begin, std::int64_t count);

// One fused tensor kind: every stored name ending in `fused` (e.g. "self_attn.qkv_proj.weight")
// is split into consecutive row ranges, part i being rows [sum of earlier rows, + rows) and named
// by replacing that ending with parts[i].suffix. The rows must add up to the stored rows.
struct SliceRule {
  struct Part {
    std::string suffix;
    std::int64_t rows = 0;
  };
  std::string fused;
  std::vector<Part> parts;
};

class SlicedWeightSource : public WeightSource {
 public:
  SlicedWeightSource(std::shared_ptr<const WeightSource> base, std::vector<SliceRule> rules);

  // The base's names with each fused tensor replaced by its parts.
  std::vector<std::string> names() const override;
  // A part's info: the stored tensor's, with its rows (an InputError naming the stored tensor when
  // its rows are not the sum of the parts'); other names pass through.
  std::optional<TensorInfo> info(std::string_view name) const override;
  TensorView view(std::string_view name) const override;
  std::string describe() const override;
  std::string stored_name(std::string_view name) const override;
  std::map<std::string, std::string> metadata() const override { return base_->metadata(); }

 private:
  struct Match {
    std::string stored;
    const SliceRule* rule = nullptr;
    std::size_t part = 0;
  };
  std::optional<Match> match(std::string_view name) const;
  // The stored tensor's info, checked against the rule (rank >= 1, the parts' rows in total).
  TensorInfo checked(const Match& m) const;

  std::shared_ptr<const WeightSource> base_;
  std::vector<SliceRule> rules_;
};

}  // namespace zoo
