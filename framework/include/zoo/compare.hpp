#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <yaml-cpp/yaml.h>

#include "zoo/tensor.hpp"

namespace zoo {

// Metrics of one actual tensor against its golden (float64 accumulation).
struct TensorMetrics {
  std::string name;
  Shape shape;
  bool shape_match = true;
  bool integer = false;           // integer tensors compare exactly
  std::int64_t mismatches = 0;    // integer tensors: differing elements
  double cosine = 1.0;
  double max_abs = 0.0;
  std::int64_t max_abs_index = 0;  // flat index of max_abs
  double mean_abs = 0.0;
  double rmse = 0.0;
  double p99_abs = 0.0;
  double nmse = 0.0;  // MSE / Var(golden)
  // Logit-like tensors (rank 2, compared row by row):
  bool has_rows = false;
  std::int64_t rows = 0;
  std::int64_t argmax_matches = 0;
  double max_regret = 0.0;    // nats of log-softmax: golden_max - golden[actual_argmax]
  int topk = 0;
  double min_topk_overlap = 0.0;  // smallest per-row overlap of top-k sets (ties to lower index)
};

struct TopK {
  int k = 0;
  int min_overlap = 0;
};

// Thresholds for tensors whose name matches `pattern` (glob). Unset thresholds are not checked.
struct Gate {
  std::string pattern;
  std::optional<double> min_cosine, max_abs, max_mean_abs, max_rmse, max_nmse, max_regret;
  bool argmax_exact = false;  // every row's argmax equals the golden's
  bool exact = false;         // bitwise/elementwise equality (integer tensors)
  std::optional<TopK> topk;
  std::string group;  // label from the YAML ("semantic", "strict"), for reports
};

struct GateResult {
  std::string tensor;
  std::string gate_group;
  std::string check;  // "cosine >= 0.99999"
  double value = 0.0;
  bool passed = true;
};

struct CompareReport {
  std::vector<TensorMetrics> tensors;      // golden order
  std::vector<std::string> only_golden;    // in golden, not in actual
  std::vector<std::string> only_actual;
  std::vector<GateResult> gate_results;
  bool passed() const;
  // First tensor (golden order) with a failed gate, and the one with the lowest cosine.
  std::optional<std::string> first_failure() const;
  std::optional<std::string> worst_tensor() const;
  std::string table() const;
  nlohmann::json to_json() const;
};

TensorMetrics compare_tensors(const std::string& name, const TensorView& golden, const TensorView& actual,
                              int topk = 0);

// `gates:` YAML: either a list of {tensor: GLOB, cosine: x, ...} or a map of group -> list. Unknown
// keys are InputErrors with `label:line:col`.
std::vector<Gate> parse_gates(const YAML::Node& node, const std::string& label);
std::vector<Gate> load_gates(const std::filesystem::path& yaml_file);

// Compares every tensor of golden present in actual (restricted to `only` when non-empty) and
// applies gates. A gate whose pattern matches a golden tensor missing from actual fails.
CompareReport compare_traces(const std::filesystem::path& golden, const std::filesystem::path& actual,
                             const std::vector<Gate>& gates);

}  // namespace zoo
