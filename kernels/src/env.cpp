#include "zoo/kernels/env.hpp"

#include "zoo/kernels/cpu_ops.hpp"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <initializer_list>
#include <string>
#include <string_view>

namespace zoo::kernels {
namespace {

// The value as given, cut to a short excerpt: a long junk value (or a secret pasted into the
// wrong variable) is not echoed whole.
std::string quoted(std::string_view value) {
  constexpr std::size_t kMax = 32;
  if (value.size() <= kMax) return "'" + std::string(value) + "'";
  return "'" + std::string(value.substr(0, kMax)) + "...' (" + std::to_string(value.size()) + " bytes)";
}

}  // namespace

std::optional<long> env_int(const char* name, long lo, long hi) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(value, &end, 10);
  const bool starts_well = (*value >= '0' && *value <= '9') || *value == '-';  // strtol skips blanks
  if (!starts_well || *end != '\0' || errno == ERANGE || n < lo || n > hi)
    throw std::invalid_argument(std::string(name) + " must be an integer from " + std::to_string(lo) + " to " +
                                std::to_string(hi) + ", got " + quoted(value));
  return n;
}

bool env_flag(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string v(value);
  if (v == "1") return true;
  if (v == "0") return false;
  throw std::invalid_argument(std::string(name) + " must be 0 or 1, got " + quoted(v));
}

namespace {

// name -> accepted values: a flag ("0" or "1"), an integer range, or a word list. The bounds are
// those of the code reading each one (kernels/src/cuda/*, layers, plugins).
struct EnvSwitch {
  const char* name;
  enum Kind { Flag, Int, Word } kind;
  long lo = 0, hi = 0;
  std::initializer_list<const char*> words = {};
};

const EnvSwitch kEnvSwitches[] = {
    {"ZOO_NUM_THREADS", EnvSwitch::Int, 1, 4096},
    {"ZOO_CPU_ISA", EnvSwitch::Word, 0, 0, {"generic", "avx2", "auto"}},
    {"ZOO_CUDA_PROFILE", EnvSwitch::Flag},
    {"ZOO_CODEC_PROFILE", EnvSwitch::Flag},
    {"ZOO_TTS_HOST_SAMPLING", EnvSwitch::Flag},
    {"ZOO_GEMV", EnvSwitch::Int, 0, 8},
    {"ZOO_GEMV_SILU", EnvSwitch::Flag},
    {"ZOO_GEMM_ANCHOR_ROWS", EnvSwitch::Int, 1, 65536},
    {"ZOO_DECODE_ATTN", EnvSwitch::Int, 0, 64},
    {"ZOO_PDL", EnvSwitch::Flag},
    {"ZOO_MOE_CUBLAS", EnvSwitch::Flag},
    {"ZOO_CUDA_PRE_HOPPER", EnvSwitch::Flag},
    {"ZOO_PREFILL_ROWS", EnvSwitch::Int, 64, 128},
    {"ZOO_CUDNN", EnvSwitch::Flag},
    {"ZOO_CUDNN_MIN_TOKENS", EnvSwitch::Int, 1, long{1} << 40},
    {"ZOO_CUDNN_LOG", EnvSwitch::Flag},
};

}  // namespace

void check_env_switches() {
  for (const EnvSwitch& s : kEnvSwitches) {
    switch (s.kind) {
      case EnvSwitch::Flag: env_flag(s.name, false); break;
      case EnvSwitch::Int: env_int(s.name, s.lo, s.hi); break;
      case EnvSwitch::Word: {
        const char* value = std::getenv(s.name);
        if (value == nullptr || *value == '\0') break;
        bool known = false;
        std::string accepted;
        for (const char* w : s.words) {
          known = known || std::string_view(value) == w;
          accepted += (accepted.empty() ? "" : ", ") + std::string(w);
        }
        if (!known)
          throw std::invalid_argument(std::string(s.name) + " must be one of " + accepted + ", got " + quoted(value));
        break;
      }
    }
  }
  // A word this CPU or build cannot honour (avx2 without AVX2) is as wrong as a typo.
  try {
    cpu::resolve_cpu_isa(std::getenv("ZOO_CPU_ISA"));
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  }
}

}  // namespace zoo::kernels
