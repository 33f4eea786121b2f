// libFuzzer target: model.safetensors.index.json. parse_shard_index must return only shard names
// that stay inside the checkpoint directory, or throw zoo::InputError.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "zoo/checkpoint.hpp"
#include "zoo/error.hpp"
#include "zoo/weight_source.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& [tensor, shard] : zoo::parse_shard_index(text, "fuzz/model.safetensors.index.json")) {
      const std::filesystem::path p(shard);
      if (shard.empty() || p.is_absolute()) __builtin_trap();
      for (const auto& part : p)
        if (part == "..") __builtin_trap();
    }
  } catch (const zoo::InputError&) {
  }
  return 0;
}
