// The decoder on CUDA in bf16: weights uploaded once into one device allocation (q|k|v and gate|up,
// and their biases, packed by placement), cuBLASLt GEMMs, fused bias/norm/RoPE/cache kernels,
// FlashAttention-style prefill, split-K decode attention, and decode steps replayed as CUDA
// graphs. This file: the backend and the activation buffers every step shares.
#include "decoder_cuda.hpp"

#include <algorithm>
#include <cstring>

#include "../runner_session.hpp"
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

CudaBackend::CudaBackend(const DecoderSpec& spec, const ModelArgs& args, const DecoderShard* shard)
    : c_(spec),
      in_use_(
          fmt::format("a {} CUDA model's sessions (they share one stream and GEMM plan cache)", spec.family)),
      device_(args.device.index),
      max_context_(args.max_context),
      batch_invariant_(args.batch_invariant),
      shard_(shard) {
  const std::string& f = c_.family;
  if (const std::string problem = cu::cuda_device_problem(device_); !problem.empty()) throw InputError(f + ": " + problem);
  if (const std::string missing = cuda_unsupported(c_); !missing.empty())
    throw InputError(fmt::format("{}: the CUDA backend does not compute {} yet (run it on the CPU: --device cpu)", f,
                                 missing));
  ZOO_CUDA_CHECK(cudaSetDevice(device_));
  stream_ = std::make_unique<cu::Stream>();
  gemm_ = std::make_unique<cu::Gemm>();
  gemm_->set_batch_invariant(batch_invariant_);
  prefill_attention_ = std::make_unique<cu::PrefillAttention>();
}

void CudaBackend::load(const WeightSource& source, const std::vector<RowTableSource>& tables,
                     const ProgressFn& progress) {
  ZOO_CUDA_CHECK(cudaSetDevice(device_));
  w_ = upload_decoder_weights(c_, source, tables, *stream_, progress);
  // A row-parallel bias enters the all-reduce once: one rank adds it.
  if (shard_ && !shard_->adds_row_parallel_bias)
    for (LayerPtrs& L : w_.layers) L.o_bias = L.down_bias = nullptr;
  note_memory();
}

std::unique_ptr<Session> CudaBackend::new_session() {
  ZOO_CUDA_CHECK(cudaSetDevice(device_));
  return std::make_unique<RunnerSession>(make_cuda_runner(
      std::static_pointer_cast<CudaBackend>(shared_from_this()), session_options(max_context_)));
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

double kv_device_budget(const RunnerOptions& options, int share) {
  std::size_t free = 0, total = 0;
  ZOO_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  constexpr double kActivations = 2.0 * (1 << 30);
  if (options.kv_memory_fraction > 0) {
    if (options.kv_memory_fraction > 1)
      throw InputError(
          fmt::format("the KV memory fraction must be in (0, 1], got {}", options.kv_memory_fraction));
    const double used = static_cast<double>(total - free);
    return (options.kv_memory_fraction * static_cast<double>(total) - used) / share - kActivations;
  }
  return std::max(0.0, 0.9 * static_cast<double>(free) / share - kActivations);
}

CudaRows::CudaRows(std::shared_ptr<CudaBackend> backend, CudaRank rank)
    : owner_(std::move(backend)), b_(*owner_), c_(owner_->c_), rank_(rank) {}

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
  if (c_.qk_norm == QkNorm::whole && rank_.collectives) {
    a_.norm_sums = cu::DeviceBuffer(static_cast<std::size_t>(T) * sizeof(float));
    a_.norm_pieces =
        cu::DeviceBuffer(static_cast<std::size_t>(T * rank_.collectives->size()) * sizeof(float));
  }
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
      if (moe_cublas_) a_.counts_host = cu::PinnedBuffer(static_cast<std::size_t>(E) * sizeof(std::int32_t));
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

}  // namespace cuda_backend

std::shared_ptr<DecoderBackend> make_cuda_backend(const DecoderSpec& spec, const ModelArgs& args) {
  if (args.tensor_parallel > 1) return cuda_backend::make_cuda_tensor_parallel_backend(spec, args);
  return std::make_shared<cuda_backend::CudaBackend>(spec, args);
}

}  // namespace zoo::layers
