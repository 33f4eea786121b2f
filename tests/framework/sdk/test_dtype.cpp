#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>

#include "zoo/dtype.hpp"
#include "zoo/safetensors.hpp"

using namespace zoo;

namespace {

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t bits_of(float value) { return std::bit_cast<std::uint32_t>(value); }

bool is_f16_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_bf16_nan(std::uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

// Value of a 16-bit pattern's successor, treating the pattern after the largest finite value as
// the power of two just past it (the point of overflow), not infinity.
double next_up(std::uint16_t h, float (*decode)(std::uint16_t), std::uint16_t infinity_bits, double overflow_value) {
  const auto next = static_cast<std::uint16_t>(h + 1);
  return next == infinity_bits ? overflow_value : static_cast<double>(decode(next));
}

// Checks rounding at, just below and just above the midpoint between every pair of adjacent
// positive finite 16-bit values (and their negatives): the only places RNE can go wrong.
void check_midpoints(float (*decode)(std::uint16_t), std::uint16_t (*encode)(float), std::uint16_t infinity_bits,
                     double overflow_value) {
  std::size_t failures = 0;
  for (std::uint32_t h = 0; h < infinity_bits; ++h) {
    const auto lo = static_cast<std::uint16_t>(h);
    const auto hi = static_cast<std::uint16_t>(h + 1);
    const double mid_exact = (static_cast<double>(decode(lo)) + next_up(lo, decode, infinity_bits, overflow_value)) / 2;
    const float mid = static_cast<float>(mid_exact);
    REQUIRE(static_cast<double>(mid) == mid_exact);  // the midpoint is a float32, so it can be tested
    const std::uint16_t even = (lo & 1u) ? hi : lo;
    for (float sign : {1.0f, -1.0f}) {
      const std::uint16_t sign_bit = sign < 0 ? 0x8000u : 0;
      const float m = sign * mid;
      const bool ok = encode(m) == (even | sign_bit) &&
                      encode(std::nextafter(m, sign * std::numeric_limits<float>::infinity())) == (hi | sign_bit) &&
                      encode(std::nextafter(m, 0.0f)) == (lo | sign_bit);
      if (!ok && ++failures <= 5)
        FAIL_CHECK("rounding wrong around the midpoint after 0x" << std::hex << (lo | sign_bit) << " (" << m << ")");
    }
  }
  CHECK(failures == 0);
}

// Nearest bf16 by brute force: compare the distances to the two candidates in double.
std::uint16_t reference_bf16(float value) {
  const std::uint32_t bits = bits_of(value);
  const auto down = static_cast<std::uint16_t>(bits >> 16);
  const auto up = static_cast<std::uint16_t>(down + 1);
  if ((bits & 0xffffu) == 0) return down;
  const double v = std::fabs(static_cast<double>(value));
  const double d_down = std::fabs(v - std::fabs(static_cast<double>(bf16_to_f32(down))));
  const double up_value = (up & 0x7fffu) == 0x7f80u ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(bf16_to_f32(up)));
  const double d_up = std::fabs(up_value - v);
  if (d_down < d_up) return down;
  if (d_up < d_down) return up;
  return (down & 1u) ? up : down;
}

}  // namespace

TEST_CASE("dtype: names, sizes and config spellings", "[dtype]") {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I16, DType::I8,
                  DType::U8, DType::BOOL}) {
    INFO(dtype_name(d));
    CHECK(dtype_from_name(dtype_name(d)) == d);
    CHECK(dtype_from_config_name(dtype_name(d)) == d);
  }
  CHECK(dtype_size(DType::BF16) == 2);
  CHECK(dtype_size(DType::I64) == 8);
  CHECK(dtype_size(DType::BOOL) == 1);
  CHECK(dtype_name(DType::BF16) == "BF16");
  CHECK(is_floating(DType::F16));
  CHECK_FALSE(is_floating(DType::I32));
  CHECK(dtype_from_config_name("bfloat16") == DType::BF16);
  CHECK(dtype_from_config_name("float16") == DType::F16);
  CHECK(dtype_from_config_name("float32") == DType::F32);
  CHECK_FALSE(dtype_from_name("bf16"));
  CHECK_FALSE(dtype_from_name("Q4_K"));
  CHECK_FALSE(dtype_from_config_name("int4"));
}

TEST_CASE("dtype: bf16 conversion, hand-checked cases", "[dtype]") {
  struct Case {
    std::uint32_t f32;
    std::uint16_t bf16;
  };
  // Worked out by hand: bf16 keeps the top 16 bits; the low 16 decide rounding (0x8000 = tie).
  const Case cases[] = {
      {0x3f800000, 0x3f80},  // 1.0
      {0x3f808000, 0x3f80},  // 1 + 2^-8: tie, 0x3f80 is even
      {0x3f818000, 0x3f82},  // 1 + 3*2^-8: tie, rounds up to even
      {0x3f808001, 0x3f81},  // just above a tie
      {0x3f80ffff, 0x3f81},
      {0xbf808000, 0xbf80},  // negative tie
      {0x7f7f7fff, 0x7f7f},  // below the midpoint to infinity: stays at bf16 max
      {0x7f7fffff, 0x7f80},  // float max rounds to infinity
      {0x7f800000, 0x7f80},  // inf
      {0xff800000, 0xff80},  // -inf
      {0x00000001, 0x0000},  // float subnormals round like anything else
      {0x00008000, 0x0000},
      {0x00018000, 0x0002},
      {0x80000000, 0x8000},  // -0
  };
  for (const auto& c : cases) {
    INFO(std::hex << "f32 0x" << c.f32);
    CHECK(f32_to_bf16(from_bits(c.f32)) == c.bf16);
  }
  // NaNs stay NaN even when the payload lives only in the low bits (truncation would give inf).
  for (std::uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fffffffu}) {
    INFO(std::hex << "NaN 0x" << nan);
    CHECK(is_bf16_nan(f32_to_bf16(from_bits(nan))));
    CHECK(std::isnan(round_to_bf16(from_bits(nan))));
  }
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(bf16_to_f32(0xc040) == -3.0f);
  CHECK(round_to_bf16(1.00390625f) == 1.0f);  // 1 + 2^-8
}

TEST_CASE("dtype: f16 conversion, hand-checked cases", "[dtype]") {
  struct Case {
    std::uint32_t f32;
    std::uint16_t f16;
  };
  // Worked out by hand: f16 has 10 fraction bits, exponent bias 15, subnormal unit 2^-24.
  const Case cases[] = {
      {0x3f800000, 0x3c00},  // 1.0
      {0xc0000000, 0xc000},  // -2.0
      {0x3f801000, 0x3c00},  // 1 + 2^-11: tie to even
      {0x3f803000, 0x3c02},  // 1 + 3*2^-11: tie, up to even
      {0x3f801001, 0x3c01},  // just above a tie
      {0x477fe000, 0x7bff},  // 65504, the largest half
      {0x477fefff, 0x7bff},  // just below 65520
      {0x477ff000, 0x7c00},  // 65520: tie between 65504 and 2^16, overflows to inf
      {0x47800000, 0x7c00},  // 65536
      {0x7f7fffff, 0x7c00},  // float max
      {0xff800000, 0xfc00},  // -inf
      {0x38800000, 0x0400},  // 2^-14, smallest normal
      {0x387fc000, 0x03ff},  // largest subnormal
      {0x387fe000, 0x0400},  // halfway between the largest subnormal and 2^-14: up to even
      {0x33800000, 0x0001},  // 2^-24, smallest subnormal
      {0x33000000, 0x0000},  // 2^-25: tie between 0 and 1, to even 0
      {0x33000001, 0x0001},  // just above that tie
      {0x32ffffff, 0x0000},
      {0x33c00000, 0x0002},  // 1.5 units: tie, to 2
      {0x34200000, 0x0002},  // 2.5 units: tie, to 2
      {0x34600000, 0x0004},  // 3.5 units: tie, to 4
      {0x2edbe6ff, 0x0000},  // 1e-10
      {0x80000000, 0x8000},  // -0
      {0xb3800000, 0x8001},  // -2^-24
  };
  for (const auto& c : cases) {
    INFO(std::hex << "f32 0x" << c.f32);
    CHECK(f32_to_f16(from_bits(c.f32)) == c.f16);
  }
  for (std::uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xffc00000u, 0x7f802000u}) {
    INFO(std::hex << "NaN 0x" << nan);
    CHECK(is_f16_nan(f32_to_f16(from_bits(nan))));
  }
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_to_f32(0x03ff) == from_bits(0x387fc000));
  CHECK(f16_to_f32(0x0200) == std::ldexp(1.0f, -15));
  CHECK(f16_to_f32(0x7bff) == 65504.0f);
  CHECK(f16_to_f32(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(f16_to_f32(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(f16_to_f32(0x7e00)));
  CHECK(std::isnan(f16_to_f32(0x7c01)));
  CHECK(std::signbit(f16_to_f32(0x8000)));
  CHECK(f16_to_f32(0x8000) == 0.0f);
}

TEST_CASE("dtype: every 16-bit pattern survives a round trip through f32", "[dtype]") {
  float previous_f16 = -1, previous_bf16 = -1;
  for (std::uint32_t i = 0; i <= 0xffff; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float f = f16_to_f32(h);
    const float b = bf16_to_f32(h);
    if (is_f16_nan(h)) {
      CHECK(std::isnan(f));
      CHECK(is_f16_nan(f32_to_f16(f)));
    } else if (f32_to_f16(f) != h) {
      FAIL_CHECK("f16 0x" << std::hex << i << " -> " << f << " -> 0x" << f32_to_f16(f));
    }
    if (is_bf16_nan(h)) {
      CHECK(std::isnan(b));
      CHECK(is_bf16_nan(f32_to_bf16(b)));
    } else if (f32_to_bf16(b) != h) {
      FAIL_CHECK("bf16 0x" << std::hex << i << " -> " << b << " -> 0x" << f32_to_bf16(b));
    }
    // Positive patterns decode in increasing order: a decoder that mixes up exponent and
    // fraction could still round-trip but would break this.
    if (i <= 0x7c00) {
      if (!(f > previous_f16)) FAIL_CHECK("f16 not increasing at 0x" << std::hex << i);
      previous_f16 = f;
    }
    if (i <= 0x7f80) {
      if (!(b > previous_bf16)) FAIL_CHECK("bf16 not increasing at 0x" << std::hex << i);
      previous_bf16 = b;
    }
  }
}

TEST_CASE("dtype: f32 -> 16-bit rounds to nearest even at every midpoint", "[dtype]") {
  check_midpoints(f16_to_f32, f32_to_f16, 0x7c00, 65536.0);
  check_midpoints(bf16_to_f32, f32_to_bf16, 0x7f80, std::ldexp(1.0, 128));
}

TEST_CASE("dtype: f32 -> 16-bit agrees with independent references on a sweep of float32", "[dtype]") {
  // A prime stride touches every exponent and many fraction patterns.
  std::size_t bf16_failures = 0, f16_failures = 0;
  for (std::uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093) {
    const float value = from_bits(static_cast<std::uint32_t>(bits));
    if (std::isnan(value)) continue;
    if (f32_to_bf16(value) != reference_bf16(value) && ++bf16_failures <= 5)
      FAIL_CHECK("bf16 of 0x" << std::hex << bits << ": 0x" << f32_to_bf16(value) << " != 0x" << reference_bf16(value));
#ifdef __FLT16_MAX__
    // The compiler's own _Float16 conversion (libgcc soft-float, IEEE RNE) as a second opinion.
    const auto reference = std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
    if (f32_to_f16(value) != reference && ++f16_failures <= 5)
      FAIL_CHECK("f16 of 0x" << std::hex << bits << ": 0x" << f32_to_f16(value) << " != 0x" << reference);
#endif
  }
  CHECK(bf16_failures == 0);
  CHECK(f16_failures == 0);
}

TEST_CASE("dtype: conversions match torch's casts stored in the Python-made fixture", "[dtype]") {
  // tools/fixtures/make_safetensors_sample.py stores float32 corner cases and torch's casts of
  // them to bfloat16/float16 and back.
  auto file = SafetensorsFile::open(std::filesystem::path(ZOO_SOURCE_DIR) /
                                    "tests/fixtures/safetensors_python/sample.safetensors");
  auto view = [&](const char* name) {
    const auto* e = file->find(name);
    REQUIRE(e != nullptr);
    return file->view(*e);
  };
  const auto src = to_f32(view("rne.src"));
  const auto bf16 = view("rne.bf16");
  const auto f16 = view("rne.f16");
  const auto bf16_back = to_f32(view("rne.bf16_back"));
  const auto f16_back = to_f32(view("rne.f16_back"));
  REQUIRE(src.size() > 30);
  REQUIRE(bf16.numel() == static_cast<std::int64_t>(src.size()));
  REQUIRE(f16.numel() == static_cast<std::int64_t>(src.size()));
  for (std::size_t i = 0; i < src.size(); ++i) {
    std::uint16_t torch_bf16, torch_f16;
    std::memcpy(&torch_bf16, static_cast<const std::byte*>(bf16.data) + 2 * i, 2);
    std::memcpy(&torch_f16, static_cast<const std::byte*>(f16.data) + 2 * i, 2);
    INFO("value " << i << ": " << src[i] << std::hex << " (0x" << bits_of(src[i]) << ")");
    if (std::isnan(src[i])) {
      CHECK(is_bf16_nan(f32_to_bf16(src[i])));
      CHECK(is_f16_nan(f32_to_f16(src[i])));
      CHECK(std::isnan(bf16_to_f32(torch_bf16)));
      CHECK(std::isnan(f16_to_f32(torch_f16)));
      continue;
    }
    CHECK(f32_to_bf16(src[i]) == torch_bf16);
    CHECK(f32_to_f16(src[i]) == torch_f16);
    CHECK(bits_of(bf16_to_f32(torch_bf16)) == bits_of(bf16_back[i]));
    CHECK(bits_of(f16_to_f32(torch_f16)) == bits_of(f16_back[i]));
  }
}
