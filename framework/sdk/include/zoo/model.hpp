#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/batch.hpp"
#include "zoo/diagnostic_hook.hpp"
#include "zoo/extension.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/request.hpp"
#include "zoo/tensor.hpp"
#include "zoo/weight_source.hpp"

namespace zoo {

// What a plugin is asked to build: the model's configuration (a HF config.json object, or the part
// of one another plugin hands over), where its weights come from, and where it runs.
struct ModelArgs {
  nlohmann::json config;
  std::shared_ptr<const WeightSource> weights;
  Device device;
  DType dtype = DType::F32;         // compute dtype
  std::int64_t max_context = 4096;  // KV-cache capacity per session
  // Ranks the model splits each layer over (model.tensor_parallel). A model that honours a value
  // above 1 offers the TensorParallel extension (zoo/tensor_parallel.hpp); the host refuses one
  // that does not, so a plugin that never reads this field cannot ignore it silently.
  int tensor_parallel = 1;
  // Batch invariance (model.batch_invariant): a sequence's logits bitwise the same whatever else
  // shares its forward passes, at a cost in speed. A model that honours it offers the BatchInvariant
  // extension (zoo/batch_invariant.hpp); the host refuses one that does not.
  bool batch_invariant = false;
};

struct ModelInfo {
  std::string plugin;
  std::string model_type;
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  std::string summary;  // one line for humans
};

// Picking the next token from the last position's text logits where they are computed, so that
// only the id crosses to the host. The random number is drawn by the caller (its generator state
// stays on the host), so a seeded run picks the same ids on every device. Semantics are those of
// zoo::sample_logits (sampling.hpp): temperature, then top-k, top-p and min-p, then the pick with `u`.
struct SampleRequest {
  float temperature = 0.0f;  // 0: greedy (ties to the lower index)
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  double u = 0.0;            // uniform in [0, 1); unused when greedy
  float min_p = 0.0f;        // 0: off; else drop tokens less likely than min_p times the likeliest
  // Penalties over the sequence's own tokens, applied to the row before everything above (vLLM's
  // order and rules; zoo::apply_penalties is the reference): repetition over every token of the
  // sequence (HF's rule: a positive logit divided by it, any other multiplied; 1: off), then
  // frequency (times the token's count among the output tokens, subtracted), then presence
  // (subtracted from every token that occurs among them); 0: off. Output tokens are those at positions
  // >= output_start (the prompt's length). Logprobs stay those of the raw row.
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  std::int64_t output_start = 0;
  // Added to the logits of these ids before the penalties (OpenAI's logit_bias), ids ascending
  // and distinct, within the vocabulary.
  std::span<const std::pair<std::int64_t, float>> logit_bias;
  // Whether the row changes before the pick (a penalty or a bias).
  bool penalized() const {
    return repetition_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f || !logit_bias.empty();
  }
};

// How OutputRequest::head_sample picks. Generic names for first-party rules a plugin's host sampler
// also implements (the host side is the reference; a device kernel follows it to the same ids).
enum class SegmentSampleRule : int {
  // temperature 0: the first maximal index (NaN refused, +inf wins, all -inf gives 0), no draw.
  // Else logits / temperature; top-k keeps every entry >= the k-th largest value (ties kept, -inf
  // entries never); top-p ranks the survivors by value descending (ties to the lower index) and
  // drops one when the mass ranked before it already exceeds top_p; softmax in float64 (masses
  // summed in index order); the pick is the first index, in ascending index order, whose
  // cumulative probability exceeds u. NaN, +inf or only -inf in a segment is an error.
  threshold_top_k_index_cdf,
};

// Picking one id per segment of a row table head's output (OutputRequest::head_table) where it is
// computed, so that only the ids cross to the host: the last position's head row [table rows] is
// split into `segments` equal segments (e.g. one per codebook of a multi-codebook head). The
// uniforms are drawn by the caller, one per segment, so a seeded run picks the same ids anywhere.
struct HeadSampleRequest {
  SegmentSampleRule rule = SegmentSampleRule::threshold_top_k_index_cdf;
  std::int64_t segments = 1;
  float temperature = 0.0f;     // 0: greedy
  int top_k = 0;                // <= 0: off
  float top_p = 1.0f;           // 1: off
  std::span<const double> u;    // [segments], each in [0, 1); may be empty when greedy
};

// Which outputs a forward step should return. Default: logits at the last position.
struct OutputRequest {
  bool hidden = false;         // final normed hidden state (the head's input)
  bool logits = true;
  bool all_positions = false;  // else only the last position of this step
  // A row table (the RowTables extension, zoo/row_tables.hpp) applied as a linear head to the same rows: its logits,
  // float32 [rows, table rows], come back in ForwardResult::extra under the table's name. -1: none.
  int head_table = -1;
  // With `logits`: a session that can sample returns ForwardResult::sampled, picked from the last
  // position's row, and no logits; one that cannot ignores this and returns the logits as asked,
  // and the caller samples them with zoo::sample_logits (same semantics, same id).
  std::optional<SampleRequest> sample;
  // With `head_table`: a session that can sample the head where it runs returns
  // ForwardResult::head_sampled (one pick per segment) instead of the head's output in `extra`;
  // one that cannot ignores this and returns the output as asked, for the caller to sample.
  std::optional<HeadSampleRequest> head_sample;
  // With `sample`: >= 0 asks for the chosen token's log-probability (of the raw logits' softmax,
  // before temperature and filters) and, when > 0, the `top_logprobs` likeliest tokens with theirs,
  // in SampledToken. A session that cannot compute them refuses the step (InputError).
  int top_logprobs = -1;
  // Scoring given tokens (prompt logprobs, as `echo` in a completions API needs): with `logits` and
  // `all_positions`, row r of the step is scored against score_ids[r] (r < rows): that id's logit
  // and log-probability (fill_logprobs' rule) and the `score_top` likeliest come back in
  // ForwardResult::scores, one per id, and the step returns no logits rows. `sample` still picks
  // from the last row. A session or runner that cannot score refuses the step (InputError).
  std::span<const std::int64_t> score_ids;
  int score_top = 0;
};
inline constexpr int kMaxTopLogprobs = 20;

// Embeddings summed from a row table (the RowTables extension, zoo/row_tables.hpp) on the model's device: the embedding
// at positions[i] of this step becomes sum_{j < per_position} table[ids[i * per_position + j]],
// replacing the token's (and any override row's). How a plugin feeds tokens of another modality,
// e.g. one position per frame of several codebooks, without the rows leaving the device.
struct TableRows {
  int table = -1;  // -1: none
  std::span<const std::int64_t> positions;
  std::span<const std::int64_t> ids;  // [positions.size() * per_position]
  std::int64_t per_position = 0;
};

// One forward step of a Session: new token ids, optional embedding rows that replace the embedding
// at chosen positions of this step (float32 host rows, [positions.size(), hidden]).
struct ForwardStep {
  std::span<const std::int64_t> ids;
  std::span<const std::int64_t> override_positions;
  std::span<const float> override_rows;
  OutputRequest outputs;
  TableRows table_rows;
};

// A request turned into what a first forward step needs.
struct Prompt {
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> override_positions;
  std::vector<float> override_rows;  // [override_positions.size(), hidden]
  // Positions whose embeddings are sums of row-table rows (TableRows).
  int table = -1;
  std::vector<std::int64_t> table_positions;
  std::vector<std::int64_t> table_ids;  // [table_positions.size() * table_per_position]
  std::int64_t table_per_position = 0;

  ForwardStep step(OutputRequest outputs = {}) const {
    return {ids, override_positions, override_rows, outputs, {table, table_positions, table_ids, table_per_position}};
  }
};

// The token OutputRequest::sample picked, and what the check of its logits row found. A row holding
// NaN or +inf, or only -inf, comes from a broken forward pass: callers refuse it (generate() throws
// a ValidationError), and `id` is then whatever the pick gave, not a token to use.
struct SampledToken {
  std::int64_t id = -1;
  float logit = 0.0f;           // the chosen token's logit (raw, before temperature)
  std::int64_t bad_index = -1;  // the first index holding NaN or +inf; -1: none
  float bad_value = 0.0f;       // the value there
  bool all_masked = false;      // every logit is -inf
  bool valid() const { return bad_index < 0 && !all_masked; }
  // When OutputRequest::top_logprobs >= 0: log p(id), and the likeliest tokens (most likely first,
  // ties to the lower id) with their log-probabilities.
  float logprob = 0.0f;
  std::vector<std::pair<std::int64_t, float>> top;
};

// Host float32 results: [rows, hidden] and [rows, vocab]; empty when not asked for. `logits` are
// always text logits over the model's vocabulary (ModelInfo::vocab_size), so a caller may sample
// them as token ids; a model whose head predicts something else (another modality, several
// codebooks) returns it in `extra` under a name its documentation gives, never in `logits`.
struct ForwardResult {
  HostTensor hidden;
  HostTensor logits;
  std::optional<SampledToken> sampled;  // when OutputRequest::sample was honoured
  // When OutputRequest::head_sample was honoured: one per segment, ids and bad_index within the
  // segment. For SegmentSampleRule::threshold_top_k_index_cdf bad_index is the first NaN, or with
  // none the first +inf (the host reference checks for NaN first); greedy picks accept +inf and
  // all -inf segments, so the caller judges validity by the rule, not by valid().
  std::vector<SampledToken> head_sampled;
  std::vector<std::pair<std::string, HostTensor>> extra;
  std::vector<SampledToken> scores;  // when OutputRequest::score_ids was given: one per id, in order

  const HostTensor* find_extra(std::string_view name) const {
    for (const auto& [key, tensor] : extra)
      if (key == name) return &tensor;
    return nullptr;
  }
};

// One sequence and its KV cache.
// Lifetime: a session keeps the model state it uses (weights, device buffers, streams) alive, so it
// may outlive the Model object that made it; it must not outlive the plugin library, which stays
// loaded while the PluginRegistry that made the model lives.
// Threads: a session is used by one thread at a time, and sessions of one model may share state
// (on CUDA: one stream and one GEMM plan cache for all of them). Plugins enforce this: a call that
// overlaps another on state it shares throws ConcurrentUseError (zoo/exclusive_use.hpp) rather
// than racing. Use one model per thread to run in parallel.
class Session {
 public:
  virtual ~Session() = default;
  virtual ForwardResult forward(const ForwardStep& step, DiagnosticHook* hook = nullptr) = 0;
  virtual std::int64_t position() const = 0;  // tokens already in the cache
  virtual void reset() = 0;
};

// Progress of long work (loading): done and total bytes.
using ProgressFn = std::function<void(std::size_t done, std::size_t total)>;

class Model {
 public:
  virtual ~Model() = default;
  virtual ModelInfo info() const = 0;
  // The tensors the model will read, named as in weight_source().
  virtual std::vector<TensorRequirement> requirements() const = 0;
  // The source the requirement names resolve against (a plugin may wrap what it was given).
  virtual const WeightSource& weight_source() const = 0;
  // Reads the weights; call after the load plan is clean.
  virtual void load(const ProgressFn& progress = {}) = 0;
  virtual std::unique_ptr<Session> new_session() = 0;
  // Turns a request into a prompt. The default takes input_ids and rejects any other field with
  // an InputError naming the request file and the field.
  virtual Prompt prepare(const Request& request) const;
  // Tap points this model adds to `zoo trace`'s default selection (globs), beyond the standard ones.
  virtual std::vector<std::string> extra_trace_points() const { return {}; }
  // Backend facts for benchmarks and diagnostics (e.g. peak device memory), free-form.
  virtual nlohmann::json runtime_stats() const { return nlohmann::json::object(); }
  // Empty for a text LM. Otherwise why sampling its forward pass as text is meaningless and what
  // to use instead (one line, e.g. "it predicts X, not text: use `zoo Y`"); such a model returns
  // no text logits, and `zoo generate` refuses it with this message.
  virtual std::string text_generation_unsupported() const { return {}; }
  // A runner of many sequences over a paged KV cache (zoo/batch.hpp), after load(). The default
  // throws an InputError: the model runs one sequence per Session only.
  virtual std::unique_ptr<Runner> new_runner(const RunnerOptions& options);
  // The extension named `name` (zoo/extension.hpp), or nullptr when the model does not offer it.
  // The default offers none.
  virtual Extension* find_extension(std::string_view name);

  // Typed lookups: extension<Speech>() is the model's Speech or nullptr; need_extension<Speech>()
  // throws an InputError naming the model and what it lacks instead.
  template <class E>
  E* extension() {
    return static_cast<E*>(find_extension(E::kName));
  }
  template <class E>
  E& need_extension() {
    if (E* e = extension<E>()) return *e;
    throw_lacking(E::kLacking);
  }

 private:
  [[noreturn]] void throw_lacking(std::string_view lacking) const;
};

}  // namespace zoo
