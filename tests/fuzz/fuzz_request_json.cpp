// libFuzzer target: a request JSON ({"input_ids": [...], ...}). parse_request must return a
// request with at least one id or throw zoo::InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "zoo/error.hpp"
#include "zoo/request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto request = zoo::parse_request(text, "fuzz/request.json");
    if (request.input_ids.empty()) __builtin_trap();
    (void)request.fields.dump();  // the rest is handed to plugins; it must be walkable
  } catch (const zoo::InputError&) {
  }
  return 0;
}
