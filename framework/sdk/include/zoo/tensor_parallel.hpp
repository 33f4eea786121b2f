#pragma once
// The extension a model offers when it splits its layers over ranks (ModelArgs::tensor_parallel,
// model.tensor_parallel in the YAML). The host asks for it whenever more than one rank is asked
// for and refuses a model without it, naming the plugin: a plugin that never read the field would
// otherwise run on one device and say nothing.
#include <string_view>

#include "zoo/extension.hpp"

namespace zoo {

class TensorParallel : public Extension {
 public:
  static constexpr std::string_view kName = "zoo.tensor_parallel.v1";
  static constexpr std::string_view kLacking =
      "does not split over ranks (model.tensor_parallel / --tensor-parallel)";
  // The ranks the model runs over (ModelArgs::tensor_parallel as it was honoured).
  virtual int ranks() const = 0;

 protected:
  ~TensorParallel() = default;
};

}  // namespace zoo
