// The decoder on CUDA in bf16: weights uploaded once into one device allocation (q|k|v and gate|up,
// and their biases, packed by placement), cuBLASLt GEMMs, fused bias/norm/RoPE/cache kernels,
// FlashAttention-style prefill, split-K decode attention, and decode steps replayed as CUDA
// graphs. This file: sessions' buffers, a step's staging and the decode-graph cache.
#include "decoder_cuda.hpp"

#include <algorithm>
#include <cstring>

#include "zoo/error.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {
namespace cuda_backend {
namespace {

// What the spec asks for that the CUDA kernels do not compute yet; empty when none. Refused by
// name, so a family runs on the CPU reference until its CUDA ops exist.
std::string cuda_unsupported(const DecoderSpec& c) {
  if (c.head_dim != 64 && c.head_dim != 96 && c.head_dim != 128 && c.head_dim != 256)
    return fmt::format("head_dim {} (the attention kernels serve 64, 96, 128 and 256)", c.head_dim);
  if (c.moe_layers() > 0 && c.moe.shared_intermediate_size > 0) return "a shared expert beside the routed ones";
  if (c.moe_layers() > 0 && (c.moe.experts > cu::kMoeMaxExperts || c.moe.top_k > cu::kMoeMaxTopK ||
                            c.hidden_size % 8 != 0 || c.moe.intermediate_size % 8 != 0))
    return fmt::format("mixture-of-experts layers of {} experts, top {}, hidden {}, expert ffn {} (the kernels serve up "
                       "to {} experts, top {}, sizes that are multiples of 8)",
                       c.moe.experts, c.moe.top_k, c.hidden_size, c.moe.intermediate_size, cu::kMoeMaxExperts,
                       cu::kMoeMaxTopK);
  return {};
}

}  // namespace

CudaBackend::CudaBackend(const DecoderSpec& spec, const ModelArgs& args)
    : c_(spec),
      in_use_(fmt::format("a {} CUDA model's sessions (they share one stream and GEMM plan cache)", spec.family)),
      device_(args.device.index),
      max_context_(args.max_context) {
  const std::string& f = c_.family;
  if (const std::string problem = cu::cuda_device_problem(device_); !problem.empty()) throw InputError(f + ": " + problem);
  if (const std::string missing = cuda_unsupported(c_); !missing.empty())
    throw InputError(fmt::format("{}: the CUDA backend does not compute {} yet (run it on the CPU: --device cpu)", f,
                                 missing));
  ZOO_CUDA_CHECK(cudaSetDevice(device_));
  stream_ = std::make_unique<cu::Stream>();
  gemm_ = std::make_unique<cu::Gemm>();
  prefill_attention_ = std::make_unique<cu::PrefillAttention>();
}

void CudaBackend::load(const WeightSource& source, const std::vector<RowTableSource>& tables,
                     const ProgressFn& progress) {
  ZOO_CUDA_CHECK(cudaSetDevice(device_));
  w_ = upload_decoder_weights(c_, source, tables, *stream_, progress);
  note_memory();
}

std::unique_ptr<Session> CudaBackend::new_session() {
  ZOO_CUDA_CHECK(cudaSetDevice(device_));
  return std::make_unique<CudaSession>(std::static_pointer_cast<CudaBackend>(shared_from_this()));
}

std::unique_ptr<Runner> CudaBackend::new_runner(const RunnerOptions& options) {
  ZOO_CUDA_CHECK(cudaSetDevice(device_));
  return make_cuda_runner(std::static_pointer_cast<CudaBackend>(shared_from_this()), options);
}

nlohmann::json CudaBackend::runtime_stats() const {
  const auto& props = cu::device_properties(device_);
  nlohmann::json stats = {{"gpu", props.name},
                          {"weights_gb", static_cast<double>(w_.bytes) / 1e9},
                          {"peak_device_memory_gb", static_cast<double>(peak_used_) / 1e9}};
  // A mixture reads a fraction of its weights per token: `zoo bench`'s estimate (every tensor) would
  // overstate its bandwidth many times over.
  if (c_.moe_layers() > 0) stats["decode_weight_bytes"] = c_.decode_parameter_count() * static_cast<std::int64_t>(sizeof(Bf16));
  return stats;
}

void CudaBackend::note_memory() {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess) peak_used_ = std::max(peak_used_, total - free);
}

CudaRows::CudaRows(std::shared_ptr<CudaBackend> backend) : owner_(std::move(backend)), b_(*owner_), c_(owner_->c_) {}

CudaSession::CudaSession(std::shared_ptr<CudaBackend> backend) : CudaRows(std::move(backend)) {
  const std::size_t cache_bytes =
      static_cast<std::size_t>(c_.num_layers * b_.max_context_ * c_.kv_dim()) * sizeof(Bf16);
  k_cache_ = cu::DeviceBuffer(cache_bytes);
  v_cache_ = cu::DeviceBuffer(cache_bytes);
  kv_len_dev_ = cu::DeviceBuffer(sizeof(std::int32_t));
  step_host_ = cu::PinnedBuffer(sizeof(StepStaging));
  sample_params_dev_ = cu::DeviceBuffer(sizeof(cu::SampleParams));
  sample_out_dev_ = cu::DeviceBuffer(sizeof(cu::SampleOutput));
  sample_workspace_ = cu::DeviceBuffer(cu::sample_workspace_bytes(c_.vocab_size));
  sample_workspace_.fill_bytes(0);  // the sampling kernels' tickets start at zero
  head_sample_host_ = cu::PinnedBuffer(sizeof(HeadSampleStaging));
  head_sample_dev_ = cu::DeviceBuffer(sizeof(HeadSampleStaging));
  decode_workspace_ = cu::DeviceBuffer(cu::decode_attention_workspace_bytes(kMaxDecodeTokens, c_.num_heads, c_.head_dim));
  decode_workspace_.fill_bytes(0);  // the decode attention's merge tickets start at zero
  b_.note_memory();
}

CudaSession::~CudaSession() = default;

// ZOO_CUDA_PROFILE=1: where the steps spent their device time, per op kind.
CudaRows::~CudaRows() {
  for (const auto& run : profile_.summaries()) {
    fmt::print(stderr, "ZOO_CUDA_PROFILE: steps of {} token(s): {} steps, {:.3f} ms of device time per step\n", run.key,
               run.runs, run.ms_per_run);
    for (const auto& stage : run.stages)
      fmt::print(stderr, "  {:<16} {:9.1f} us/step  {:5.1f}%\n", stage.name, 1e3 * stage.ms,
                 100 * stage.ms / run.ms_per_run);
  }
}

void CudaRows::ensure_activations(std::int64_t tokens) {
  if (a_.tokens >= tokens) return;
  const std::int64_t T = std::max<std::int64_t>(tokens, 16);
  const std::int64_t H = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate_size;
  auto bf16 = [](std::int64_t n) { return cu::DeviceBuffer(static_cast<std::size_t>(n) * sizeof(Bf16)); };
  a_ = {};
  a_.h = bf16(T * H);
  a_.x = bf16(T * H);
  a_.qkv = bf16(T * (qd + 2 * kvd));
  a_.q = bf16(T * qd);
  a_.attn = bf16(T * qd);
  a_.tmp = bf16(T * H);
  a_.gate_up = bf16(T * 2 * I);
  a_.act = bf16(T * I);
  a_.q_normed = bf16(T * qd);
  a_.k_normed = bf16(T * kvd);
  if (c_.moe_layers() > 0) {
    const std::int64_t E = c_.moe.experts, k = c_.moe.top_k, Ie = c_.moe.intermediate_size, A = T * k;
    a_.router_logits = cu::DeviceBuffer(static_cast<std::size_t>(T * E) * sizeof(float));
    a_.topk_ids = cu::DeviceBuffer(static_cast<std::size_t>(A) * sizeof(std::int32_t));
    a_.topk_weights = cu::DeviceBuffer(static_cast<std::size_t>(A) * sizeof(float));
    a_.expert_act = bf16(A * Ie);
    if (T > kMoeStreamRows) {
      a_.expert_counts = cu::DeviceBuffer(static_cast<std::size_t>(E) * sizeof(std::int32_t));
      a_.expert_offsets = cu::DeviceBuffer(static_cast<std::size_t>(E + 1) * sizeof(std::int32_t));
      a_.row_of = cu::DeviceBuffer(static_cast<std::size_t>(A) * sizeof(std::int32_t));
      a_.token_of = cu::DeviceBuffer(static_cast<std::size_t>(A) * sizeof(std::int32_t));
      a_.sorted_x = bf16(A * H);
      a_.sorted_gate_up = bf16(A * 2 * Ie);
      a_.sorted_y = bf16(A * H);
      a_.counts_host = cu::PinnedBuffer(static_cast<std::size_t>(E) * sizeof(std::int32_t));
    }
  }
  ids_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(T) * sizeof(std::int32_t));
  positions_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(T) * sizeof(std::int32_t));
  a_.tokens = T;
  buffers_moved();  // graphs captured the old buffers' addresses
  b_.note_memory();
}

void CudaRows::ensure_logits(std::int64_t rows) {
  if (logits_rows_ >= rows) return;
  logits_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(rows * c_.vocab_size) * sizeof(float));
  logits_rows_ = rows;
  buffers_moved();  // graphs captured the old buffer's address
  b_.note_memory();
}

void CudaSession::ensure_head(std::int64_t elements) {
  if (head_elements_ >= elements) return;
  head_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(elements) * sizeof(float));
  head_elements_ = elements;
  decode_graphs_.clear();  // they captured the old buffer's address
}

void CudaSession::ensure_table_ids(std::int64_t ids) {
  if (table_ids_capacity_ >= ids) return;
  const std::int64_t n = std::max<std::int64_t>(ids, 64);
  table_ids_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(n) * 4);
  table_pos_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(n) * 4);
  table_ids_capacity_ = n;
  decode_graphs_.clear();
}

void CudaSession::run_graph(std::int64_t rows, const StepVariant& v, DiagnosticHook* hook) {
  out_rows_ = rows;
  run_decoder_graph(c_, *this, {v.logits, v.logits && v.sample > 0, v.head_table, v.head_segments > 0}, hook);
}

ForwardResult CudaSession::forward(const ForwardStep& step, DiagnosticHook* hook) {
  const ExclusiveUse::Scope one_thread(b_.in_use_);
  check_step(c_, step, pos_, b_.max_context_, b_.w_.table_rows);
  if (!step.outputs.score_ids.empty())
    throw InputError(c_.family + ": the CUDA session scores no given ids (the CUDA runner does)");
  const auto T = static_cast<std::int64_t>(step.ids.size());
  const std::int64_t H = c_.hidden_size, V = c_.vocab_size;
  ZOO_CUDA_CHECK(cudaSetDevice(b_.device_));
  ensure_activations(T);
  cudaStream_t s = *b_.stream_;

  // Step inputs go through pinned memory so a replayed graph reads them from fixed device addresses.
  StepStaging& st = staging();
  const bool small = T <= kStagedTokens;
  std::vector<std::int32_t> big;
  if (!small) big.resize(static_cast<std::size_t>(2 * T));
  std::int32_t* ids32 = small ? st.ids : big.data();
  std::int32_t* pos32 = small ? st.positions : big.data() + T;
  for (std::int64_t t = 0; t < T; ++t) {
    ids32[t] = static_cast<std::int32_t>(step.ids[t]);
    pos32[t] = static_cast<std::int32_t>(pos_ + t);
  }
  ZOO_CUDA_CHECK(cudaMemcpyAsync(ids_dev_.data(), ids32, T * 4, cudaMemcpyHostToDevice, s));
  ZOO_CUDA_CHECK(cudaMemcpyAsync(positions_dev_.data(), pos32, T * 4, cudaMemcpyHostToDevice, s));
  if (!small) b_.stream_->synchronize();  // `big` is pageable and dies with this scope

  const TableRows& tr = step.table_rows;
  const bool has_table = tr.table >= 0;
  if (has_table) {
    // Ids and positions of the summed rows; a one-token step stages them in pinned memory (at a
    // fixed device address, for graphs), longer ones upload directly.
    const auto n_ids = static_cast<std::int64_t>(tr.ids.size()), n_pos = static_cast<std::int64_t>(tr.positions.size());
    ensure_table_ids(std::max(n_ids, n_pos));
    if (T == 1 && n_ids <= kStagedTableIds) {
      std::int32_t* staged = st.table_ids;
      for (std::int64_t i = 0; i < n_ids; ++i) staged[i] = static_cast<std::int32_t>(tr.ids[i]);
      staged[n_ids] = 0;
      ZOO_CUDA_CHECK(cudaMemcpyAsync(table_ids_dev_.data(), staged, n_ids * 4, cudaMemcpyHostToDevice, s));
      ZOO_CUDA_CHECK(cudaMemcpyAsync(table_pos_dev_.data(), staged + n_ids, 4, cudaMemcpyHostToDevice, s));
    } else {
      std::vector<std::int32_t> ids(tr.ids.begin(), tr.ids.end()), positions(tr.positions.begin(), tr.positions.end());
      b_.stream_->synchronize();  // the buffers may be in use by queued work
      table_ids_dev_.upload(ids.data(), ids.size() * 4);
      table_pos_dev_.upload(positions.data(), positions.size() * 4);
    }
  }
  // Sampling on the device: the request (with its draw) goes up through pinned memory like the
  // step's ids, so replayed graphs read it; only the picked token comes back.
  // Logprobs are computed by the batch runner only (a session step asking for them is refused).
  if (step.outputs.top_logprobs >= 0)
    throw InputError(c_.family + ": the CUDA backend does not return logprobs yet (run it on the CPU: --device cpu)");
  const auto& sample = step.outputs.sample;
  const bool sampling = step.outputs.logits && sample.has_value();
  if (sampling && sample->penalized())
    throw InputError(c_.family + ": a CUDA session keeps no token history for penalties (the batch runner applies "
                                 "them; zoo::generate applies them on the host)");
  if (sampling) {  // checked in check_step
    auto* params = &st.sample_params;
    *params = {sample->u, sample->temperature, sample->top_k, sample->top_p, sample->min_p};
    ZOO_CUDA_CHECK(cudaMemcpyAsync(sample_params_dev_.data(), params, sizeof(cu::SampleParams), cudaMemcpyHostToDevice, s));
  }
  // Sampling the head on the device: the request and its uniforms go up the same way. A request
  // this backend cannot serve (too many segments, too wide) is ignored: the head output comes back.
  const auto& head_sample = step.outputs.head_sample;
  bool head_sampling = false;
  if (head_sample && step.outputs.head_table >= 0) {  // checked in check_step
    const std::int64_t count = b_.w_.tables[static_cast<std::size_t>(step.outputs.head_table)].count;
    head_sampling = head_sample->segments <= kMaxHeadSegments &&
                    count / head_sample->segments <= cu::kSegmentSampleMaxWidth;
  }
  if (head_sampling) {
    auto& staged = *head_sample_host_.as<HeadSampleStaging>();
    const bool greedy = head_sample->temperature == 0.0f;
    staged.params = {head_sample->temperature, head_sample->top_k, head_sample->top_p, 0};
    std::size_t bytes = offsetof(HeadSampleStaging, u);
    if (!greedy) {  // a greedy pick reads no uniform
      std::memcpy(staged.u, head_sample->u.data(), head_sample->u.size_bytes());
      bytes += head_sample->u.size_bytes();
    }
    ZOO_CUDA_CHECK(cudaMemcpyAsync(head_sample_dev_.data(), &staged, bytes, cudaMemcpyHostToDevice, s));
  }
  StepVariant variant{has_table ? tr.table : -1, has_table ? tr.per_position : 0, step.outputs.logits,
                      step.outputs.head_table,
                      sampling ? 1 + static_cast<int>(cu::sample_mode(sample->temperature, sample->top_k)) : 0};
  if (head_sampling) variant.head_segments = head_sample->segments;
  step_ = &step;
  T_ = T;
  variant_ = variant;
  const bool graphable = !profile_.enabled() && !hook && T == 1 && step.override_positions.empty() &&
                         (step.outputs.logits || step.outputs.head_table >= 0) && !step.outputs.hidden &&
                         (!has_table || (tr.positions.size() == 1 && tr.positions[0] == 0 && tr.ids.size() <= static_cast<std::size_t>(kStagedTableIds)));
  if (graphable) {
    // Decode graphs are bucketed by kv length: the attention grid is sized for the bucket and the
    // true length is read on the device.
    std::int64_t bucket = 256;
    while (bucket < pos_ + 1) bucket *= 2;
    bucket = std::min(bucket, b_.max_context_);
    st.kv_len = static_cast<std::int32_t>(pos_ + 1);
    ZOO_CUDA_CHECK(cudaMemcpyAsync(kv_len_dev_.data(), &st.kv_len, 4, cudaMemcpyHostToDevice, s));
    graph_kv_len_ = bucket;
    // Before taking a reference into decode_graphs_, which a reallocation clears.
    if (variant.logits) ensure_logits(1);
    if (variant.head_table >= 0) ensure_head(b_.w_.tables[static_cast<std::size_t>(variant.head_table)].count);
    auto& graph = decode_graphs_[{bucket, variant.key()}];
    if (!graph.ready()) {
      // Capture only after an eager pass at this shape, so GEMM plans exist and nothing allocates.
      run_graph(1, variant, nullptr);
      graph.begin_capture(s);
      run_graph(1, variant, nullptr);
      graph.end_capture(s);
      // The eager pass already computed this step; the captured one did not run.
    } else {
      graph.launch(s);
    }
    graph_kv_len_ = 0;
  } else {
    profile_.begin(s);
    run_graph(step.outputs.all_positions ? T : 1, variant, hook);
    profile_.end(T);
  }
  pos_ += T;

  ForwardResult result;
  const std::int64_t rows = step.outputs.all_positions ? T : 1;
  if (step.outputs.hidden) result.hidden = download_f32(a_.x.as<Bf16>() + (T - rows) * H, rows, H, H);
  cu::SampleOutput* picked = &st.sample_out;
  if (sampling) {
    ZOO_CUDA_CHECK(cudaMemcpyAsync(picked, sample_out_dev_.data(), sizeof(cu::SampleOutput), cudaMemcpyDeviceToHost, s));
  } else if (step.outputs.logits) {
    result.logits = HostTensor(DType::F32, {rows, V});
    ZOO_CUDA_CHECK(cudaMemcpyAsync(result.logits.data(), logits_dev_.data(), result.logits.nbytes(),
                                   cudaMemcpyDeviceToHost, s));
  }
  cu::SampleOutput* head_picked = head_sample_host_.as<HeadSampleStaging>()->out;
  if (head_sampling) {
    ZOO_CUDA_CHECK(cudaMemcpyAsync(head_picked, HeadSampleStaging::out_at(head_sample_dev_.data()),
                                   sizeof(cu::SampleOutput) * static_cast<std::size_t>(variant.head_segments),
                                   cudaMemcpyDeviceToHost, s));
  } else if (step.outputs.head_table >= 0) {
    const DeviceTable& t = b_.w_.tables[static_cast<std::size_t>(step.outputs.head_table)];
    HostTensor out(DType::F32, {rows, t.count});
    ZOO_CUDA_CHECK(cudaMemcpyAsync(out.data(), head_dev_.data(), out.nbytes(), cudaMemcpyDeviceToHost, s));
    result.extra.emplace_back(t.name, std::move(out));
  }
  b_.stream_->synchronize();
  if (sampling)
    result.sampled = SampledToken{.id = picked->id, .logit = picked->logit, .bad_index = picked->bad_index,
                                  .bad_value = picked->bad_value, .all_masked = picked->unmasked == 0};
  for (std::int64_t i = 0; i < variant.head_segments; ++i) {
    const cu::SampleOutput& p = head_picked[i];
    result.head_sampled.push_back({.id = p.id, .logit = p.logit, .bad_index = p.bad_index, .bad_value = p.bad_value,
                                   .all_masked = p.unmasked == 0});
  }
  return result;
}

}  // namespace cuda_backend

std::shared_ptr<DecoderBackend> make_cuda_backend(const DecoderSpec& spec, const ModelArgs& args) {
  return std::make_shared<cuda_backend::CudaBackend>(spec, args);
}

}  // namespace zoo::layers
