#include "zoo/dtype.hpp"

#include <array>
#include <utility>

namespace zoo {
namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  std::size_t size;
  bool floating;
};

constexpr std::array<DTypeRow, 10> kDTypes{{
    {DType::F32, "F32", 4, true},
    {DType::F16, "F16", 2, true},
    {DType::BF16, "BF16", 2, true},
    {DType::F64, "F64", 8, true},
    {DType::I64, "I64", 8, false},
    {DType::I32, "I32", 4, false},
    {DType::I16, "I16", 2, false},
    {DType::I8, "I8", 1, false},
    {DType::U8, "U8", 1, false},
    {DType::BOOL, "BOOL", 1, false},
}};

const DTypeRow& row(DType dtype) { return kDTypes[static_cast<std::size_t>(dtype)]; }

}  // namespace

std::size_t dtype_size(DType dtype) { return row(dtype).size; }
std::string_view dtype_name(DType dtype) { return row(dtype).name; }
bool is_floating(DType dtype) { return row(dtype).floating; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& r : kDTypes)
    if (r.name == name) return r.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_config_name(std::string_view name) {
  static constexpr std::pair<std::string_view, DType> kAliases[] = {
      {"float32", DType::F32}, {"float", DType::F32},     {"fp32", DType::F32},
      {"bfloat16", DType::BF16}, {"bf16", DType::BF16},   {"float16", DType::F16},
      {"half", DType::F16},    {"fp16", DType::F16},      {"f16", DType::F16},
      {"f32", DType::F32},
  };
  for (const auto& [alias, dtype] : kAliases)
    if (alias == name) return dtype;
  return dtype_from_name(name);
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal half: renormalize
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      bits = sign | static_cast<std::uint32_t>(127 - 15 + 1 - shift) << 23 | (mantissa << 13);
    }
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

std::uint16_t f32_to_f16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {                        // below the smallest normal half
    if (abs < 0x33000000u) return sign;           // rounds to zero
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // value / 2^-24, the subnormal half unit
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return sign | static_cast<std::uint16_t>(half);
  }
  std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<std::uint16_t>((rounded - 0x38000000u) >> 13);
}

}  // namespace zoo
