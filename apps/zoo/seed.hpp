#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace zoo::cli {

// Adds `-s,--seed` to `command`: an integer in [0, 2^64), or -1 for "draw one" (as llama-cli
// takes it). Leaves `seed` unset for -1 or when the flag is not given; any other value is a usage
// error naming --seed.
CLI::Option* add_seed_option(CLI::App& command, std::optional<std::uint64_t>& seed, const std::string& help);

// The seed a run uses: the given one, else a fresh draw from std::random_device, so that two runs
// without --seed differ (and the caller prints the draw, so either can be repeated).
std::uint64_t seed_or_random(const std::optional<std::uint64_t>& seed);

}  // namespace zoo::cli
