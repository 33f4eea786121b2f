#pragma once
// Gates: the thresholds a comparison must meet, read from YAML (gates.cpp).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace zoo {

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

  // Whether the gate needs per-row logit metrics (argmax, regret, top-k) of the tensors it matches.
  bool wants_rows() const { return argmax_exact || max_regret.has_value() || topk.has_value(); }
};

// `gates:` YAML: either a list of {tensor: GLOB, cosine: x, ...} or a map of group -> list. Unknown
// keys, wrong types, and gates that check nothing are InputErrors with `label:line:col`. A null or
// absent node gives no gates.
std::vector<Gate> parse_gates(const YAML::Node& node, const std::string& label);
// A YAML file holding the gates alone, under `gates:`, or a model config's `validation.gates`.
// InputError when it holds no gate.
std::vector<Gate> load_gates(const std::filesystem::path& yaml_file);

}  // namespace zoo
