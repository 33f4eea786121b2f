#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace zoo {

enum class DType : std::uint8_t { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL };

std::size_t dtype_size(DType dtype);
// The safetensors spelling: "F32", "BF16", "I64", "BOOL", ...
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);
// Config spelling ("float32", "bfloat16", "float16") or the safetensors spelling.
std::optional<DType> dtype_from_config_name(std::string_view name);
bool is_floating(DType dtype);

// Exact conversions; f32 -> 16-bit rounds to nearest even and keeps NaN a NaN.
inline float bf16_to_f32(std::uint16_t bits) {
  std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof out);
  return out;
}

inline std::uint16_t f32_to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_f16(float value);

// Rounds a float32 to the nearest bf16 value and back (what a bf16 cast does to activations).
inline float round_to_bf16(float value) { return bf16_to_f32(f32_to_bf16(value)); }

}  // namespace zoo
