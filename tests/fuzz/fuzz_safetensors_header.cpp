// libFuzzer target: parse_safetensors_header must turn every input into either a header whose
// entries lie inside the input or a zoo::InputError; any other exception, crash or sanitizer
// report is a bug. Build with clang (tests/fuzz/CMakeLists.txt with ZOO_FUZZ=ON, or
// tests/scripts/fuzz_safetensors.sh).
#include <cstddef>
#include <cstdint>
#include <span>

#include "zoo/error.hpp"
#include "zoo/safetensors.hpp"
#include "zoo/tensor.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    const auto header = zoo::parse_safetensors_header(bytes, "fuzz.safetensors");
    for (const auto& entry : header.entries) {
      // An accepted entry must describe bytes of this input that match its shape and dtype.
      if (entry.begin > entry.end || header.data_offset + entry.end > size) __builtin_trap();
      const zoo::TensorView view{bytes.data() + header.data_offset + entry.begin, entry.dtype, entry.shape, {}};
      if (view.nbytes() != entry.end - entry.begin) __builtin_trap();
      // Reads every payload byte (unaligned on purpose): ASan catches a view past the input.
      (void)zoo::to_f32(view);
    }
  } catch (const zoo::InputError&) {
    // Rejected with a message: the expected outcome for nearly every input.
  }
  return 0;
}
