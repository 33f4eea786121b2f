#pragma once
// The CPU ops that exist once per instruction set. kernels/CMakeLists.txt compiles their sources
// (attention, elementwise, linear, norm, rope) twice: portable x86-64 into namespace `generic`, and
// with -mavx2 -mfma into namespace `avx2`. cpu_dispatch.cpp picks one set at run time and defines
// the public zoo::kernels::cpu functions, which also check their arguments (so that the per-ISA
// code needs no std::string: see the note in kernels/CMakeLists.txt on what they may not share).
#include <cstdint>

#include "zoo/kernels/paged_attention_slice.hpp"

#define ZOO_CPU_ISA_OPS_DECLARATIONS                                                                         \
  void linear(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n, std::int64_t k,      \
              bool accumulate);                                                                              \
  void linear_rows_invariant(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n,       \
                             std::int64_t k);                                                                \
  void rms_norm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t dim, float eps);   \
  void rope_half_split(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,             \
                       std::int64_t rotary_dim, const std::int64_t* positions, const float* inv_freq,        \
                       float attention_scaling);                                                             \
  void attention_causal_gqa(const float* q, const float* k, const float* v, float* out, std::int64_t tokens, \
                            std::int64_t start, std::int64_t q_heads, std::int64_t kv_heads,                 \
                            std::int64_t head_dim, float scale, float softcap, std::int64_t window);         \
  void attention_paged_gqa(                                                                                  \
      const float* q, const float* k, const float* v, float* out, const PagedAttentionSlice* slices,         \
      const std::int64_t* item_begin, std::int64_t count, std::int64_t context, std::int64_t q_heads,        \
      std::int64_t kv_heads, std::int64_t head_dim, float scale, float softcap, std::int64_t window);        \
  void silu_mul(const float* gate, const float* up, float* out, std::int64_t n);                             \
  void add_inplace(float* y, const float* x, std::int64_t n);                                                \
  void snake(const float* x, const float* alpha, const float* inv_alpha, float* y, std::int64_t length,      \
             std::int64_t channels);

namespace zoo::kernels::cpu::generic {
ZOO_CPU_ISA_OPS_DECLARATIONS
}  // namespace zoo::kernels::cpu::generic

namespace zoo::kernels::cpu::avx2 {
ZOO_CPU_ISA_OPS_DECLARATIONS
}  // namespace zoo::kernels::cpu::avx2

#undef ZOO_CPU_ISA_OPS_DECLARATIONS
