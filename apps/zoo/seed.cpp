#include "seed.hpp"

#include "numeric_option.hpp"

#include <fmt/format.h>

#include <charconv>
#include <random>

namespace zoo::cli {

CLI::Option* add_seed_option(CLI::App& command, std::optional<std::uint64_t>& seed, const std::string& help) {
  // Parsed by hand: CLI11 would turn -1 into 2^64 - 1 for an unsigned option, a valid seed that no
  // one meant.
  return command
      .add_option_function<std::string>(
          "-s,--seed",
          [&seed](const std::string& text) {
            if (text == "-1") {
              seed.reset();
              return;
            }
            std::uint64_t value = 0;
            const auto* end = text.data() + text.size();
            const auto [ptr, ec] = std::from_chars(text.data(), end, value);
            if (text.empty() || text.front() == '-' || text.front() == '+' || ec != std::errc() || ptr != end)
              throw CLI::ValidationError(
                  "--seed", fmt::format("must be an integer from 0 to {} or -1 (a random seed), got {}",
                                        UINT64_MAX, quoted_value(text)));
            seed = value;
          },
          help)
      ->type_name("INT");
}

std::uint64_t seed_or_random(const std::optional<std::uint64_t>& seed) {
  if (seed) return *seed;
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ static_cast<std::uint64_t>(device());
}

}  // namespace zoo::cli
