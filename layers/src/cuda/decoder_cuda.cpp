// The decoder on CUDA in bf16: weights uploaded once into one device allocation (q|k|v and gate|up,
// and their biases, packed by placement), cuBLASLt GEMMs, fused bias/norm/RoPE/cache kernels,
// FlashAttention-style prefill, split-K decode attention, and decode steps replayed as CUDA
// graphs. Rounding follows transformers in bf16 (see kernels/include/zoo/kernels/cuda/ops.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include "../decoder_backend.hpp"
#include "../graph/decoder_graph.hpp"
#include "zoo/error.hpp"
#include "zoo/exclusive_use.hpp"
#include "zoo/kernels/cuda/attention.hpp"
#include "zoo/kernels/cuda/common.hpp"
#include "zoo/kernels/cuda/gemm.hpp"
#include "zoo/kernels/cuda/ops.hpp"
#include "zoo/kernels/env.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::layers {
namespace {

namespace cu = zoo::kernels::cuda;
using cu::Bf16;
using P = LayerParam;

constexpr std::size_t kAlign = 256;
constexpr std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Device addresses of one layer's weights inside the single weight allocation.
// Absent parameters (biases, q/k norm) are null.
struct LayerPtrs {
  Bf16 *input_norm, *qkv, *qkv_bias, *o, *o_bias, *q_norm, *k_norm, *post_norm, *gate_up, *gate_up_bias, *down,
      *down_bias;
};

struct DeviceWeights {
  cu::DeviceBuffer storage;
  Bf16 *embed = nullptr, *final_norm = nullptr, *head = nullptr;
  float* inv_freq = nullptr;  // the RoPE table
  std::vector<LayerPtrs> layers;
};

// One tensor's destination: where in the device allocation its bf16 bytes go.
struct Placement {
  std::string name;
  std::size_t offset;
  std::optional<TensorView> view;  // a row table's rows; else `name` in the WeightSource
};

// A row table (Model::add_row_table) in the weight allocation, bf16.
struct DeviceTable {
  std::string name;
  Bf16* rows = nullptr;
  std::int64_t count = 0;
};

// What a decode step computes besides the layers; a graph is captured per variant and kv bucket.
struct StepVariant {
  int table = -1;               // sum rows of this table into position 0
  std::int64_t per_position = 0;
  bool logits = true;
  int head_table = -1;
  int sample = 0;  // pick a token from the logits (OutputRequest::sample): 0 no, else 1 + cu::SampleMode
  // Pick one id per segment of the head output (OutputRequest::head_sample), 0: no. Greedy or not
  // is read on the device, so one graph serves every setting of a segment count.
  std::int64_t head_segments = 0;
  auto key() const { return std::tuple(table, per_position, logits, head_table, sample, head_segments); }
};

// Uploads tensors through a ring of pinned staging buffers: worker threads copy (and, for F32/F16
// checkpoints, convert) the next chunk from the mmapped file while the previous chunk's DMA runs.
class StagedUploader {
 public:
  static constexpr std::size_t kChunk = std::size_t{64} << 20;
  static constexpr int kSlots = 3;

  explicit StagedUploader(cudaStream_t stream) : stream_(stream) {
    for (int i = 0; i < kSlots; ++i) {
      slots_[i] = cu::PinnedBuffer(kChunk);
      ready_[i] = std::make_unique<cu::Event>(false);
      ready_[i]->record(stream_);
    }
  }

  void upload(const TensorView& src, Bf16* dst, const std::function<void(std::size_t)>& on_bytes) {
    const std::int64_t n = src.numel();
    const std::int64_t per_chunk = static_cast<std::int64_t>(kChunk / sizeof(Bf16));
    const std::size_t elem = dtype_size(src.dtype);
    for (std::int64_t begin = 0; begin < n; begin += per_chunk) {
      const std::int64_t count = std::min(per_chunk, n - begin);
      const int slot = next_++ % kSlots;
      ready_[slot]->synchronize();  // the DMA that last read this slot is done
      auto* staging = slots_[slot].as<std::uint16_t>();
      const auto* from = static_cast<const std::byte*>(src.data) + begin * elem;
      kernels::ThreadPool::global().parallel_for(count, 1 << 18, [&](std::int64_t b, std::int64_t e) {
        if (src.dtype == DType::BF16) {
          std::memcpy(staging + b, from + b * 2, static_cast<std::size_t>(e - b) * 2);
          return;
        }
        TensorView part{from + b * elem, src.dtype, {e - b}, Device{}};
        std::vector<float> wide = to_f32(part);
        for (std::int64_t i = 0; i < e - b; ++i) staging[b + i] = f32_to_bf16(wide[static_cast<std::size_t>(i)]);
      });
      ZOO_CUDA_CHECK(cudaMemcpyAsync(dst + begin, staging, static_cast<std::size_t>(count) * 2, cudaMemcpyHostToDevice,
                                     stream_));
      ready_[slot]->record(stream_);
      on_bytes(static_cast<std::size_t>(count) * elem);
    }
  }

 private:
  cudaStream_t stream_;
  std::array<cu::PinnedBuffer, kSlots> slots_;
  std::array<std::unique_ptr<cu::Event>, kSlots> ready_;
  int next_ = 0;
};

// ZOO_CUDA_PROFILE=1: every step runs eagerly (no graphs) with an event after each op, and the
// session prints the device time per op kind when it ends: where a step's time goes, measured.
class OpProfile {
 public:
  OpProfile() : enabled_(kernels::env_flag("ZOO_CUDA_PROFILE", false)) {}
  bool enabled() const { return enabled_; }
  void begin(cudaStream_t stream) {
    if (!enabled_) return;
    marks_.clear();
    stream_ = stream;
    mark("");
  }
  void mark(const char* op) {
    if (!enabled_) return;
    auto event = std::make_unique<cu::Event>(true);
    event->record(stream_);
    marks_.emplace_back(op, std::move(event));
  }
  void end(std::int64_t tokens) {
    if (!enabled_ || marks_.size() < 2) return;
    marks_.back().second->synchronize();
    for (std::size_t i = 1; i < marks_.size(); ++i)
      totals_[{tokens, marks_[i].first}] += cu::Event::elapsed_ms(*marks_[i - 1].second, *marks_[i].second);
    steps_[tokens]++;
  }
  ~OpProfile() {
    if (!enabled_) return;
    for (const auto& [tokens, steps] : steps_) {
      double sum = 0;
      for (const auto& [key, ms] : totals_)
        if (key.first == tokens) sum += ms;
      fmt::print(stderr, "ZOO_CUDA_PROFILE: steps of {} token(s): {} steps, {:.3f} ms of device time per step\n", tokens,
                 steps, sum / steps);
      for (const auto& [key, ms] : totals_)
        if (key.first == tokens)
          fmt::print(stderr, "  {:<16} {:9.1f} us/step  {:5.1f}%\n", key.second, 1e3 * ms / steps, 100 * ms / sum);
    }
  }

 private:
  bool enabled_;
  cudaStream_t stream_ = nullptr;
  std::vector<std::pair<std::string, std::unique_ptr<cu::Event>>> marks_;
  std::map<std::pair<std::int64_t, std::string>, double> totals_;
  std::map<std::int64_t, int> steps_;
};

class CudaBackend;

class CudaSession : public Session, private DecoderOps {
 public:
  explicit CudaSession(std::shared_ptr<CudaBackend> backend);
  std::int64_t position() const override { return pos_; }
  void reset() override { pos_ = 0; }
  ForwardResult forward(const ForwardStep& step, DiagnosticHook* hook) override;

 private:
  struct Activations {
    std::int64_t tokens = 0;
    cu::DeviceBuffer h, x, qkv, q, attn, tmp, gate_up, act, q_normed, k_normed;
  };
  // ---- DecoderOps: the ops of the step in flight (step_, T_, variant_), on the backend's stream ----
  void embed() override;
  void input_norm() override;
  void qkv(std::int64_t layer) override;
  void qk_norm_rope_cache(std::int64_t layer, bool keep_normed) override;
  void attention(std::int64_t layer) override;
  void o_proj(std::int64_t layer) override;
  void add_norm(std::int64_t layer, NextNorm next) override;
  void gate_up(std::int64_t layer) override;
  void act() override;
  void gate_up_act(std::int64_t layer) override;
  void down(std::int64_t layer) override;
  void logits(std::int64_t rows) override;
  void sample(std::int64_t row) override;
  void head(int table, std::int64_t rows) override;
  void sample_head(int table, std::int64_t row) override;
  void tap(DiagnosticHook& hook, const std::string& name, Value value, std::int64_t layer) override;

  void ensure_activations(std::int64_t tokens);
  Bf16* k_cache(std::int64_t layer);
  Bf16* v_cache(std::int64_t layer);
  const Bf16* last_rows(std::int64_t rows) const { return a_.x.as<Bf16>() + (T_ - rows) * c_.hidden_size; }
  // Copies a [rows, cols] bf16 slice (row stride `stride` elements) to a float32 host tensor.
  HostTensor download_f32(const Bf16* src, std::int64_t rows, std::int64_t cols, std::int64_t stride);
  void ensure_logits(std::int64_t rows);
  void ensure_head(std::int64_t elements);
  void ensure_table_ids(std::int64_t ids);
  // The graph over the step, for `variant`'s outputs on the last `rows` rows: what a decode graph captures.
  void run_graph(std::int64_t rows, const StepVariant& variant, DiagnosticHook* hook);

  std::shared_ptr<CudaBackend> owner_;  // first member: the backend outlives this session's buffers
  CudaBackend& b_;
  const DecoderSpec& c_;
  std::int64_t pos_ = 0;
  cu::DeviceBuffer k_cache_, v_cache_;  // [layers][max_context][kv_heads][head_dim]
  Activations a_;
  cu::DeviceBuffer ids_dev_, positions_dev_, kv_len_dev_, override_pos_dev_, override_rows_dev_;
  cu::PinnedBuffer step_host_;  // ids, position, kv_len staging for graph replays
  cu::DeviceBuffer decode_workspace_;
  cu::DeviceBuffer logits_dev_;
  std::int64_t logits_rows_ = 0;
  cu::DeviceBuffer head_dev_;  // a row table's head output, float32
  std::int64_t head_elements_ = 0;
  cu::DeviceBuffer table_ids_dev_, table_pos_dev_;  // TableRows of the step, int32
  // Sampling on the device: parameters (with the step's draw) in, the picked token out.
  cu::DeviceBuffer sample_params_dev_, sample_out_dev_, sample_workspace_;
  // Sampling the head on the device: parameters and uniforms in, one pick per segment out, at the
  // same offsets in pinned and device memory (kHeadSample*).
  cu::PinnedBuffer head_sample_host_;
  cu::DeviceBuffer head_sample_dev_;
  std::int64_t table_ids_capacity_ = 0;
  // By kv-length bucket and step variant.
  std::map<std::pair<std::int64_t, decltype(StepVariant{}.key())>, cu::CudaGraph> decode_graphs_;
  std::int64_t graph_kv_len_ = 0;  // > 0 while running a graph-shaped decode step: the bucket
  OpProfile profile_;
  // The step in flight, for the ops.
  const ForwardStep* step_ = nullptr;
  std::int64_t T_ = 0;
  StepVariant variant_;
  std::int64_t logits_computed_ = 0;  // rows of logits_dev_ the last logits() wrote
};

class CudaBackend : public DecoderBackend {
 public:
  CudaBackend(const DecoderSpec& spec, const ModelArgs& args)
      : c_(spec),
        in_use_(fmt::format("a {} CUDA model's sessions (they share one stream and GEMM plan cache)", spec.family)),
        device_(args.device.index),
        max_context_(args.max_context) {
    const std::string& f = c_.family;
    if (!cu::cuda_available()) throw InputError(f + ": device " + args.device.str() + " requested, but no CUDA device is usable");
    int count = 0;
    ZOO_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device_ >= count)
      throw InputError(fmt::format("{}: device cuda:{} requested, but only {} CUDA device(s) exist", f, device_, count));
    if (c_.head_dim != 64 && c_.head_dim != 128 && c_.head_dim != 256)
      throw InputError(fmt::format("{}: the CUDA backend supports head_dim 64, 128 or 256 (config has {})", f, c_.head_dim));
    ZOO_CUDA_CHECK(cudaSetDevice(device_));
    stream_ = std::make_unique<cu::Stream>();
    gemm_ = std::make_unique<cu::Gemm>();
    prefill_attention_ = std::make_unique<cu::PrefillAttention>();
  }

  void load(const WeightSource& source, const std::vector<RowTableSource>& tables, const ProgressFn& progress) override {
    ZOO_CUDA_CHECK(cudaSetDevice(device_));
    const std::int64_t H = c_.hidden_size, I = c_.intermediate_size, qd = c_.q_dim(), kvd = c_.kv_dim();
    std::vector<Placement> plan;
    std::size_t cursor = 0;
    auto reserve = [&](std::size_t elements) {
      const std::size_t at = cursor;
      cursor += align_up(elements * sizeof(Bf16));
      return at;
    };
    constexpr std::size_t kAbsent = ~std::size_t{0};
    // Where each layer parameter goes. Packed ones (q|k|v rows back to back form the
    // [qd + 2 kvd, H] projection; gate|up the [2I, H] one; likewise their biases) share a slot.
    struct Slot {
      std::size_t input_norm, qkv, qkv_bias = kAbsent, o, o_bias = kAbsent, q_norm = kAbsent, k_norm = kAbsent,
          post_norm, gate_up, gate_up_bias = kAbsent, down, down_bias = kAbsent;
    };
    const std::size_t embed_off = reserve(static_cast<std::size_t>(c_.vocab_size * H));
    plan.push_back({c_.embed_weight(), embed_off});
    std::vector<Slot> slots(static_cast<std::size_t>(c_.num_layers));
    const std::size_t b = sizeof(Bf16);
    for (std::int64_t l = 0; l < c_.num_layers; ++l) {
      auto& o = slots[l];
      for (const auto& t : layer_tensors(c_, l)) {
        std::size_t at = 0;
        switch (t.param) {
          case P::input_norm: at = o.input_norm = reserve(H); break;
          case P::q: at = o.qkv = reserve(static_cast<std::size_t>((qd + 2 * kvd) * H)); break;
          case P::k: at = o.qkv + qd * H * b; break;
          case P::v: at = o.qkv + (qd + kvd) * H * b; break;
          case P::q_bias: at = o.qkv_bias = reserve(static_cast<std::size_t>(qd + 2 * kvd)); break;
          case P::k_bias: at = o.qkv_bias + qd * b; break;
          case P::v_bias: at = o.qkv_bias + (qd + kvd) * b; break;
          case P::o: at = o.o = reserve(static_cast<std::size_t>(H * qd)); break;
          case P::o_bias: at = o.o_bias = reserve(H); break;
          case P::q_norm: at = o.q_norm = reserve(c_.head_dim); break;
          case P::k_norm: at = o.k_norm = reserve(c_.head_dim); break;
          case P::post_norm: at = o.post_norm = reserve(H); break;
          case P::gate: at = o.gate_up = reserve(static_cast<std::size_t>(2 * I * H)); break;
          case P::up: at = o.gate_up + I * H * b; break;
          case P::gate_bias: at = o.gate_up_bias = reserve(static_cast<std::size_t>(2 * I)); break;
          case P::up_bias: at = o.gate_up_bias + I * b; break;
          case P::down: at = o.down = reserve(static_cast<std::size_t>(H * I)); break;
          case P::down_bias: at = o.down_bias = reserve(H); break;
        }
        plan.push_back({t.name, at});
      }
    }
    const std::size_t norm_off = reserve(H);
    plan.push_back({c_.final_norm_weight(), norm_off});
    std::size_t head_off = embed_off;
    if (!c_.tie_word_embeddings) {
      head_off = reserve(static_cast<std::size_t>(c_.vocab_size * H));
      plan.push_back({c_.lm_head_weight(), head_off});
    }
    const std::size_t rope_off = cursor;
    cursor += align_up(c_.rope.inv_freq.size() * sizeof(float));
    std::vector<std::size_t> table_offs;
    for (const auto& t : tables) {
      table_offs.push_back(reserve(static_cast<std::size_t>(t.rows.numel())));
      plan.push_back({t.name, table_offs.back(), t.rows});
    }

    w_.storage = cu::DeviceBuffer(cursor);
    auto* base = static_cast<std::byte*>(w_.storage.data());
    auto at = [&](std::size_t off) { return off == kAbsent ? nullptr : reinterpret_cast<Bf16*>(base + off); };
    w_.embed = at(embed_off);
    w_.final_norm = at(norm_off);
    w_.head = at(head_off);
    w_.inv_freq = reinterpret_cast<float*>(base + rope_off);
    for (std::size_t i = 0; i < tables.size(); ++i) {
      tables_.push_back({tables[i].name, at(table_offs[i]), tables[i].rows.shape[0]});
      table_rows_.push_back(tables[i].rows.shape[0]);
    }
    for (const auto& o : slots)
      w_.layers.push_back({at(o.input_norm), at(o.qkv), at(o.qkv_bias), at(o.o), at(o.o_bias), at(o.q_norm),
                           at(o.k_norm), at(o.post_norm), at(o.gate_up), at(o.gate_up_bias), at(o.down),
                           at(o.down_bias)});
    ZOO_CUDA_CHECK(cudaMemcpyAsync(w_.inv_freq, c_.rope.inv_freq.data(), c_.rope.inv_freq.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, *stream_));

    std::size_t total = 0, done = 0;
    for (const auto& p : plan) total += p.view ? p.view->nbytes() : source.info(p.name)->nbytes;
    StagedUploader uploader(*stream_);
    for (const auto& p : plan)
      uploader.upload(p.view ? *p.view : source.view(p.name), at(p.offset), [&](std::size_t bytes) {
        done += bytes;
        if (progress) progress(done, total);
      });
    stream_->synchronize();
    weight_bytes_ = cursor;
    note_memory();
  }

  std::unique_ptr<Session> new_session() override {
    ZOO_CUDA_CHECK(cudaSetDevice(device_));
    return std::make_unique<CudaSession>(std::static_pointer_cast<CudaBackend>(shared_from_this()));
  }

  nlohmann::json runtime_stats() const override {
    const auto& props = cu::device_properties(device_);
    return {{"gpu", props.name},
            {"weights_gb", static_cast<double>(weight_bytes_) / 1e9},
            {"peak_device_memory_gb", static_cast<double>(peak_used_) / 1e9}};
  }

  void note_memory() {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) peak_used_ = std::max(peak_used_, total - free);
  }

  const DecoderSpec c_;
  // All sessions of this model launch on one stream and share one Gemm plan cache, neither of which
  // is thread-safe: forward() from two threads at once is refused, not raced.
  ExclusiveUse in_use_;
  int device_;
  std::int64_t max_context_;
  std::unique_ptr<cu::Stream> stream_;
  std::unique_ptr<cu::Gemm> gemm_;
  std::unique_ptr<cu::PrefillAttention> prefill_attention_;  // cuDNN's plans and workspace, or Zoo's kernel
  DeviceWeights w_;
  std::vector<DeviceTable> tables_;
  std::vector<std::int64_t> table_rows_;
  std::size_t weight_bytes_ = 0;
  std::size_t peak_used_ = 0;
};

constexpr int kMaxDecodeTokens = 8;  // steps up to this many tokens use the decode attention kernel
// In step_host_, past the ids, positions, kv_len and table ids: the sampling request and result.
constexpr std::size_t kSampleParamsOffset = 7168, kSampleOutOffset = 7680;
// Head sampling (OutputRequest::head_sample): at most this many segments are picked on the device
// (more fall back to returning the head output); the layout of head_sample_host_/head_sample_dev_.
constexpr std::int64_t kMaxHeadSegments = 256;
constexpr std::size_t kHeadSampleUOffset = 16, kHeadSampleOutOffset = kHeadSampleUOffset + 8 * kMaxHeadSegments,
                      kHeadSampleBytes = kHeadSampleOutOffset + sizeof(cu::SampleOutput) * kMaxHeadSegments;
static_assert(sizeof(cu::SegmentSampleParams) <= kHeadSampleUOffset);

CudaSession::CudaSession(std::shared_ptr<CudaBackend> backend)
    : owner_(std::move(backend)), b_(*owner_), c_(owner_->c_) {
  const std::size_t cache_bytes =
      static_cast<std::size_t>(c_.num_layers * b_.max_context_ * c_.kv_dim()) * sizeof(Bf16);
  k_cache_ = cu::DeviceBuffer(cache_bytes);
  v_cache_ = cu::DeviceBuffer(cache_bytes);
  kv_len_dev_ = cu::DeviceBuffer(sizeof(std::int32_t));
  step_host_ = cu::PinnedBuffer(8192);  // ids + positions + kv_len (<= 513 int32), then table ids from 1024
  sample_params_dev_ = cu::DeviceBuffer(sizeof(cu::SampleParams));
  sample_out_dev_ = cu::DeviceBuffer(sizeof(cu::SampleOutput));
  sample_workspace_ = cu::DeviceBuffer(cu::sample_workspace_bytes(c_.vocab_size));
  sample_workspace_.fill_bytes(0);  // the sampling kernels' tickets start at zero
  head_sample_host_ = cu::PinnedBuffer(kHeadSampleBytes);
  head_sample_dev_ = cu::DeviceBuffer(kHeadSampleBytes);
  decode_workspace_ = cu::DeviceBuffer(cu::decode_attention_workspace_bytes(kMaxDecodeTokens, c_.num_heads, c_.head_dim));
  decode_workspace_.fill_bytes(0);  // the decode attention's merge tickets start at zero
  b_.note_memory();
}

void CudaSession::ensure_activations(std::int64_t tokens) {
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
  ids_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(T) * sizeof(std::int32_t));
  positions_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(T) * sizeof(std::int32_t));
  a_.tokens = T;
  decode_graphs_.clear();  // they captured the old buffers' addresses
  b_.note_memory();
}

HostTensor CudaSession::download_f32(const Bf16* src, std::int64_t rows, std::int64_t cols, std::int64_t stride) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(rows * cols));
  ZOO_CUDA_CHECK(cudaMemcpy2DAsync(bits.data(), cols * 2, src, stride * 2, cols * 2, rows, cudaMemcpyDeviceToHost,
                                   *b_.stream_));
  b_.stream_->synchronize();
  HostTensor out(DType::F32, {rows, cols});
  for (std::size_t i = 0; i < bits.size(); ++i) out.as<float>()[i] = bf16_to_f32(bits[i]);
  return out;
}

Bf16* CudaSession::k_cache(std::int64_t layer) {
  return k_cache_.as<Bf16>() + layer * b_.max_context_ * c_.kv_dim();
}
Bf16* CudaSession::v_cache(std::int64_t layer) {
  return v_cache_.as<Bf16>() + layer * b_.max_context_ * c_.kv_dim();
}

void CudaSession::embed() {
  const ForwardStep& step = *step_;
  cudaStream_t s = *b_.stream_;
  const std::int64_t H = c_.hidden_size;
  cu::embedding_gather(b_.w_.embed, c_.vocab_size, H, ids_dev_.as<std::int32_t>(), T_, a_.h.as<Bf16>(), s);
  profile_.mark("embedding");
  if (!step.override_positions.empty()) {  // never in a graph (not graphable)
    const auto n = static_cast<std::int64_t>(step.override_positions.size());
    std::vector<std::int32_t> positions(step.override_positions.begin(), step.override_positions.end());
    override_pos_dev_ = cu::DeviceBuffer(positions.size() * 4);
    override_pos_dev_.upload(positions.data(), positions.size() * 4);
    override_rows_dev_ = cu::DeviceBuffer(step.override_rows.size() * sizeof(float));
    override_rows_dev_.upload(step.override_rows.data(), step.override_rows.size() * sizeof(float));
    cu::scatter_rows_f32(override_pos_dev_.as<std::int32_t>(), override_rows_dev_.as<float>(), n, H, a_.h.as<Bf16>(), s);
  }
  if (variant_.table >= 0) {
    const DeviceTable& t = b_.tables_[static_cast<std::size_t>(variant_.table)];
    cu::sum_table_rows(t.rows, t.count, H, table_ids_dev_.as<std::int32_t>(), variant_.per_position,
                       table_pos_dev_.as<std::int32_t>(), static_cast<std::int64_t>(step.table_rows.positions.size()),
                       a_.h.as<Bf16>(), s);
    profile_.mark("table rows");
  }
}

void CudaSession::input_norm() {
  cu::rms_norm(a_.h.as<Bf16>(), b_.w_.layers[0].input_norm, a_.x.as<Bf16>(), T_, c_.hidden_size,
               static_cast<float>(c_.rms_norm_eps), *b_.stream_);
  profile_.mark("norm");
}

void CudaSession::qkv(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  // Biases go through the GEMM epilogue: one rounding of (x @ W^T + b), as torch does.
  b_.gemm_->linear_bias(a_.x.as<Bf16>(), L.qkv, L.qkv_bias, a_.qkv.as<Bf16>(), T_, c_.q_dim() + 2 * c_.kv_dim(),
                        c_.hidden_size, *b_.stream_);
  profile_.mark("gemm qkv");
}

void CudaSession::qk_norm_rope_cache(std::int64_t l, bool keep_normed) {
  const LayerPtrs& L = b_.w_.layers[l];
  const std::int64_t qd = c_.q_dim(), kvd = c_.kv_dim(), qkv_cols = qd + 2 * kvd;
  auto* qkv = a_.qkv.as<Bf16>();
  cu::QkNormRopeArgs rope;
  rope.q = qkv;
  rope.q_stride = qkv_cols;
  rope.k = qkv + qd;
  rope.k_stride = qkv_cols;
  rope.v = qkv + qd + kvd;
  rope.v_stride = qkv_cols;
  rope.q_norm_weight = L.q_norm;
  rope.k_norm_weight = L.k_norm;
  rope.q_out = a_.q.as<Bf16>();
  rope.k_cache = k_cache(l);
  rope.v_cache = v_cache(l);
  rope.q_normed = keep_normed ? a_.q_normed.as<Bf16>() : nullptr;
  rope.k_normed = keep_normed ? a_.k_normed.as<Bf16>() : nullptr;
  rope.positions = positions_dev_.as<std::int32_t>();
  rope.tokens = T_;
  rope.q_heads = static_cast<int>(c_.num_heads);
  rope.kv_heads = static_cast<int>(c_.num_kv_heads);
  rope.head_dim = static_cast<int>(c_.head_dim);
  rope.eps = static_cast<float>(c_.rms_norm_eps);
  rope.inv_freq = b_.w_.inv_freq;
  rope.attention_scaling = c_.rope.attention_scaling;
  cu::qk_norm_rope_cache(rope, *b_.stream_);
  profile_.mark("qk norm+rope");
}

void CudaSession::attention(std::int64_t l) {
  cudaStream_t s = *b_.stream_;
  if (T_ <= kMaxDecodeTokens) {
    cu::DecodeAttentionArgs d;
    d.q = a_.q.as<Bf16>();
    d.k_cache = k_cache(l);
    d.v_cache = v_cache(l);
    d.out = a_.attn.as<Bf16>();
    d.q_tokens = static_cast<int>(T_);
    d.kv_len = graph_kv_len_ > 0 ? graph_kv_len_ : pos_ + T_;
    d.kv_len_device = graph_kv_len_ > 0 ? kv_len_dev_.as<std::int32_t>() : nullptr;
    d.q_heads = static_cast<int>(c_.num_heads);
    d.kv_heads = static_cast<int>(c_.num_kv_heads);
    d.head_dim = static_cast<int>(c_.head_dim);
    d.workspace = decode_workspace_.data();
    d.workspace_bytes = decode_workspace_.size();
    cu::attention_decode(d, s);
  } else {
    cu::PrefillAttentionArgs p;
    p.q = a_.q.as<Bf16>();
    p.k_cache = k_cache(l);
    p.v_cache = v_cache(l);
    p.out = a_.attn.as<Bf16>();
    p.tokens = T_;
    p.start = pos_;
    p.q_heads = static_cast<int>(c_.num_heads);
    p.kv_heads = static_cast<int>(c_.num_kv_heads);
    p.head_dim = static_cast<int>(c_.head_dim);
    b_.prefill_attention_->run(p, s);
  }
  profile_.mark("attention");
}

void CudaSession::o_proj(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  b_.gemm_->linear_bias(a_.attn.as<Bf16>(), L.o, L.o_bias, a_.tmp.as<Bf16>(), T_, c_.hidden_size, c_.q_dim(),
                        *b_.stream_);
  profile_.mark("gemm o");
}

// The residual add fused with the norm that follows it.
void CudaSession::add_norm(std::int64_t l, NextNorm next) {
  const Bf16* weight = next == NextNorm::post_attention ? b_.w_.layers[l].post_norm
                       : l + 1 < c_.num_layers         ? b_.w_.layers[l + 1].input_norm
                                                       : b_.w_.final_norm;
  cu::add_rms_norm(a_.h.as<Bf16>(), a_.tmp.as<Bf16>(), weight, a_.x.as<Bf16>(), T_, c_.hidden_size,
                   static_cast<float>(c_.rms_norm_eps), *b_.stream_);
  profile_.mark("add+norm");
}

void CudaSession::gate_up(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  b_.gemm_->linear_bias(a_.x.as<Bf16>(), L.gate_up, L.gate_up_bias, a_.gate_up.as<Bf16>(), T_,
                        2 * c_.intermediate_size, c_.hidden_size, *b_.stream_);
  profile_.mark("gemm gate_up");
}

void CudaSession::act() {
  cu::silu_and_mul(a_.gate_up.as<Bf16>(), a_.act.as<Bf16>(), T_, c_.intermediate_size, *b_.stream_);
  profile_.mark("silu*mul");
}

void CudaSession::gate_up_act(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  if (L.gate_up_bias) {
    gate_up(l);
    act();
    return;
  }
  // One kernel at m = 1 (the projection is never stored), the two kernels otherwise.
  b_.gemm_->linear_silu_mul(a_.x.as<Bf16>(), L.gate_up, a_.gate_up.as<Bf16>(), a_.act.as<Bf16>(), T_,
                            c_.intermediate_size, c_.hidden_size, *b_.stream_);
  profile_.mark("gemm gate_up+silu");
}

void CudaSession::down(std::int64_t l) {
  const LayerPtrs& L = b_.w_.layers[l];
  b_.gemm_->linear_bias(a_.act.as<Bf16>(), L.down, L.down_bias, a_.tmp.as<Bf16>(), T_, c_.hidden_size,
                        c_.intermediate_size, *b_.stream_);
  profile_.mark("gemm down");
}

void CudaSession::logits(std::int64_t rows) {
  ensure_logits(rows);
  b_.gemm_->linear(last_rows(rows), b_.w_.head, logits_dev_.as<float>(), rows, c_.vocab_size, c_.hidden_size,
                   *b_.stream_);
  logits_computed_ = rows;
  profile_.mark("gemm head");
}

// Picks a token from logits row `row` on the device (sample_params_dev_ holds the request).
void CudaSession::sample(std::int64_t row) {
  cu::sample_row(logits_dev_.as<float>() + row * c_.vocab_size, c_.vocab_size,
                 static_cast<cu::SampleMode>(variant_.sample - 1), sample_params_dev_.as<cu::SampleParams>(),
                 sample_out_dev_.as<cu::SampleOutput>(), sample_workspace_.data(), sample_workspace_.size(),
                 *b_.stream_);
  profile_.mark("sample");
}

void CudaSession::head(int table, std::int64_t rows) {
  const DeviceTable& t = b_.tables_[static_cast<std::size_t>(table)];
  ensure_head(rows * t.count);
  b_.gemm_->linear(last_rows(rows), t.rows, head_dev_.as<float>(), rows, t.count, c_.hidden_size, *b_.stream_);
  profile_.mark("gemm row table");
}

// Picks one id per segment of the head output's row `row` on the device (head_sample_dev_ holds
// the request and its uniforms).
void CudaSession::sample_head(int table, std::int64_t row) {
  const DeviceTable& t = b_.tables_[static_cast<std::size_t>(table)];
  const std::int64_t segments = variant_.head_segments;
  auto* base = head_sample_dev_.as<std::byte>();
  cu::sample_segments(head_dev_.as<float>() + row * t.count, segments, t.count / segments,
                      reinterpret_cast<const cu::SegmentSampleParams*>(base),
                      reinterpret_cast<const double*>(base + kHeadSampleUOffset),
                      reinterpret_cast<cu::SampleOutput*>(base + kHeadSampleOutOffset), *b_.stream_);
  profile_.mark("sample head");
}

void CudaSession::tap(DiagnosticHook& hook, const std::string& name, Value value, std::int64_t l) {
  const std::int64_t H = c_.hidden_size, qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate_size;
  const std::int64_t qkv_cols = qd + 2 * kvd;
  if (value == Value::logits) {
    HostTensor all(DType::F32, {logits_computed_, c_.vocab_size});
    ZOO_CUDA_CHECK(cudaMemcpyAsync(all.data(), logits_dev_.data(), all.nbytes(), cudaMemcpyDeviceToHost, *b_.stream_));
    b_.stream_->synchronize();
    hook.record(name, all.view());
    return;
  }
  struct Where {
    const Bf16* data;
    std::int64_t cols, stride;
  };
  const Where w = [&]() -> Where {
    switch (value) {
      case Value::embed: case Value::attn_residual: case Value::output: return {a_.h.as<Bf16>(), H, H};
      case Value::input_norm: case Value::post_attn_norm: case Value::final_norm: return {a_.x.as<Bf16>(), H, H};
      case Value::q_proj: return {a_.qkv.as<Bf16>(), qd, qkv_cols};
      case Value::k_proj: return {a_.qkv.as<Bf16>() + qd, kvd, qkv_cols};
      case Value::v_proj: return {a_.qkv.as<Bf16>() + qd + kvd, kvd, qkv_cols};
      case Value::q_norm: return {a_.q_normed.as<Bf16>(), qd, qd};
      case Value::k_norm: return {a_.k_normed.as<Bf16>(), kvd, kvd};
      case Value::q_rope: return {a_.q.as<Bf16>(), qd, qd};
      case Value::k_rope: return {k_cache(l) + pos_ * kvd, kvd, kvd};
      case Value::attn: return {a_.attn.as<Bf16>(), qd, qd};
      case Value::o_proj: case Value::down_proj: return {a_.tmp.as<Bf16>(), H, H};
      case Value::gate_proj: return {a_.gate_up.as<Bf16>(), I, 2 * I};
      case Value::up_proj: return {a_.gate_up.as<Bf16>() + I, I, 2 * I};
      case Value::act: return {a_.act.as<Bf16>(), I, I};
      case Value::logits: break;
    }
    return {nullptr, 0, 0};
  }();
  hook.record(name, download_f32(w.data, T_, w.cols, w.stride).view());
}

void CudaSession::ensure_logits(std::int64_t rows) {
  if (logits_rows_ >= rows) return;
  logits_dev_ = cu::DeviceBuffer(static_cast<std::size_t>(rows * c_.vocab_size) * sizeof(float));
  logits_rows_ = rows;
  decode_graphs_.clear();  // they captured the old buffer's address
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
  run_decoder_graph(c_, *this, T_, {rows, v.logits, v.logits && v.sample > 0, v.head_table, v.head_segments > 0},
                    hook);
}

ForwardResult CudaSession::forward(const ForwardStep& step, DiagnosticHook* hook) {
  const ExclusiveUse::Scope one_thread(b_.in_use_);
  check_step(c_, step, pos_, b_.max_context_, b_.table_rows_);
  const auto T = static_cast<std::int64_t>(step.ids.size());
  const std::int64_t H = c_.hidden_size, V = c_.vocab_size;
  ZOO_CUDA_CHECK(cudaSetDevice(b_.device_));
  ensure_activations(T);
  cudaStream_t s = *b_.stream_;

  // Step inputs go through pinned memory so a replayed graph reads them from fixed device addresses.
  auto* host = step_host_.as<std::int32_t>();
  const bool small = T <= 256;
  std::vector<std::int32_t> big;
  std::int32_t* ids32 = small ? host : (big.resize(static_cast<std::size_t>(2 * T)), big.data());
  for (std::int64_t t = 0; t < T; ++t) {
    ids32[t] = static_cast<std::int32_t>(step.ids[t]);
    ids32[T + t] = static_cast<std::int32_t>(pos_ + t);
  }
  ZOO_CUDA_CHECK(cudaMemcpyAsync(ids_dev_.data(), ids32, T * 4, cudaMemcpyHostToDevice, s));
  ZOO_CUDA_CHECK(cudaMemcpyAsync(positions_dev_.data(), ids32 + T, T * 4, cudaMemcpyHostToDevice, s));
  if (!small) b_.stream_->synchronize();  // `big` is pageable and dies with this scope

  const TableRows& tr = step.table_rows;
  const bool has_table = tr.table >= 0;
  if (has_table) {
    // Ids and positions of the summed rows; a one-token step stages them in pinned memory (at a
    // fixed device address, for graphs), longer ones upload directly.
    const auto n_ids = static_cast<std::int64_t>(tr.ids.size()), n_pos = static_cast<std::int64_t>(tr.positions.size());
    ensure_table_ids(std::max(n_ids, n_pos));
    if (T == 1 && n_ids <= 512) {
      std::int32_t* staged = host + 1024;  // past the ids/positions/kv_len area used above
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
  const auto& sample = step.outputs.sample;
  const bool sampling = step.outputs.logits && sample.has_value();
  if (sampling) {  // checked in check_step
    auto* params = reinterpret_cast<cu::SampleParams*>(step_host_.as<std::byte>() + kSampleParamsOffset);
    *params = {sample->u, sample->temperature, sample->top_k, sample->top_p, 0};
    ZOO_CUDA_CHECK(cudaMemcpyAsync(sample_params_dev_.data(), params, sizeof(cu::SampleParams), cudaMemcpyHostToDevice, s));
  }
  // Sampling the head on the device: the request and its uniforms go up the same way. A request
  // this backend cannot serve (too many segments, too wide) is ignored: the head output comes back.
  const auto& head_sample = step.outputs.head_sample;
  bool head_sampling = false;
  if (head_sample && step.outputs.head_table >= 0) {  // checked in check_step
    const std::int64_t count = b_.tables_[static_cast<std::size_t>(step.outputs.head_table)].count;
    head_sampling = head_sample->segments <= kMaxHeadSegments &&
                    count / head_sample->segments <= cu::kSegmentSampleMaxWidth;
  }
  if (head_sampling) {
    auto* staged = head_sample_host_.as<std::byte>();
    const bool greedy = head_sample->temperature == 0.0f;
    *reinterpret_cast<cu::SegmentSampleParams*>(staged) = {head_sample->temperature, head_sample->top_k,
                                                           head_sample->top_p, 0};
    std::size_t bytes = kHeadSampleUOffset;
    if (!greedy) {  // a greedy pick reads no uniform
      std::memcpy(staged + kHeadSampleUOffset, head_sample->u.data(), head_sample->u.size_bytes());
      bytes += head_sample->u.size_bytes();
    }
    ZOO_CUDA_CHECK(cudaMemcpyAsync(head_sample_dev_.data(), staged, bytes, cudaMemcpyHostToDevice, s));
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
                         (!has_table || (tr.positions.size() == 1 && tr.positions[0] == 0 && tr.ids.size() <= 512));
  if (graphable) {
    // Decode graphs are bucketed by kv length: the attention grid is sized for the bucket and the
    // true length is read on the device.
    std::int64_t bucket = 256;
    while (bucket < pos_ + 1) bucket *= 2;
    bucket = std::min(bucket, b_.max_context_);
    host[2 * T] = static_cast<std::int32_t>(pos_ + 1);
    ZOO_CUDA_CHECK(cudaMemcpyAsync(kv_len_dev_.data(), host + 2 * T, 4, cudaMemcpyHostToDevice, s));
    graph_kv_len_ = bucket;
    // Before taking a reference into decode_graphs_, which a reallocation clears.
    if (variant.logits) ensure_logits(1);
    if (variant.head_table >= 0) ensure_head(b_.tables_[static_cast<std::size_t>(variant.head_table)].count);
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
  auto* picked = reinterpret_cast<cu::SampleOutput*>(step_host_.as<std::byte>() + kSampleOutOffset);
  if (sampling) {
    ZOO_CUDA_CHECK(cudaMemcpyAsync(picked, sample_out_dev_.data(), sizeof(cu::SampleOutput), cudaMemcpyDeviceToHost, s));
  } else if (step.outputs.logits) {
    result.logits = HostTensor(DType::F32, {rows, V});
    ZOO_CUDA_CHECK(cudaMemcpyAsync(result.logits.data(), logits_dev_.data(), result.logits.nbytes(),
                                   cudaMemcpyDeviceToHost, s));
  }
  auto* head_picked = reinterpret_cast<cu::SampleOutput*>(head_sample_host_.as<std::byte>() + kHeadSampleOutOffset);
  if (head_sampling) {
    ZOO_CUDA_CHECK(cudaMemcpyAsync(head_picked, head_sample_dev_.as<std::byte>() + kHeadSampleOutOffset,
                                   sizeof(cu::SampleOutput) * static_cast<std::size_t>(variant.head_segments),
                                   cudaMemcpyDeviceToHost, s));
  } else if (step.outputs.head_table >= 0) {
    const DeviceTable& t = b_.tables_[static_cast<std::size_t>(step.outputs.head_table)];
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

}  // namespace

std::shared_ptr<DecoderBackend> make_cuda_backend(const DecoderSpec& spec, const ModelArgs& args) {
  return std::make_shared<CudaBackend>(spec, args);
}

}  // namespace zoo::layers
