#pragma once
// Range checks for numeric flags, used instead of CLI::Range / PositiveNumber / NonNegativeNumber:
// those let NaN through (every comparison with it is false), print their bounds with
// std::to_string (NonNegativeNumber's is DBL_MAX, 309 digits) and quote the value whole. These
// accept finite values only, print bounds in short form, and quote at most a short excerpt.
// CLI11 puts the option's name in front of the message ("--top-p: must be ...").
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace zoo::cli {

// The value as typed, cut short for an error message.
inline std::string quoted_value(const std::string& input) {
  constexpr std::size_t kMax = 24;
  if (input.size() <= kMax) return "'" + input + "'";
  return fmt::format("'{}...' ({} characters)", input.substr(0, kMax), input.size());
}

// An integer in [lo, hi] (hi = the largest long long: no upper bound).
inline CLI::Validator integer_in(long long lo, long long hi = std::numeric_limits<long long>::max()) {
  const std::string range = hi == std::numeric_limits<long long>::max() ? fmt::format("an integer >= {}", lo)
                                                                        : fmt::format("an integer from {} to {}", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& input) -> std::string {
        long long value = 0;
        const char* begin = input.data() + (input.starts_with('+') ? 1 : 0);
        const auto [end, ec] = std::from_chars(begin, input.data() + input.size(), value);
        if (ec == std::errc() && end == input.data() + input.size() && value >= lo && value <= hi) return {};
        return fmt::format("must be {}, got {}", range, quoted_value(input));
      },
      range);
}

// Any unsigned 64-bit integer. CLI11 reads "-1" into an unsigned option as 2^64 - 1.
inline CLI::Validator any_uint64() {
  const std::string range = fmt::format("an integer from 0 to {}", std::numeric_limits<std::uint64_t>::max());
  return CLI::Validator(
      [range](std::string& input) -> std::string {
        std::uint64_t value = 0;
        const auto [end, ec] = std::from_chars(input.data(), input.data() + input.size(), value);
        if (!input.empty() && input.front() != '-' && ec == std::errc() && end == input.data() + input.size()) return {};
        return fmt::format("must be {}, got {}", range, quoted_value(input));
      },
      range);
}

// A finite real number in [lo, hi] (hi = infinity: no upper bound).
inline CLI::Validator number_in(double lo, double hi = std::numeric_limits<double>::infinity()) {
  const std::string range =
      std::isinf(hi) ? fmt::format("a finite number >= {:g}", lo) : fmt::format("a number from {:g} to {:g}", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& input) -> std::string {
        char* end = nullptr;
        const double value = input.empty() ? std::nan("") : std::strtod(input.c_str(), &end);
        if (end == input.c_str() + input.size() && std::isfinite(value) && value >= lo && value <= hi) return {};
        return fmt::format("must be {}, got {}", range, quoted_value(input));
      },
      range);
}

}  // namespace zoo::cli
