#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zoo/tensor.hpp"

namespace zoo {

// Named tap points inside a forward pass (names in docs/validation.md). A model asks `wants(name)`
// before producing a tap and only then copies the tensor to the host. A forward pass given no hook
// (nullptr) does no extra work at all.
class DiagnosticHook {
 public:
  virtual ~DiagnosticHook() = default;
  virtual bool wants(std::string_view name) const = 0;
  // `tensor` is a host view, valid only during the call; float32 unless noted (ids are I64).
  virtual void record(std::string_view name, const TensorView& tensor) = 0;
};

// Shell-style glob: '*' matches any run of characters (dots included), '?' any one character.
bool glob_match(std::string_view pattern, std::string_view text);

// Tap-point selection by a list of globs.
class PointSelection {
 public:
  explicit PointSelection(std::vector<std::string> globs);
  // Splits "a,b,c".
  static PointSelection parse(std::string_view comma_separated);
  bool matches(std::string_view name) const;
  const std::vector<std::string>& globs() const { return globs_; }

 private:
  std::vector<std::string> globs_;
};

}  // namespace zoo
