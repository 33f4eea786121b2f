#pragma once
// One sequence's queries in a paged attention call (cpu_ops.hpp: attention_paged_gqa). A plain
// struct in a header of its own: the per-ISA kernel sources include it without the std headers of
// cpu_ops.hpp.
#include <cstdint>

namespace zoo::kernels::cpu {

// Tokens per KV page; zoo::kKvPageTokens (zoo/kv_pages.hpp) is the same number.
inline constexpr std::int64_t kPagedAttentionPageTokens = 16;

struct PagedAttentionSlice {
  std::int64_t row = 0;     // the slice's first query row in q and out
  std::int64_t tokens = 0;  // its queries, at positions start .. start + tokens - 1
  std::int64_t start = 0;
  const std::int32_t* pages = nullptr;  // page i holds positions 16 i .. 16 i + 15
};

}  // namespace zoo::kernels::cpu
