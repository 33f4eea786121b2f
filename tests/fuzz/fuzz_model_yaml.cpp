// libFuzzer target: a model YAML (and the gates YAML it may hold). parse_model_spec must return a
// spec or throw zoo::InputError. Relative paths resolve under a directory that does not exist, so
// the existence checks of checkpoint/request/golden only stat, never open.
#include <cstddef>
#include <cstdint>
#include <string>

#include "zoo/error.hpp"
#include "zoo/model_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto spec = zoo::parse_model_spec(text, "/nonexistent-zoo-fuzz/model.yaml");
    if (spec.max_context <= 0) __builtin_trap();
  } catch (const zoo::InputError&) {
  }
  return 0;
}
