#pragma once
// Elementwise, normalization, embedding, RoPE and per-row reduction ops for a bf16 forward pass.
// Every pointer is device memory, every tensor contiguous row-major unless a stride is given, and
// every op is stream-ordered, allocation-free and capturable in a CUDA graph. Rounding follows
// transformers running in bf16 (each op's comment says where values are rounded), so the
// CUDA backend tracks golden traces made with torch.
#include <cstddef>
#include <cstdint>

#include "zoo/kernels/cuda/common.hpp"

namespace zoo::kernels::cuda {

// ---- embedding --------------------------------------------------------------------------------
// out[t, :] = table[ids[t], :]. Ids outside [0, vocab) give a zero row (callers validate ids on
// the host; a device kernel has no way to report them).
void embedding_gather(const Bf16* table, std::int64_t vocab, std::int64_t hidden, const std::int32_t* ids,
                      std::int64_t tokens, Bf16* out, cudaStream_t stream);
// Overrides: out[positions[i], :] = bf16(rows[i, :]) for i < count (rows float32 [count, hidden]),
// e.g. embeddings of non-text inputs computed on the host.
void scatter_rows_f32(const std::int32_t* positions, const float* rows, std::int64_t count, std::int64_t hidden,
                      Bf16* out, cudaStream_t stream);
// Rows of a table summed into embeddings: out[positions[i], :] = bf16(sum_{j < per_position}
// table[ids[i * per_position + j], :]) for i < count, summed in float32 in j order and rounded once.
// ids outside [0, table_rows) add nothing (callers validate them on the host).
void sum_table_rows(const Bf16* table, std::int64_t table_rows, std::int64_t hidden, const std::int32_t* ids,
                    std::int64_t per_position, const std::int32_t* positions, std::int64_t count, Bf16* out,
                    cudaStream_t stream);

// ---- RMSNorm -----------------------------------------------------------------------------------
// times_w: y = bf16(w * bf16(x * rsqrt(mean(x^2) + eps))): normalized in float32, cast to bf16,
// then multiplied by the bf16 weight, like transformers' RMSNorm modules. one_plus: y = bf16(x *
// rsqrt(...) * (1 + w)) all in float32 and rounded once, like transformers' 1 + w norms. In-place (y == x) is
// allowed. Rows are x_stride / y_stride elements apart (0: dim), so a slice of a packed
// projection can be normed where it lies.
enum class NormWeight { times_w, one_plus };
void rms_norm(const Bf16* x, const Bf16* w, Bf16* y, std::int64_t rows, std::int64_t dim, float eps,
              cudaStream_t stream, NormWeight kind = NormWeight::times_w, std::int64_t x_stride = 0,
              std::int64_t y_stride = 0);
// An RMSNorm whose row is split over ranks (tensor parallelism: a norm over a whole projection
// each rank holds a slice of). row_sum_squares: sums[r] = the float32 sum of x's row r squared.
// rms_norm_split: the mean of squares of row r is (sum over p < parts of pieces[p * rows + r], in
// that order) / divide_by / whole_dim, then y as rms_norm with this rank's slice of the weight.
void row_sum_squares(const Bf16* x, float* sums, std::int64_t rows, std::int64_t dim, std::int64_t x_stride,
                     cudaStream_t stream);
void rms_norm_split(const Bf16* x, const Bf16* w, Bf16* y, std::int64_t rows, std::int64_t dim,
                    std::int64_t x_stride, std::int64_t y_stride, const float* pieces, int parts,
                    float divide_by, float whole_dim, float eps, cudaStream_t stream,
                    NormWeight kind = NormWeight::times_w);
// Residual add fused with the next norm: h = bf16(h + x); y = rms_norm(h). The residual stream
// stays bf16 like transformers' (each add rounds). Without a weight (w null) y = h.
void add_rms_norm(Bf16* h, const Bf16* x, const Bf16* w, Bf16* y, std::int64_t rows, std::int64_t dim, float eps,
                  cudaStream_t stream, NormWeight kind = NormWeight::times_w);
// A sublayer's output norm, the residual add and the next norm in one kernel: h = bf16(h +
// rms_norm(x, w_out)); y = rms_norm(h, w_next), each rounded as rms_norm then add_rms_norm round
// (bitwise the same). w_out is required; without w_next, y = h. x is left as it was.
void norm_add_rms_norm(const Bf16* x, const Bf16* w_out, Bf16* h, const Bf16* w_next, Bf16* y, std::int64_t rows,
                       std::int64_t dim, float eps, cudaStream_t stream, NormWeight kind = NormWeight::times_w);

// ---- per-head q/k RMSNorm + half-split RoPE + KV-cache write ------------------------------------
// For each token t at position p = positions ? positions[t] : start + t:
//   q_out[t, h, :]     = rope(rms_norm_head(q[t, h, :], q_norm_weight), p)
//   k_cache[p, g, :]   = rope(rms_norm_head(k[t, g, :], k_norm_weight), p)
//   v_cache[p, g, :]   = v[t, g, :]
// Projection biases are added by the GEMM (Gemm::linear_bias), before this op. Without norm weights
// (both null) there is no per-head norm. rope(x) = x * cos + rotate_half(x) * sin with
// cos/sin = cos/sin(p * inv_freq[i]) * attention_scaling computed in float32 and cast to bf16,
// each product and the sum rounded to bf16, as torch does in bf16. inv_freq is the model's table
// (device, rotary_dim / 2 floats); without one, the default 1 / theta^(2i / R). With rotary_dim
// R < head_dim only the first R values of a head rotate (pairs (i, i + R/2)); the rest pass
// through, normed. q, k, v may be slices of one packed QKV projection
// (row strides in elements). q_normed / k_normed, when set, also receive the normed values
// before rotation (trace taps), laid out like q_out / [tokens, kv_heads, D].
struct QkNormRopeArgs {
  const Bf16* q = nullptr;
  std::int64_t q_stride = 0;  // elements between tokens; 0: q_heads * head_dim
  const Bf16* k = nullptr;
  std::int64_t k_stride = 0;  // 0: kv_heads * head_dim
  const Bf16* v = nullptr;
  std::int64_t v_stride = 0;  // 0: kv_heads * head_dim
  const Bf16* q_norm_weight = nullptr;  // [head_dim], optional (with k_norm_weight)
  const Bf16* k_norm_weight = nullptr;  // [head_dim]
  const float* inv_freq = nullptr;      // device [head_dim / 2]; null: from theta
  Bf16* q_out = nullptr;                // [tokens, q_heads, head_dim]
  Bf16* k_cache = nullptr;              // [max_positions, kv_heads, head_dim]
  Bf16* v_cache = nullptr;              // [max_positions, kv_heads, head_dim]
  Bf16* q_normed = nullptr;             // optional
  Bf16* k_normed = nullptr;             // optional
  const std::int32_t* positions = nullptr;  // device, [tokens]; null: start + t
  // device, [tokens]: the cache row token t's k and v go to (a paged cache's slot); null: its position.
  const std::int32_t* cache_rows = nullptr;
  std::int64_t start = 0;
  std::int64_t tokens = 0;
  int q_heads = 0, kv_heads = 0, head_dim = 0;
  int rotary_dim = 0;     // the rotated part of each head (partial rotary); 0: head_dim
  bool one_plus = false;  // the norms scale by 1 + w
  float eps = 1e-6f;
  float theta = 1e6f;
  float attention_scaling = 1.0f;
};
void qk_norm_rope_cache(const QkNormRopeArgs& args, cudaStream_t stream);

// ---- elementwise -------------------------------------------------------------------------------
// out[t, i] = bf16(bf16(silu(gate[t, i])) * up[t, i]) (torch: act_fn(gate) * up, both bf16).
// Packed form: gate_up is [tokens, 2 * inter] with the gate in the first half of each row.
void silu_and_mul(const Bf16* gate_up, Bf16* out, std::int64_t tokens, std::int64_t inter, cudaStream_t stream);
void silu_and_mul(const Bf16* gate, std::int64_t gate_stride, const Bf16* up, std::int64_t up_stride, Bf16* out,
                  std::int64_t tokens, std::int64_t inter, cudaStream_t stream);
// The other gated activations on the packed form: out = bf16(bf16(act(gate)) * up), act the tanh
// GELU (gelu_pytorch_tanh) or the erf GELU, computed in float32 like torch's bf16 kernels.
enum class GatedActivation { silu, gelu_tanh, gelu };
void act_and_mul(GatedActivation act, const Bf16* gate_up, Bf16* out, std::int64_t tokens, std::int64_t inter,
                 cudaStream_t stream);
// x = bf16(x * s) over n values (s is applied as given: round it to bf16 first to match a bf16
// tensor product).
void scale(Bf16* x, std::int64_t n, float s, cudaStream_t stream);
// x = cap * tanh(x / cap) over n float32 values (logit soft-capping).
void softcap(float* x, std::int64_t n, float cap, cudaStream_t stream);
// out = a + b (bf16: rounded once). out may alias a or b.
void add(const Bf16* a, const Bf16* b, Bf16* out, std::int64_t n, cudaStream_t stream);
void add(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream);
void bf16_to_f32(const Bf16* in, float* out, std::int64_t n, cudaStream_t stream);
// Round to nearest even; NaN stays NaN.
void f32_to_bf16(const float* in, Bf16* out, std::int64_t n, cudaStream_t stream);

// ---- per-row reductions (logits) ---------------------------------------------------------------
// Ranking as torch.argmax / torch.topk and the CPU reference: NaN above every number, ties to the
// lower index.
// out[r] = index of the largest x[r, :].
void argmax_rows(const float* x, std::int64_t rows, std::int64_t n, std::int32_t* out, cudaStream_t stream);
void argmax_rows(const Bf16* x, std::int64_t rows, std::int64_t n, std::int32_t* out, cudaStream_t stream);
// out[r, :] = log_softmax(x[r, :]) in float32 (max-shifted; the sum of exponentials and the
// normalizer in float64 like the CPU reference).
void log_softmax_rows(const float* x, float* out, std::int64_t rows, std::int64_t n, cudaStream_t stream);
void log_softmax_rows(const Bf16* x, float* out, std::int64_t rows, std::int64_t n, cudaStream_t stream);
// indices[r, 0..k) = the k largest entries of x[r, :] in rank order; values[r, :] (optional)
// gets their values. 1 <= k <= kMaxTopK and k <= n. Needs a device workspace of
// top_k_workspace_bytes(rows, n, k) bytes.
inline constexpr int kMaxTopK = 1024;
std::size_t top_k_workspace_bytes(std::int64_t rows, std::int64_t n, int k);
void top_k_rows(const float* x, std::int64_t rows, std::int64_t n, int k, std::int32_t* indices, float* values,
                void* workspace, std::size_t workspace_bytes, cudaStream_t stream);
void top_k_rows(const Bf16* x, std::int64_t rows, std::int64_t n, int k, std::int32_t* indices, float* values,
                void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

// ---- sampling ----------------------------------------------------------------------------------
// Picks a token from one row of float32 logits on the device by the rule of zoo::sample_logits
// (framework/sdk/include/zoo/sampling.hpp, the host reference): greedy (NaN never wins, ties to the lower
// index), or temperature, top-k, top-p and the pick with the caller's uniform draw. The row is
// also checked (first NaN/+inf index, count of entries other than -inf). Parameters are read from
// device memory when the kernels run, so a captured graph replays with each step's new draw.
// With top-k in 1..kSampleSelectMaxK (SampleMode::select) the k best candidates are found by a
// radix select (histograms of the keys' bits, then of the indices' for ties) and only they are
// sorted, in one block; otherwise (SampleMode::sort) a stable descending radix sort (cub) orders
// the whole row. Min-p then cuts the ranked candidates (binary search on the falling weights). The masses are summed in float64 in another order than the host's, so the id
// equals the host's except when u lands within float64 rounding of a boundary.
struct SampleParams {
  double u = 0.0;  // uniform in [0, 1)
  float temperature = 0.0f;
  std::int32_t top_k = 0;  // 0: off
  float top_p = 1.0f;      // 1: off
  float min_p = 0.0f;      // 0: off
};
struct SampleOutput {
  std::int32_t id = -1;
  float logit = 0.0f;
  std::int32_t bad_index = -1;  // first NaN or +inf; -1: none
  float bad_value = 0.0f;
  std::int32_t unmasked = 0;  // entries other than -inf
  std::int32_t pad = 0;
};
// Device workspace for sample_row over rows of n entries; zero it once after allocating (the
// kernels leave it as they found it, so replays need no reset).
std::size_t sample_workspace_bytes(std::int64_t n);
// Which kernels sample_row launches. The host picks it from the request (sample_mode); the
// parameters on the device must agree (a captured graph replays one mode with new parameters):
// greedy reads none, select needs temperature > 0 and top_k in 1..kSampleSelectMaxK (clamped to
// that range), sort needs temperature > 0 and takes any top_k.
enum class SampleMode : int { greedy, select, sort };
inline constexpr int kSampleSelectMaxK = 2048;
// temperature 0: greedy; top_k in 1..kSampleSelectMaxK: select; else sort.
SampleMode sample_mode(float temperature, std::int32_t top_k);
void sample_row(const float* logits, std::int64_t n, SampleMode mode, const SampleParams* params, SampleOutput* out,
                void* workspace, std::size_t workspace_bytes, cudaStream_t stream);
// Greedy picks of many rows in one launch (the batch runtime's decode step): pick i reads logits
// row rows[i] (device int32), writes out[i] and uses its own workspace at workspace + i * stride
// (stride >= sample_workspace_bytes(n), each zeroed once). The same picks as sample_row(greedy).
void sample_rows_greedy(const float* logits, std::int64_t n, const std::int32_t* rows, std::int64_t count,
                        SampleOutput* out, void* workspace, std::size_t workspace_stride, cudaStream_t stream);
// Picks of many rows of one mode (the batch runtime's step), each with its own parameters: pick i
// reads logits row rows[i] with params[i], writes out[i] and uses its own workspace as above
// (stride a multiple of 256). The same picks as sample_row in a fixed number of launches whatever
// the count: select runs grid.y = count, sort one segmented sort over all rows' workspaces, which
// needs `temp` of sample_rows_temp_bytes(n, count) (uninitialized is fine).
std::size_t sample_rows_temp_bytes(std::int64_t n, std::int64_t count);
void sample_rows(const float* logits, std::int64_t n, SampleMode mode, const std::int32_t* rows, std::int64_t count,
                 const SampleParams* params, SampleOutput* out, void* workspace, std::size_t workspace_stride,
                 void* temp, std::size_t temp_bytes, cudaStream_t stream);

// Penalties over each sequence's own tokens (zoo::apply_penalties' rule and arithmetic, so the
// rows equal the host's bit for bit): row `from_row` of logits [*, n] is copied to `to_row` with the
// penalties applied (the raw row stays for logprobs), given the sequence's tokens at
// tokens[tokens_at .. tokens_at + length) of which those from output_start on are its output. One
// block per row; `workspace` holds penalty_workspace_bytes(n) per row (a count per id, which the
// kernel clears first). restore_pick_logits then puts each pick's raw logit back into its
// SampleOutput (out[pick].logit, read from from_row), as the host reference reports it.
// A row's logit biases (added first) are biases[bias_at .. bias_at + bias_count), distinct ids.
struct PenaltyRow {
  std::int64_t tokens_at = 0;
  std::int32_t from_row = 0, to_row = 0;
  std::int32_t length = 0, output_start = 0;
  float repetition = 1.0f, frequency = 0.0f, presence = 0.0f;
  std::int32_t pick = -1;
  std::int32_t bias_at = 0, bias_count = 0;
};
struct LogitBias {
  std::int32_t id = 0;
  float bias = 0.0f;
};
std::size_t penalty_workspace_bytes(std::int64_t n);
void apply_penalties_rows(float* logits, std::int64_t n, const PenaltyRow* rows, std::int64_t count,
                          const std::int32_t* tokens, void* workspace, cudaStream_t stream,
                          const LogitBias* biases = nullptr);
void restore_pick_logits(const float* logits, std::int64_t n, const PenaltyRow* rows, std::int64_t count,
                         SampleOutput* out, cudaStream_t stream);
// history[dest[i]] = ids[i] for i < count where dest[i] >= 0 (a step's tokens into each sequence's
// copy on the device; pairs = [dest[count], ids[count]]).
void scatter_tokens(std::int32_t* history, const std::int32_t* pairs, std::int64_t count, cudaStream_t stream);

// Log-probabilities by zoo::fill_logprobs' rule (the host reference), for rows[i] of logits [*, n]:
// lse[i] = log-sum-exp of the row (NaN as -inf, float64; 0 when the largest entry is not finite),
// so log p(j) = row[j] - lse[i]; and the `top` (<= kMaxLogprobTop) likeliest entries, most likely
// first, ties to the lower index: top_ids[i * top + r] and their values (NaN as -inf). One block
// per row; the sums run in another order than the host's (float64, so the float results agree).
// With `ids`: id_values[i] = the row's value at ids[i] (a scored token's logit; skipped where
// ids[i] is negative).
inline constexpr int kMaxLogprobTop = 20;
void logprob_rows(const float* logits, std::int64_t n, const std::int32_t* rows, std::int64_t count, int top,
                  double* lse, std::int32_t* top_ids, float* top_values, cudaStream_t stream,
                  const std::int32_t* ids = nullptr, float* id_values = nullptr);

// One pick per segment of a float32 row: logits[s * width, (s + 1) * width) for s < segments, by
// the rule zoo::SegmentSampleRule::threshold_top_k_index_cdf (zoo/model.hpp): temperature 0 is the
// first argmax; else top-k keeping ties with the k-th value, top-p over the survivors ranked by
// value (ties to the lower index), float64 softmax, and the first index in index order whose
// cumulative probability exceeds u[s]. The float64 sums run in the host reference's order (one
// thread per segment walks them), so the ids equal the host's except where an exp() rounding
// difference of one ulp moves a boundary across u. out[s].bad_index is the first NaN, else the first
// +inf; out[s].unmasked counts entries other than -inf. Parameters and uniforms are read from device
// memory when the kernel runs, and greedy or not is decided there, so one captured graph replays
// every setting. One block per segment; width <= kSegmentSampleMaxWidth.
//
// Many rows in one launch (a batch's picks, each with its own request): pick p < picks reads the
// row at logits + (rows ? rows[p] : p) * row_stride, its parameters params[p], its uniforms
// u[p * segments ..] and writes out[p * segments ..]. The defaults are one pick of the row at
// `logits`.
struct SegmentSampleParams {
  float temperature = 0.0f;  // 0: greedy
  std::int32_t top_k = 0;    // <= 0 or >= width: off
  float top_p = 1.0f;        // >= 1: off
  std::int32_t pad = 0;
};
inline constexpr std::int64_t kSegmentSampleMaxWidth = 2048;  // its shared memory stays under 48 KiB
void sample_segments(const float* logits, std::int64_t segments, std::int64_t width, const SegmentSampleParams* params,
                     const double* u, SampleOutput* out, cudaStream_t stream, std::int64_t picks = 1,
                     const std::int32_t* rows = nullptr, std::int64_t row_stride = 0);

}  // namespace zoo::kernels::cuda
