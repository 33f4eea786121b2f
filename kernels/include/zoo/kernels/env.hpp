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

// Checks every ZOO_* switch Zoo reads (the table in env.cpp, which README's list mirrors) against
// its accepted values, whatever the device: a CUDA-only switch with a typo on a CPU run would
// otherwise go unseen until a CUDA run. Throws std::invalid_argument for the first bad one.
// ZOO_PLUGIN_PATH (any path list) is not checked. The CLI calls this once at startup.
void check_env_switches();

}  // namespace zoo::kernels
