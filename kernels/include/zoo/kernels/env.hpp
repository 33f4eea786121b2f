#pragma once
// The ZOO_* tuning switches read from the environment (README lists them). Unset or empty means
// the default; any other value must parse, or the call throws std::invalid_argument naming the
// variable, the accepted values and what it got, so a typo never silently benchmarks the default.
#include <optional>

namespace zoo::kernels {

// An integer in [lo, hi]; nullopt when unset or empty.
std::optional<long> env_int(const char* name, long lo, long hi);
// "1" (on) or "0" (off); `fallback` when unset or empty.
bool env_flag(const char* name, bool fallback);

}  // namespace zoo::kernels
