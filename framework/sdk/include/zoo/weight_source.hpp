#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zoo/tensor.hpp"

namespace zoo {

struct TensorInfo {
  std::string stored_name;  // the name inside the file
  std::string file;         // the file that holds it
  DType dtype = DType::F32;
  Shape shape;
  std::size_t nbytes = 0;
};

// Where a model's tensors come from. Models only ever ask a WeightSource for tensors by name.
// Views point at mapped file bytes: nothing is copied.
class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // Every tensor name this source answers to, sorted.
  virtual std::vector<std::string> names() const = 0;
  virtual std::optional<TensorInfo> info(std::string_view name) const = 0;
  // Throws InputError "NAME (stored as S) not found in DESCRIPTION" when absent.
  virtual TensorView view(std::string_view name) const = 0;
  // What this source is, for messages: "checkpoint models/my-model".
  virtual std::string describe() const = 0;
  // The stored name a requested name resolves to (itself for plain sources).
  virtual std::string stored_name(std::string_view name) const { return std::string(name); }
  // The checkpoint's __metadata__ merged over all files.
  virtual std::map<std::string, std::string> metadata() const { return {}; }

  bool contains(std::string_view name) const { return info(name).has_value(); }
};

}  // namespace zoo
