#pragma once
// The extension a model offers when it honours ModelArgs::batch_invariant (model.batch_invariant in
// the YAML, --batch-invariant): every sequence's logits are bitwise those of its run alone, whatever
// else shares the forward pass (batch size, neighbours, chunking of its prompt), so greedy ids and
// seeded samples do not depend on the load. The host asks for it whenever the mode is asked for and
// refuses a model without it, naming the plugin, so a plugin that never read the field cannot
// ignore it silently.
#include <string_view>

#include "zoo/extension.hpp"

namespace zoo {

class BatchInvariant : public Extension {
 public:
  static constexpr std::string_view kName = "zoo.batch_invariant.v1";
  static constexpr std::string_view kLacking =
      "does not compute batch-invariantly (model.batch_invariant / --batch-invariant)";
  // Whether the mode is on (ModelArgs::batch_invariant as it was honoured).
  virtual bool batch_invariant() const = 0;

 protected:
  ~BatchInvariant() = default;
};

}  // namespace zoo
