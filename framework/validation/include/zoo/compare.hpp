#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "zoo/gates.hpp"
#include "zoo/tensor.hpp"

namespace zoo {

// Metrics of one actual tensor against its golden (float64 accumulation).
struct TensorMetrics {
  std::string name;
  Shape shape;         // the golden's
  Shape actual_shape;  // differs from `shape` only when shape_match is false
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
  // NaN and infinities in each tensor. Any makes every metric above NaN and fails every gate on
  // the tensor; max_abs_index then points at the first one.
  std::int64_t golden_non_finite = 0;
  std::int64_t actual_non_finite = 0;
  std::int64_t first_non_finite = -1;  // flat index, -1 when none
  // Logit-like tensors (rank 2, compared row by row):
  bool has_rows = false;
  std::int64_t rows = 0;
  std::int64_t argmax_matches = 0;
  std::int64_t first_argmax_mismatch = -1;  // row index, -1 when every row matches
  double max_regret = 0.0;    // nats of log-softmax: golden_max - golden[actual_argmax]
  double mean_regret = 0.0;
  int topk = 0;
  double min_topk_overlap = 0.0;  // smallest per-row overlap of top-k sets (ties to lower index)
};

struct GateResult {
  std::string tensor;      // the gate's pattern when it matched no tensor at all
  std::string gate_group;
  std::string check;  // "cosine >= 0.99999", "present" (missing from actual), "matches a tensor"
  double value = 0.0;
  bool passed = true;
};

// Tensor order everywhere in a report is the forward order: the golden's file order, with the
// tensors the actual trace holds re-ordered by the actual's record order (Zoo records taps as the
// forward pass produces them; a golden may be sorted by name), and `layer.N.` indices sorted
// numerically (layer.2 before layer.10), so the first failing tensor is where drift starts.
struct CompareReport {
  std::vector<TensorMetrics> tensors;      // forward order (above)
  std::vector<std::string> only_golden;    // in golden, not in actual
  std::vector<std::string> only_actual;
  std::vector<GateResult> gate_results;  // grouped by tensor, forward order; pattern failures last
  std::vector<std::string> order;          // every golden name considered, forward order
  // At least one gate check measured a compared tensor (passed or not). Nothing checked is not a
  // pass: without this, no gates, disjoint names or an empty golden would all "pass".
  bool evaluated() const;
  // Some gate was evaluated, every gate result passed and every compared shape matched.
  bool passed() const;
  // First tensor (forward order) with a failed gate or a shape mismatch (measured failures before
  // tensors missing from the actual trace), and the float tensor with
  // the lowest cosine (NaN counts as lowest; ties by larger NMSE; none when all match exactly).
  std::optional<std::string> first_failure() const;
  std::optional<std::string> worst_tensor() const;
  std::string table() const;
  nlohmann::json to_json() const;
};

// Per-row logit metrics are computed for floating tensors of rank >= 1 (rows over the last dim) when
// `logit_metrics`, `topk > 0`, or the name ends with "logits". Host views of any dtype.
TensorMetrics compare_tensors(const std::string& name, const TensorView& golden, const TensorView& actual,
                              int topk = 0, bool logit_metrics = false);

// Smallest per-row overlap of the top-k index sets (ties to the lower index); shapes must match.
std::int64_t min_topk_overlap(const TensorView& golden, const TensorView& actual, int k);

// Named host tensors in file (or record) order: a trace in memory.
using NamedTensors = std::vector<std::pair<std::string, TensorView>>;

// compare_traces on tensors already in memory (e.g. a TraceRecorder's, without writing a file).
CompareReport compare_trace_tensors(const NamedTensors& golden, const NamedTensors& actual,
                                    const std::vector<Gate>& gates, const std::vector<std::string>& only = {});

// Compares every tensor of golden present in actual (restricted to golden names matching a glob of
// `only` when non-empty) and applies gates. A gate whose pattern matches a golden tensor missing
// from actual fails, and so does a gate whose pattern matches no golden tensor at all.
CompareReport compare_traces(const std::filesystem::path& golden, const std::filesystem::path& actual,
                             const std::vector<Gate>& gates, const std::vector<std::string>& only = {});

}  // namespace zoo
