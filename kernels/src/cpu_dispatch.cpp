// The public CPU ops: argument checks, then the implementation for this CPU. The choice is made
// once, at the first call: the AVX2/FMA kernels when the CPU has both (and ZOO_CPU_ISA does not say
// otherwise), else the portable ones. This file is portable x86-64 itself, so a binary starts and
// runs on any x86-64 CPU.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cpu_isa_ops.hpp"
#include "zoo/kernels/conv_cpu.hpp"
#include "zoo/kernels/cpu_ops.hpp"

namespace zoo::kernels::cpu {
namespace {

struct IsaOps {
  CpuIsa isa;
  decltype(&generic::linear) linear;
  decltype(&generic::linear_rows_invariant) linear_rows_invariant;
  decltype(&generic::rms_norm) rms_norm;
  decltype(&generic::rope_half_split) rope_half_split;
  decltype(&generic::attention_causal_gqa) attention_causal_gqa;
  decltype(&generic::attention_paged_gqa) attention_paged_gqa;
  decltype(&generic::silu_mul) silu_mul;
  decltype(&generic::add_inplace) add_inplace;
  decltype(&generic::snake) snake;
};

constexpr IsaOps kGenericOps{CpuIsa::generic,
                             &generic::linear,
                             &generic::linear_rows_invariant,
                             &generic::rms_norm,
                             &generic::rope_half_split,
                             &generic::attention_causal_gqa,
                             &generic::attention_paged_gqa,
                             &generic::silu_mul,
                             &generic::add_inplace,
                             &generic::snake};
#ifdef ZOO_KERNELS_HAVE_AVX2
constexpr IsaOps kAvx2Ops{CpuIsa::avx2,
                          &avx2::linear,
                          &avx2::linear_rows_invariant,
                          &avx2::rms_norm,
                          &avx2::rope_half_split,
                          &avx2::attention_causal_gqa,
                          &avx2::attention_paged_gqa,
                          &avx2::silu_mul,
                          &avx2::add_inplace,
                          &avx2::snake};
#endif

const IsaOps& ops_for(CpuIsa isa) {
#ifdef ZOO_KERNELS_HAVE_AVX2
  if (isa == CpuIsa::avx2) return kAvx2Ops;
#endif
  (void)isa;
  return kGenericOps;
}

std::atomic<const IsaOps*> g_ops{nullptr};

const IsaOps& ops() {
  const IsaOps* current = g_ops.load(std::memory_order_acquire);
  if (current != nullptr) return *current;
  // Every thread that races here resolves the same answer; the first store wins.
  const IsaOps* chosen = &ops_for(resolve_cpu_isa(std::getenv("ZOO_CPU_ISA")));
  g_ops.compare_exchange_strong(current, chosen, std::memory_order_acq_rel);
  return *g_ops.load(std::memory_order_acquire);
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) { return isa == CpuIsa::avx2 ? "avx2" : "generic"; }

bool cpu_isa_supported(CpuIsa isa) {
  if (isa == CpuIsa::generic) return true;
#if defined(ZOO_KERNELS_HAVE_AVX2) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

CpuIsa resolve_cpu_isa(const char* requested) {
  const std::string_view value = requested != nullptr ? requested : "";
  if (value.empty() || value == "auto") return cpu_isa_supported(CpuIsa::avx2) ? CpuIsa::avx2 : CpuIsa::generic;
  for (CpuIsa isa : {CpuIsa::generic, CpuIsa::avx2}) {
    if (value != cpu_isa_name(isa)) continue;
    if (!cpu_isa_supported(isa))
      throw std::runtime_error("ZOO_CPU_ISA=" + std::string(value) + ": this CPU (or this build) has no " +
                               cpu_isa_name(isa) + " kernels; use generic or auto");
    return isa;
  }
  throw std::runtime_error("ZOO_CPU_ISA=" + std::string(value) + ": expected auto, generic or avx2");
}

CpuIsa cpu_isa() { return ops().isa; }

void set_cpu_isa(CpuIsa isa) {
  if (!cpu_isa_supported(isa))
    throw std::invalid_argument(std::string("set_cpu_isa: ") + cpu_isa_name(isa) + " is not supported here");
  g_ops.store(&ops_for(isa), std::memory_order_release);
}

void linear(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n, std::int64_t k,
            bool accumulate) {
  ops().linear(x, w, y, m, n, k, accumulate);
}

void linear_rows_invariant(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n,
                           std::int64_t k) {
  ops().linear_rows_invariant(x, w, y, m, n, k);
}

void rms_norm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t dim, float eps) {
  ops().rms_norm(x, w, y, rows, dim, eps);
}

void rope_half_split(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                     const std::int64_t* positions, const float* inv_freq, float attention_scaling) {
  rope_half_split(x, tokens, heads, head_dim, head_dim, positions, inv_freq, attention_scaling);
}

void rope_half_split(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                     std::int64_t rotary_dim, const std::int64_t* positions, const float* inv_freq,
                     float attention_scaling) {
  if (head_dim % 2 != 0) {
    throw std::invalid_argument("rope_half_split: head_dim must be even, got " + std::to_string(head_dim));
  }
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > head_dim) {
    throw std::invalid_argument("rope_half_split: rotary_dim must be even and in 2.." + std::to_string(head_dim) +
                                ", got " + std::to_string(rotary_dim));
  }
  ops().rope_half_split(x, tokens, heads, head_dim, rotary_dim, positions, inv_freq, attention_scaling);
}

void rope_half_split(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                     const std::int64_t* positions, float theta) {
  if (head_dim % 2 != 0) {
    throw std::invalid_argument("rope_half_split: head_dim must be even, got " + std::to_string(head_dim));
  }
  const std::vector<float> inv_freq = rope_default_inv_freq(head_dim, theta);
  ops().rope_half_split(x, tokens, heads, head_dim, head_dim, positions, inv_freq.data(), 1.0f);
}


void attention_causal_gqa(const float* q, const float* k, const float* v, float* out, std::int64_t tokens,
                          std::int64_t start, std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim,
                          float scale) {
  attention_causal_gqa(q, k, v, out, tokens, start, q_heads, kv_heads, head_dim, AttentionOptions{.scale = scale});
}

void attention_causal_gqa(const float* q, const float* k, const float* v, float* out, std::int64_t tokens,
                          std::int64_t start, std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim,
                          const AttentionOptions& options) {
  if (kv_heads <= 0 || q_heads <= 0 || q_heads % kv_heads != 0) {
    throw std::invalid_argument("attention_causal_gqa: q_heads (" + std::to_string(q_heads) +
                                ") must be a positive multiple of kv_heads (" + std::to_string(kv_heads) + ")");
  }
  if (start < 0) throw std::invalid_argument("attention_causal_gqa: start must be >= 0");
  if (!(options.softcap >= 0.0f) || options.window < 0)
    throw std::invalid_argument("attention_causal_gqa: softcap and window must be >= 0");
  ops().attention_causal_gqa(q, k, v, out, tokens, start, q_heads, kv_heads, head_dim, options.scale, options.softcap,
                             options.window);
}

void attention_paged_gqa(const float* q, const float* k, const float* v, float* out,
                         std::span<const PagedAttentionSlice> slices, std::int64_t q_heads, std::int64_t kv_heads,
                         std::int64_t head_dim, const AttentionOptions& options) {
  if (kv_heads <= 0 || q_heads <= 0 || q_heads % kv_heads != 0)
    throw std::invalid_argument("attention_paged_gqa: q_heads (" + std::to_string(q_heads) +
                                ") must be a positive multiple of kv_heads (" + std::to_string(kv_heads) + ")");
  if (!(options.softcap >= 0.0f) || options.window < 0)
    throw std::invalid_argument("attention_paged_gqa: softcap and window must be >= 0");
  std::vector<std::int64_t> item_begin(slices.size() + 1, 0);
  std::int64_t context = 1;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const PagedAttentionSlice& slice = slices[i];
    if (slice.tokens < 0 || slice.start < 0 || slice.row < 0 || (slice.tokens > 0 && !slice.pages))
      throw std::invalid_argument("attention_paged_gqa: slice " + std::to_string(i) + " is malformed");
    item_begin[i + 1] = item_begin[i] + q_heads * slice.tokens;
    context = std::max(context, slice.start + slice.tokens);
  }
  ops().attention_paged_gqa(q, k, v, out, slices.data(), item_begin.data(), static_cast<std::int64_t>(slices.size()),
                            context, q_heads, kv_heads, head_dim, options.scale, options.softcap, options.window);
}

void silu_mul(const float* gate, const float* up, float* out, std::int64_t n) { ops().silu_mul(gate, up, out, n); }

void add_inplace(float* y, const float* x, std::int64_t n) { ops().add_inplace(y, x, n); }

void snake(const float* x, const float* alpha, float* y, std::int64_t length, std::int64_t channels) {
  if (length <= 0 || channels <= 0) return;
  // The reciprocal is taken once per channel, as torch does ((alpha + 1e-9).reciprocal()).
  std::vector<float> inv(static_cast<std::size_t>(channels));
  for (std::int64_t c = 0; c < channels; ++c) inv[static_cast<std::size_t>(c)] = 1.0f / (alpha[c] + 1e-9f);
  ops().snake(x, alpha, inv.data(), y, length, channels);
}

}  // namespace zoo::kernels::cpu
