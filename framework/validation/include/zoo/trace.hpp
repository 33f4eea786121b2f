#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "zoo/diagnostic_hook.hpp"

namespace zoo {

// A DiagnosticHook that keeps copies of the selected tap points, in the order they were recorded,
// and writes them as one safetensors trace. Recording a name twice appends rows along dim 0 (so a
// prefill followed by decode steps yields sequence-major tensors); a second record whose dtype or
// trailing dims differ throws std::invalid_argument (a model bug, not user input).
class TraceRecorder : public DiagnosticHook {
 public:
  explicit TraceRecorder(PointSelection selection);

  bool wants(std::string_view name) const override;
  void record(std::string_view name, const TensorView& tensor) override;

  const std::vector<std::pair<std::string, HostTensor>>& tensors() const { return tensors_; }
  const HostTensor* find(std::string_view name) const;
  void write(const std::filesystem::path& path, const std::map<std::string, std::string>& metadata = {}) const;

 private:
  PointSelection selection_;
  std::vector<std::pair<std::string, HostTensor>> tensors_;
};

// The default selection of `zoo trace`: "input_ids,embed,layer.*.output,final_norm,logits". The
// framework names no model: a model with outputs of its own (Model::extra_trace_points)
// documents them, and the caller appends them with the overload below (globs, comma-joined).
std::string default_trace_points();
std::string default_trace_points(const std::vector<std::string>& extra_points);

}  // namespace zoo
