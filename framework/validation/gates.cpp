#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "host/yaml_checks.hpp"
#include "zoo/error.hpp"
#include "zoo/gates.hpp"

namespace zoo {

namespace yc = yaml_checks;

namespace {

const std::vector<std::string_view> kGateKeys = {"tensor", "cosine", "max_abs", "mean_abs", "rmse",
                                                               "nmse",   "regret", "argmax",  "exact",    "topk"};

// An upper bound on an error metric. A bound no value can exceed is a gate that passes whatever
// is compared: refused like a malformed one, so a typo cannot turn a check into a rubber stamp.
double non_negative(const std::string& label, const YAML::Node& node, std::string_view what) {
  const double value = yc::as_number(label, node, what);
  if (value < 0) yc::fail(label, node, fmt::format("gate {} must be >= 0, got {}", what, value));
  if (!std::isfinite(value))
    yc::fail(label, node, fmt::format("gate {} = {} can never fail; give a finite bound", what, value));
  return value;
}

Gate parse_gate(const YAML::Node& node, const std::string& label, const std::string& group) {
  Gate gate;
  gate.group = group;
  bool have_tensor = false;
  for (const auto& e : yc::map_entries(label, node, "a gate", kGateKeys)) {
    const auto& v = e.value;
    if (e.key == "tensor") {
      gate.pattern = yc::as_string(label, v, "gate tensor");
      if (gate.pattern.empty()) yc::fail(label, v, "gate tensor pattern is empty");
      have_tensor = true;
    } else if (e.key == "cosine") {
      const double c = yc::as_number(label, v, "cosine");
      if (c < -1 || c > 1) yc::fail(label, v, fmt::format("gate cosine must be within (-1, 1], got {}", c));
      if (c == -1) yc::fail(label, v, "gate cosine -1 can never fail (every cosine is >= -1); give a value above -1");
      gate.min_cosine = c;
    } else if (e.key == "max_abs") {
      gate.max_abs = non_negative(label, v, "max_abs");
    } else if (e.key == "mean_abs") {
      gate.max_mean_abs = non_negative(label, v, "mean_abs");
    } else if (e.key == "rmse") {
      gate.max_rmse = non_negative(label, v, "rmse");
    } else if (e.key == "nmse") {
      gate.max_nmse = non_negative(label, v, "nmse");
    } else if (e.key == "regret") {
      gate.max_regret = non_negative(label, v, "regret");
    } else if (e.key == "argmax") {
      if (!v.IsScalar() || v.Scalar() != "exact")
        yc::fail(label, v, "gate argmax must be 'exact' (every row's argmax equals the golden's)");
      gate.argmax_exact = true;
    } else if (e.key == "exact") {
      gate.exact = yc::as_bool(label, v, "exact");
    } else if (e.key == "topk") {
      TopK topk;
      bool have_k = false, have_min = false;
      for (const auto& t : yc::map_entries(label, v, "gate topk", {"k", "min_overlap"})) {
        if (t.key == "k") {
          const auto k = yc::as_int(label, t.value, "topk.k");
          if (k <= 0 || k > 1'000'000) yc::fail(label, t.value, fmt::format("topk.k must be a positive integer, got {}", k));
          topk.k = static_cast<int>(k);
          have_k = true;
        } else {
          const auto m = yc::as_int(label, t.value, "topk.min_overlap");
          if (m < 0 || m > 1'000'000) yc::fail(label, t.value, fmt::format("topk.min_overlap must be >= 1, got {}", m));
          if (m == 0) yc::fail(label, t.value, "topk.min_overlap 0 can never fail; give at least 1");
          topk.min_overlap = static_cast<int>(m);
          have_min = true;
        }
      }
      if (!have_k || !have_min) yc::fail(label, v, "gate topk needs both k and min_overlap");
      if (topk.min_overlap > topk.k)
        yc::fail(label, v, fmt::format("topk.min_overlap {} exceeds k {}", topk.min_overlap, topk.k));
      gate.topk = topk;
    }
  }
  if (!have_tensor) yc::fail(label, node, "a gate needs 'tensor: GLOB'");
  const bool checks_something = gate.min_cosine || gate.max_abs || gate.max_mean_abs || gate.max_rmse ||
                                gate.max_nmse || gate.exact || gate.wants_rows();
  if (!checks_something)
    yc::fail(label, node,
             fmt::format("gate for '{}' checks nothing (give at least one of cosine, max_abs, mean_abs, rmse, nmse, "
                         "regret, argmax, exact, topk)",
                         gate.pattern));
  return gate;
}

void parse_list(const YAML::Node& node, const std::string& label, const std::string& group, std::vector<Gate>& out) {
  for (const auto& item : node) out.push_back(parse_gate(item, label, group));
}

}  // namespace

std::vector<Gate> parse_gates(const YAML::Node& node, const std::string& label) {
  std::vector<Gate> gates;
  if (!node.IsDefined() || node.IsNull()) return gates;
  if (node.IsSequence()) {
    parse_list(node, label, "", gates);
    return gates;
  }
  if (!node.IsMap())
    yc::fail(label, node,
             fmt::format("gates must be a list of gates or a map of group name -> list, got {}", yc::kind_name(node)));
  std::vector<std::string> groups;
  for (const auto& item : node) {
    if (!item.first.IsScalar()) yc::fail(label, item.first, "gate group names must be plain names");
    const std::string group = item.first.Scalar();
    if (std::find(groups.begin(), groups.end(), group) != groups.end())
      yc::fail(label, item.first, fmt::format("duplicate gate group '{}'", group));
    groups.push_back(group);
    if (!item.second.IsSequence()) {
      const bool looks_like_gate =
          std::find(kGateKeys.begin(), kGateKeys.end(), std::string_view(group)) != kGateKeys.end();
      yc::fail(label, item.second,
               looks_like_gate
                   ? std::string("gates must be a list of gates or a map of group name -> list; this looks like a "
                                 "single gate: write it as a list item ('- tensor: ...')")
                   : fmt::format("gate group '{}' must be a list of gates, got {}", group, yc::kind_name(item.second)));
    }
    parse_list(item.second, label, group, gates);
  }
  return gates;
}

std::vector<Gate> load_gates(const std::filesystem::path& yaml_file) {
  const std::string label = yaml_file.string();
  const YAML::Node root = yc::load_file(yaml_file);
  // A gates file may hold the gates alone, under `gates:`, or be a whole model config. (No Node
  // assignment here: yaml-cpp's operator= rewrites the shared node instead of rebinding.)
  const auto pick = [&]() -> YAML::Node {
    if (!root.IsMap()) return root;
    if (root["gates"]) return root["gates"];
    if (root["validation"]) {
      const YAML::Node validation = root["validation"];
      if (!validation.IsMap() || !validation["gates"]) yc::fail(label, validation, "validation has no gates");
      return validation["gates"];
    }
    return root;
  };
  const YAML::Node node = pick();
  auto gates = parse_gates(node, label);
  if (gates.empty()) throw InputError(label + ": holds no gates (a gate file that checks nothing cannot pass)");
  return gates;
}

}  // namespace zoo
