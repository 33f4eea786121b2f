#pragma once
// CPU reference ops in float32. Every tensor is contiguous row-major. These are what the CPU
// backend of a model runs, and what CUDA ops are tested against.
#include <cstdint>
#include <vector>
#include <span>

#include "zoo/kernels/paged_attention_slice.hpp"

namespace zoo::kernels::cpu {

// The instruction set the ops below run with. Binaries are portable x86-64; the AVX2/FMA kernels
// are picked at run time, once, at the first op, when the CPU has both. The environment variable
// ZOO_CPU_ISA=generic forces the portable kernels (avx2 demands the others, auto is the default).
// Both give the same results up to float32 rounding order.
enum class CpuIsa { generic, avx2 };
const char* cpu_isa_name(CpuIsa isa);
// Whether this CPU and this build can run `isa`.
bool cpu_isa_supported(CpuIsa isa);
// What a ZOO_CPU_ISA value selects on this machine (nullptr or "" or "auto": the best supported).
// Throws std::runtime_error naming ZOO_CPU_ISA for an unknown or unsupported value.
CpuIsa resolve_cpu_isa(const char* requested);
// The active instruction set (resolves ZOO_CPU_ISA on first use).
CpuIsa cpu_isa();
// Switches the active instruction set (tests, benchmarks); throws std::invalid_argument when not
// supported. Not to be called while ops run on other threads.
void set_cpu_isa(CpuIsa isa);

// y[m, n] = x[m, k] @ w[n, k]^T  (w laid out like a torch Linear weight). Multithreaded and
// cache-blocked. When `accumulate` is set, adds into y instead of overwriting it.
void linear(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n, std::int64_t k,
            bool accumulate = false);
// linear() with every row of y bitwise the same whatever m is and wherever the row sits (batch
// invariance): one reduction order for every m (the blocked GEMM's: k in blocks of 256 from 0, each
// block's partial added in order), where linear() picks its kernel by m. Slower for few rows.
void linear_rows_invariant(const float* x, const float* w, float* y, std::int64_t m, std::int64_t n,
                           std::int64_t k);

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w. Normalizes in float32 (accumulating in
// float64 is not what transformers does; we follow it: float32 sum of squares).
void rms_norm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t dim, float eps);

// Rotary embedding, half-split layout (rotate_half), in place on x[tokens, heads, head_dim] where
// token t sits at sequence position positions[t]: angle = float32(positions[t]) * inv_freq[i]
// (inv_freq has head_dim / 2 entries: the model's frequency table, scaled or not), and cos/sin
// are multiplied by attention_scaling (1 except for YaRN-style scaling), all in float32.
void rope_half_split(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                     const std::int64_t* positions, const float* inv_freq, float attention_scaling = 1.0f);
// Partial rotary: only the first `rotary_dim` values of each head (even, <= head_dim) are rotated,
// split in halves of rotary_dim / 2 (inv_freq has rotary_dim / 2 entries); the rest pass through.
void rope_half_split(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                     std::int64_t rotary_dim, const std::int64_t* positions, const float* inv_freq,
                     float attention_scaling);
// The same with the unscaled table rope_default_inv_freq(head_dim, theta).
void rope_half_split(float* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                     const std::int64_t* positions, float theta);
// inv_freq[i] = 1 / theta^(2i / head_dim) in float32, as transformers computes it.
std::vector<float> rope_default_inv_freq(std::int64_t head_dim, double theta);

// Causal grouped-query attention for `tokens` new queries at positions start..start+tokens-1 over
// a cache holding keys/values for positions 0..start+tokens-1.
//   q:   [tokens, q_heads, head_dim]
//   k,v: [cache_len >= start+tokens, kv_heads, head_dim]
//   out: [tokens, q_heads, head_dim]
// Scores scaled by `scale`, float32 softmax. q_heads must be a multiple of kv_heads; query head h
// reads kv head h / (q_heads / kv_heads).
void attention_causal_gqa(const float* q, const float* k, const float* v, float* out, std::int64_t tokens,
                          std::int64_t start, std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim,
                          float scale);

// What else a family's attention does to its scores.
struct AttentionOptions {
  float scale = 1.0f;
  float softcap = 0.0f;     // > 0: scaled scores become softcap * tanh(score / softcap)
  std::int64_t window = 0;  // > 0: a query at position p sees keys at p - window + 1 .. p only
};
void attention_causal_gqa(const float* q, const float* k, const float* v, float* out, std::int64_t tokens,
                          std::int64_t start, std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim,
                          const AttentionOptions& options);

// The same attention for many sequences at once over a paged cache: k and v hold pages of
// kPagedAttentionPageTokens rows ([pages][16][kv_heads][head_dim]); each slice's queries are rows
// slice.row .. slice.row + slice.tokens - 1 of q and out ([rows, q_heads, head_dim]), at positions
// slice.start .., attending to positions 0 .. through its page table. The same bits as
// attention_causal_gqa over a contiguous copy of each sequence's cache.
void attention_paged_gqa(const float* q, const float* k, const float* v, float* out,
                         std::span<const PagedAttentionSlice> slices, std::int64_t q_heads, std::int64_t kv_heads,
                         std::int64_t head_dim, const AttentionOptions& options);

// out = silu(gate) * up, elementwise over n values.
void silu_mul(const float* gate, const float* up, float* out, std::int64_t n);
// out = gelu(gate) * up with torch's tanh approximation (gelu_pytorch_tanh):
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
void gelu_tanh_mul(const float* gate, const float* up, float* out, std::int64_t n);
// out = gelu(gate) * up, the exact erf form: 0.5 x (1 + erf(x / sqrt(2))).
void gelu_mul(const float* gate, const float* up, float* out, std::int64_t n);

// x = cap * tanh(x / cap) over n values (logit soft-capping).
void softcap_inplace(float* x, std::int64_t n, float cap);
// x *= s over n values.
void scale_inplace(float* x, std::int64_t n, float s);

// y += x over n values.
void add_inplace(float* y, const float* x, std::int64_t n);

// Index of the largest value; ties go to the lower index.
std::int64_t argmax(std::span<const float> values);

// out = log_softmax(x) over one row of n values (float64 accumulation of the sum).
void log_softmax(const float* x, float* out, std::int64_t n);

// Indices of the k largest values, descending; ties to the lower index.
void top_k(std::span<const float> values, int k, std::int64_t* indices);

}  // namespace zoo::kernels::cpu
