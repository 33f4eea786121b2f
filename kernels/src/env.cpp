#include "zoo/kernels/env.hpp"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace zoo::kernels {

std::optional<long> env_int(const char* name, long lo, long hi) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(value, &end, 10);
  const bool starts_well = (*value >= '0' && *value <= '9') || *value == '-';  // strtol skips blanks
  if (!starts_well || *end != '\0' || errno == ERANGE || n < lo || n > hi)
    throw std::invalid_argument(std::string(name) + " must be an integer from " + std::to_string(lo) + " to " +
                                std::to_string(hi) + ", got '" + value + "'");
  return n;
}

bool env_flag(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string v(value);
  if (v == "1") return true;
  if (v == "0") return false;
  throw std::invalid_argument(std::string(name) + " must be 0 or 1, got '" + v + "'");
}

}  // namespace zoo::kernels
