// The Model seam over a DecoderSpec: requirements, load, sessions on the CPU or CUDA backend.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "decoder_backend.hpp"
#include "zoo/batch_invariant.hpp"
#include "zoo/error.hpp"
#include "zoo/row_tables.hpp"
#include "zoo/tensor_parallel.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

void check_step(const DecoderSpec& c, const ForwardStep& step, std::int64_t position, std::int64_t max_context,
                const std::vector<std::int64_t>& table_rows) {
  const auto T = static_cast<std::int64_t>(step.ids.size());
  if (T == 0) throw InputError(fmt::format("{}: a forward step needs at least one token", c.family));
  if (position + T > max_context)
    throw InputError(fmt::format("{}: {} tokens after {} cached exceed max_context {} (raise model.max_context)",
                                 c.family, T, position, max_context));
  for (auto id : step.ids)
    if (id < 0 || id >= c.vocab_size)
      throw InputError(fmt::format("{}: token id {} is outside the vocabulary [0, {})", c.family, id, c.vocab_size));
  const auto n = static_cast<std::int64_t>(step.override_positions.size());
  if (static_cast<std::int64_t>(step.override_rows.size()) != n * c.hidden_size)
    throw InputError(fmt::format("embedding overrides: {} positions need {} values, got {}", n, n * c.hidden_size,
                                 step.override_rows.size()));
  for (auto p : step.override_positions)
    if (p < 0 || p >= T)
      throw InputError(fmt::format("embedding override position {} is outside this step's {} tokens", p, T));
  if (const auto& s = step.outputs.sample; s && step.outputs.logits &&
      (!(s->temperature >= 0.0f) || !std::isfinite(s->temperature) || s->top_k < 0 ||
       !(s->top_p >= 0.0f && s->top_p <= 1.0f) || !(s->u >= 0.0 && s->u < 1.0) ||
       !(s->min_p >= 0.0f && s->min_p <= 1.0f)))
    throw InputError(fmt::format("{}: invalid sampling request (temperature {}, top_k {}, top_p {}, min_p {}, u {})",
                                 c.family, s->temperature, s->top_k, s->top_p, s->min_p, s->u));
  if (const auto& s = step.outputs.sample; s && step.outputs.logits && s->penalized() &&
      (!(s->repetition_penalty > 0.0f) || !std::isfinite(s->repetition_penalty) ||
       !std::isfinite(s->frequency_penalty) || !std::isfinite(s->presence_penalty) || s->output_start < 0))
    throw InputError(fmt::format("{}: invalid penalties (repetition {}, frequency {}, presence {}, output start {})",
                                 c.family, s->repetition_penalty, s->frequency_penalty, s->presence_penalty,
                                 s->output_start));
  if (const auto& s = step.outputs.sample; s && step.outputs.logits)
    for (std::size_t i = 0; i < s->logit_bias.size(); ++i) {
      const auto& [id, bias] = s->logit_bias[i];
      if (id < 0 || id >= c.vocab_size || (i > 0 && id <= s->logit_bias[i - 1].first) || !std::isfinite(bias))
        throw InputError(fmt::format("{}: logit_bias: token {} (bias {}) is outside the vocabulary [0, {}), repeated, "
                                     "out of order or not finite",
                                     c.family, id, bias, c.vocab_size));
    }
  if (const int n = step.outputs.top_logprobs; n != -1 && (n < 0 || n > kMaxTopLogprobs || !step.outputs.sample ||
                                                           !step.outputs.logits))
    throw InputError(fmt::format("{}: top_logprobs {} needs a sampled token and lies within [0, {}]", c.family, n,
                                 kMaxTopLogprobs));
  if (const auto& ids = step.outputs.score_ids; !ids.empty() || step.outputs.score_top != 0) {
    if (!step.outputs.logits || !step.outputs.all_positions || static_cast<std::int64_t>(ids.size()) > T)
      throw InputError(fmt::format("{}: scoring {} ids needs logits at all positions of a step of at least as many "
                                   "tokens ({})",
                                   c.family, ids.size(), T));
    if (step.outputs.score_top < 0 || step.outputs.score_top > kMaxTopLogprobs)
      throw InputError(fmt::format("{}: score_top {} lies outside [0, {}]", c.family, step.outputs.score_top,
                                   kMaxTopLogprobs));
    for (auto id : ids)
      if (id < 0 || id >= c.vocab_size)
        throw InputError(fmt::format("{}: scored id {} is outside the vocabulary [0, {})", c.family, id, c.vocab_size));
  }
  const auto tables = static_cast<int>(table_rows.size());
  if (step.outputs.head_table < -1 || step.outputs.head_table >= tables)
    throw InputError(fmt::format("{}: head table {} does not exist ({} row tables)", c.family, step.outputs.head_table, tables));
  if (const auto& h = step.outputs.head_sample) {
    if (step.outputs.head_table < 0)
      throw InputError(
          fmt::format("{}: a head sampling request needs a head table (OutputRequest::head_table)", c.family));
    const std::int64_t rows = table_rows[static_cast<std::size_t>(step.outputs.head_table)];
    if (h->rule != SegmentSampleRule::threshold_top_k_index_cdf)
      throw InputError(fmt::format("{}: unknown head sampling rule {}", c.family, static_cast<int>(h->rule)));
    if (h->segments <= 0 || rows % h->segments != 0)
      throw InputError(
          fmt::format("{}: the head's {} rows do not split into {} segments", c.family, rows, h->segments));
    bool draws_ok = h->temperature == 0.0f || static_cast<std::int64_t>(h->u.size()) == h->segments;
    for (double u : h->u) draws_ok = draws_ok && u >= 0.0 && u < 1.0;
    if (!(h->temperature >= 0.0f) || !std::isfinite(h->temperature) || !(h->top_p >= 0.0f && h->top_p <= 1.0f) ||
        !draws_ok)
      throw InputError(fmt::format("{}: invalid head sampling request (temperature {}, top_k {}, top_p {}, {} uniforms "
                                   "for {} segments, each in [0, 1))",
                                   c.family, h->temperature, h->top_k, h->top_p, h->u.size(), h->segments));
  }
  const TableRows& r = step.table_rows;
  if (r.table == -1 && r.positions.empty() && r.ids.empty()) return;
  if (r.table < 0 || r.table >= tables)
    throw InputError(fmt::format("{}: row table {} does not exist ({} row tables)", c.family, r.table, tables));
  if (r.per_position <= 0 || r.per_position > 4096 ||
      static_cast<std::int64_t>(r.ids.size()) != static_cast<std::int64_t>(r.positions.size()) * r.per_position)
    throw InputError(fmt::format("table rows: {} positions x {} rows each need {} ids, got {}", r.positions.size(),
                                 r.per_position, r.positions.size() * static_cast<std::size_t>(std::max<std::int64_t>(r.per_position, 0)),
                                 r.ids.size()));
  for (auto p : r.positions)
    if (p < 0 || p >= T) throw InputError(fmt::format("table row position {} is outside this step's {} tokens", p, T));
  const std::int64_t rows = table_rows[static_cast<std::size_t>(r.table)];
  for (auto id : r.ids)
    if (id < 0 || id >= rows) throw InputError(fmt::format("table row {} is outside the table's {} rows", id, rows));
}

namespace {

class DecoderModel : public Model, public RowTables, public TensorParallel, public BatchInvariant {
 public:
  DecoderModel(DecoderSpec spec, const ModelArgs& args)
      : spec_(std::move(spec)),
        weights_(args.weights),
        ranks_(args.tensor_parallel),
        invariant_(args.batch_invariant) {
    spec_.check(spec_.family + " config");
    if (!weights_) throw InputError(spec_.family + ": no weight source given");
    // Before anything lists the tensors it reads: the experts' names depend on their layout.
    detect_expert_layouts(spec_, *weights_);
    // Bounds max_context and checks the KV-cache size fits before a backend multiplies it out.
    spec_.kv_cache_elements(args.max_context, spec_.family);
    if (ranks_ < 1)
      throw InputError(fmt::format("{}: tensor_parallel {} is not a rank count", spec_.family, ranks_));
    if (invariant_) {
      // What the mode cannot promise is refused, not run approximately (docs/architecture.md).
      if (ranks_ > 1)
        throw SettingError(
            fmt::format("{}: batch_invariant with tensor_parallel {} (NCCL's all-reduce order depends on "
                        "the message size; not made invariant yet)",
                        spec_.family, ranks_));
      if (spec_.moe_layers() > 0)
        throw SettingError(spec_.family +
                           ": batch_invariant with mixture-of-experts layers (the expert GEMMs group "
                           "a step's rows by expert)");
    }
    if (args.device.is_cpu()) {
      if (args.dtype != DType::F32)
        throw SettingError(fmt::format("{}: the CPU backend computes in float32, not {}", spec_.family, dtype_name(args.dtype)));
      backend_ = make_cpu_backend(spec_, args);
    } else {
      if (args.dtype != DType::BF16)
        throw SettingError(
            fmt::format("{}: the CUDA backend computes in bfloat16, not {}", spec_.family, dtype_name(args.dtype)));
      backend_ = make_cuda_backend(spec_, args);
    }
  }

  ModelInfo info() const override {
    std::string summary = spec_.summary();
    if (ranks_ > 1) summary += fmt::format(", tensor parallel over {} ranks", ranks_);
    return {spec_.family,     spec_.model_type.empty() ? spec_.family : spec_.model_type,
            spec_.vocab_size, spec_.hidden_size,
            spec_.num_layers, summary};
  }
  std::vector<TensorRequirement> requirements() const override { return decoder_requirements(spec_); }
  const WeightSource& weight_source() const override { return *weights_; }
  void load(const ProgressFn& progress) override {
    backend_->load(*weights_, tables_, progress);
    tables_.clear();  // their views need not outlive load()
    loaded_ = true;
  }
  int add_row_table(const std::string& name, const TensorView& rows) override {
    if (loaded_) throw std::logic_error(spec_.family + ": add_row_table() after load()");
    if (rows.dtype != DType::BF16 && rows.dtype != DType::F16 && rows.dtype != DType::F32)
      throw InputError(fmt::format("{}: row table '{}' has dtype {}, expected a float type", spec_.family, name,
                                   dtype_name(rows.dtype)));
    if (rows.shape.size() != 2 || rows.shape[1] != spec_.hidden_size || rows.shape[0] <= 0)
      throw InputError(fmt::format("{}: row table '{}' must be [rows, {}], got {}", spec_.family, name,
                                   spec_.hidden_size, shape_str(rows.shape)));
    tables_.push_back({name, rows});
    return static_cast<int>(tables_.size()) - 1;
  }
  std::unique_ptr<Session> new_session() override {
    if (!loaded_) throw std::logic_error(spec_.family + ": new_session() before load()");
    return backend_->new_session();
  }
  std::unique_ptr<Runner> new_runner(const RunnerOptions& options) override {
    if (!loaded_) throw std::logic_error(spec_.family + ": new_runner() before load()");
    if (auto runner = backend_->new_runner(options)) return runner;
    throw InputError(spec_.family + ": this backend runs one sequence at a time (no batch runner)");
  }
  nlohmann::json runtime_stats() const override { return backend_->runtime_stats(); }
  Extension* find_extension(std::string_view name) override {
    if (name == RowTables::kName) return static_cast<RowTables*>(this);
    if (name == TensorParallel::kName) return static_cast<TensorParallel*>(this);
    if (name == BatchInvariant::kName) return static_cast<BatchInvariant*>(this);
    return nullptr;
  }
  int ranks() const override { return ranks_; }
  bool batch_invariant() const override { return invariant_; }

 private:
  DecoderSpec spec_;
  std::shared_ptr<const WeightSource> weights_;
  int ranks_;
  bool invariant_;
  std::shared_ptr<DecoderBackend> backend_;  // shared with the sessions
  std::vector<RowTableSource> tables_;       // until load()
  bool loaded_ = false;
};

// A num_hidden_layers below the checkpoint's runs a truncated model, which is legitimate (early
// exit, pruning experiments) but silent otherwise: one line naming the tensors left unread.
std::optional<std::string> unused_layers_note(const DecoderSpec& spec, const WeightSource& weights) {
  const std::string& prefix = spec.names.layer_prefix;
  const auto at = prefix.find("{}");
  if (at == std::string::npos) return std::nullopt;
  const std::string head = prefix.substr(0, at);
  const std::string tail = prefix.substr(at + 2);
  std::int64_t count = 0, lo = std::numeric_limits<std::int64_t>::max(), hi = -1;
  for (const auto& name : weights.names()) {
    if (!name.starts_with(head)) continue;
    std::size_t end = head.size();
    while (end < name.size() && end - head.size() < 9 && name[end] >= '0' && name[end] <= '9') ++end;
    if (end == head.size() || name.compare(end, tail.size(), tail) != 0) continue;
    const std::int64_t layer = std::stoll(name.substr(head.size(), end - head.size()));
    if (layer < spec.num_layers) continue;
    ++count;
    lo = std::min(lo, layer);
    hi = std::max(hi, layer);
  }
  if (count == 0) return std::nullopt;
  const auto glob = [&](std::int64_t layer) { return head + std::to_string(layer) + tail + "*"; };
  const std::string& type = spec.model_type.empty() ? spec.family : spec.model_type;
  return fmt::format("{} config: num_hidden_layers {} in config.json, but the checkpoint has layers {}..{} "
                     "({} tensors unused: {}{})",
                     type, spec.num_layers, lo, hi, count, glob(lo), lo == hi ? "" : " to " + glob(hi));
}

}  // namespace

std::unique_ptr<Model> make_decoder_model(DecoderSpec spec, const ModelArgs& args, Host& host) {
  std::vector<std::string> warnings = spec.config_warnings;
  if (args.weights)
    if (auto note = unused_layers_note(spec, *args.weights)) warnings.push_back(std::move(*note));
  auto model = std::make_unique<DecoderModel>(std::move(spec), args);
  for (const auto& line : warnings) host.log(LogLevel::Warning, line);
  return model;
}

}  // namespace zoo::layers
