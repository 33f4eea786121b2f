#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "zoo/weight_source.hpp"

namespace zoo {

// What a model needs from its WeightSource, declared before anything is read.
struct TensorRequirement {
  std::string name;
  Shape shape;
  std::vector<DType> accepted;  // empty: any dtype
  bool optional = false;        // e.g. an lm_head that is tied when absent
};

struct PlanEntry {
  enum class Status { Ok, Missing, OptionalMissing, ShapeMismatch, DTypeMismatch };
  TensorRequirement requirement;
  std::string stored_name;  // what the source resolves the name to; set even when missing
  std::optional<TensorInfo> found;
  Status status = Status::Ok;
};

// Computed from headers only: no payload read, no device memory allocated.
struct LoadPlan {
  std::string source;  // WeightSource::describe()
  std::vector<PlanEntry> entries;
  std::vector<std::string> unused;  // stored tensors nobody asked for
  std::size_t total_bytes = 0;      // of the tensors that will be loaded

  bool ok() const;  // no Missing / ShapeMismatch / DTypeMismatch
  std::size_t problem_count() const;
  std::string table() const;  // human-readable, one row per tensor, then a summary
  nlohmann::json to_json() const;
};

LoadPlan make_load_plan(const std::vector<TensorRequirement>& requirements, const WeightSource& source);

std::string_view status_name(PlanEntry::Status status);

}  // namespace zoo
