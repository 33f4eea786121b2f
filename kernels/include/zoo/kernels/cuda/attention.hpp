#pragma once
// Causal grouped-query attention over a bf16 KV cache, on tensor cores (mma.sync m16n8k16, so it
// runs on sm_80 and later). Layouts (row-major, contiguous unless a stride is given):
//   q:       [q_tokens, q_heads, head_dim]
//   k/v:     [max_positions, kv_heads, head_dim]  (the cache; position p at row p)
//   out:     [q_tokens, q_heads, head_dim]
// Query head h reads kv head h / (q_heads / kv_heads). Scores are scaled by `scale` (0 means
// head_dim^-0.5), then (softcap > 0) capped as softcap * tanh(score / softcap); with window > 0 a
// query at position p sees keys p - window + 1 .. p only. The softmax runs in float32 (online, FlashAttention-2 style), probabilities
// are rounded to bf16 for the P@V product (as flash/SDPA kernels do), the output is bf16.
// head_dim must be 64, 96, 128 or 256; all pointers 16-byte aligned.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "zoo/kernels/cuda/common.hpp"

namespace zoo::kernels::cuda {

// Prefill: `tokens` queries at positions start .. start+tokens-1 attend to cache positions
// 0 .. their own position (so start > 0 continues after cached tokens).
struct PrefillAttentionArgs {
  const Bf16* q = nullptr;
  std::int64_t q_stride = 0;  // elements between tokens; 0: q_heads * head_dim
  const Bf16* k_cache = nullptr;
  const Bf16* v_cache = nullptr;
  Bf16* out = nullptr;
  std::int64_t out_stride = 0;  // 0: q_heads * head_dim
  std::int64_t tokens = 0;
  std::int64_t start = 0;
  int q_heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0.0f;
  float softcap = 0.0f;     // > 0: scores capped with tanh
  std::int64_t window = 0;  // > 0: sliding-window attention
  // A paged cache: position j's keys and values sit in cache row pages[j / 16] * 16 + j % 16
  // (pages of 16 rows, the batch runtime's KV pages); null: row j. Zoo's kernel only (not cuDNN).
  const std::int32_t* pages = nullptr;

  // The strides in effect (0 resolved to packed rows).
  std::int64_t q_row_stride() const { return q_stride ? q_stride : std::int64_t{q_heads} * head_dim; }
  std::int64_t out_row_stride() const { return out_stride ? out_stride : std::int64_t{q_heads} * head_dim; }
};

// The softmax scale of an attention call: `scale`, or head_dim^-0.5 when it is 0.
inline float attention_scale(float scale, int head_dim) {
  return scale > 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}
void attention_prefill(const PrefillAttentionArgs& args, cudaStream_t stream);

// Several prefill chunks in one launch (a batch step's prompt chunks: one launch per layer instead
// of one per chunk, and blocks enough to fill the GPU where each chunk alone would not). `tiles`
// (device, int32) holds tile_count tiles of kPrefillTileInts: {q_row, tokens, start, pages offset,
// q0, key_lo, key_hi, slot}: the chunk's queries are rows q_row .. q_row + tokens - 1 of args.q and
// args.out, at positions start .., its page table is args.pages + pages offset, and the tile covers
// its queries q0 .. q0 + attention_prefill_tile_rows(head_dim) - 1. With slot -1 (key_lo, key_hi 0)
// a tile attends to every key it may see and writes its rows; per row the result is bitwise that
// of attention_prefill on the chunk alone (the same key tiles in the same order). A query tile
// over a long cached prefix may instead be split over its keys (flash-decoding's split-K): tiles
// with slot >= 0 cover keys [key_lo, key_hi) (multiples of 64) each, their partials go to
// `split->partial` (attention_prefill_partial_bytes for split->slots slots), and a second launch
// merges each query tile's slots (split->merges: merge_count entries of kPrefillMergeInts:
// {q_row, tokens, q0, first slot, slots}) into args.out. Order tiles heaviest (most keys) first.
// args.tokens and args.start are not read.
inline constexpr int kPrefillTileInts = 8;
inline constexpr int kPrefillMergeInts = 5;
struct PrefillSplit {
  void* partial = nullptr;
  std::int64_t slots = 0;
  const std::int32_t* merges = nullptr;
  std::int64_t merge_count = 0;
};
std::int64_t attention_prefill_tile_rows(int head_dim);
std::size_t attention_prefill_partial_bytes(int head_dim, int q_heads, std::int64_t slots);
void attention_prefill_tiles(const PrefillAttentionArgs& args, const std::int32_t* tiles, std::int64_t tile_count,
                             cudaStream_t stream, const PrefillSplit* split = nullptr);

// Prefill attention on the faster engine for the shape: cuDNN's fused flash attention (in builds
// that found cuDNN >= 9.16, for prompts of at least cudnn_min_tokens() tokens, when cuDNN has an
// engine for the shape) or else attention_prefill. cuDNN's Hopper kernels (wgmma, TMA) run 1.7-2.6x
// faster than attention_prefill from 4096 tokens up, but an execution plan is built per distinct
// (tokens, start) shape on its first call: ~60 ms on the H200 (the first of a process and of each
// head_dim up to ~1.4 s: library load, kernel compile). Only prompts long enough to repay that take
// cuDNN by default: an 8192-token prefill of the 8B shape saves ~47 ms per call. Results agree
// within bf16 rounding, not bitwise. One object per model runtime: it owns cuDNN's handle, the plans
// and the workspace; calls are serialized inside. Never used while the stream is being captured
// into a CUDA graph (plans and workspace are made outside graphs).
// ZOO_CUDNN=0 (read per call) always takes attention_prefill; ZOO_CUDNN_MIN_TOKENS=N moves the
// threshold; ZOO_CUDNN_LOG=1 prints every plan built or refused, with its build time.
class PrefillAttention {
 public:
  static constexpr std::int64_t kCudnnMinTokens = 4096;

  PrefillAttention();
  ~PrefillAttention();
  PrefillAttention(const PrefillAttention&) = delete;
  PrefillAttention& operator=(const PrefillAttention&) = delete;

  void run(const PrefillAttentionArgs& args, cudaStream_t stream);
  // The engine of the last call: "cudnn", "zoo", or "none" before the first.
  const char* last_engine() const;
  // Why this process cannot use cuDNN ("" when it can).
  static std::string cudnn_unavailable_reason();
  static std::int64_t cudnn_min_tokens();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Decode: a few queries (q_tokens, e.g. 1, or several for speculative steps) at positions
// kv_len - q_tokens .. kv_len - 1, causal among themselves, over cache positions 0 .. kv_len-1.
// The sequence is split across blocks (partial results merged in the same launch by the last
// block to finish, or for long grids by a second kernel); one block serves all query heads of a
// kv head, so K/V are read once per group.
// For CUDA graphs replayed at growing lengths, pass kv_len_device (read on the device) and set
// kv_len to the largest length the graph will see: it sizes the grid, and the split length
// follows the true length on the device.
// The workspace must be zero-filled once before its first use (it holds the merge tickets, which
// every call leaves at zero again); calls sharing one workspace must be stream-ordered.
// On sm_90+ the kernel is a programmatic dependent launch (ZOO_PDL=0 turns that off): it may start
// while the kernel before it in the stream still runs, and reads cache positions
// 0 .. kv_len - q_tokens - 1 (and kv_len_device) before waiting for it. Those must therefore be
// written by earlier work, not by that kernel (the step's own keys, kv_len - q_tokens .., may be).
struct DecodeAttentionArgs {
  const Bf16* q = nullptr;  // [q_tokens, q_heads, head_dim], contiguous
  const Bf16* k_cache = nullptr;
  const Bf16* v_cache = nullptr;
  Bf16* out = nullptr;  // [q_tokens, q_heads, head_dim], contiguous
  int q_tokens = 1;
  std::int64_t kv_len = 0;
  const std::int32_t* kv_len_device = nullptr;
  int q_heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0.0f;
  float softcap = 0.0f;     // as PrefillAttentionArgs
  std::int64_t window = 0;
  void* workspace = nullptr;  // decode_attention_workspace_bytes(...) bytes of device memory, zeroed once
  std::size_t workspace_bytes = 0;
  // Many sequences in one launch (the batch runtime): sequence b's q_tokens queries and outputs
  // are rows b * q_tokens .. of q and out, its length kv_len_device[b] (required when batch > 1;
  // kv_len bounds them all), and with a page table its keys and values at position j sit in cache
  // row page_table[b * page_stride + j / 16] * 16 + j % 16 (pages of 16 rows). The workspace is
  // decode_attention_workspace_bytes(batch * q_tokens, ...).
  int batch = 1;
  const std::int32_t* page_table = nullptr;  // null: the cache is contiguous per position
  std::int64_t page_stride = 0;
};
std::size_t decode_attention_workspace_bytes(int q_tokens, int q_heads, int head_dim);
void attention_decode(const DecodeAttentionArgs& args, cudaStream_t stream);

}  // namespace zoo::kernels::cuda
