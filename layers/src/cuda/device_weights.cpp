#include "device_weights.hpp"

#include <array>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>

#include "zoo/kernels/thread_pool.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {
namespace {

using P = LayerParam;

constexpr std::size_t kAlign = 256;
constexpr std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// One tensor's destination: where in the device allocation its bf16 bytes go.
struct Placement {
  std::string name;
  std::size_t offset;
  // A row table's rows, or an expert's slice of a fused tensor; else `name` in the WeightSource.
  std::optional<TensorView> view;
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

}  // namespace

DeviceWeights upload_decoder_weights(const DecoderSpec& spec, const WeightSource& source,
                                     const std::vector<RowTableSource>& tables, cudaStream_t stream,
                                     const ProgressFn& progress) {
  DeviceWeights w;
  const std::int64_t H = spec.hidden_size, I = spec.intermediate_size, qd = spec.q_dim(), kvd = spec.kv_dim();
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
    std::size_t input_norm = kAbsent, qkv, qkv_bias = kAbsent, o, o_bias = kAbsent, q_norm = kAbsent,
                k_norm = kAbsent, post_norm = kAbsent, gate_up = kAbsent, gate_up_bias = kAbsent, down = kAbsent,
                down_bias = kAbsent,
                post_attn_out_norm = kAbsent, post_mlp_norm = kAbsent, router = kAbsent, experts_gate_up = kAbsent,
                experts_down = kAbsent;
  };
  const std::int64_t E = spec.moe.experts, Ie = spec.moe.intermediate_size;
  const bool whole_qk = spec.qk_norm == QkNorm::whole;
  const std::size_t embed_off = reserve(static_cast<std::size_t>(spec.vocab_size * H));
  plan.push_back({spec.embed_weight(), embed_off});
  std::vector<Slot> slots(static_cast<std::size_t>(spec.num_layers));
  const std::size_t b = sizeof(Bf16);
  for (std::int64_t l = 0; l < spec.num_layers; ++l) {
    auto& o = slots[l];
    for (const auto& t : layer_tensors(spec, l)) {
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
        case P::q_norm: at = o.q_norm = reserve(static_cast<std::size_t>(whole_qk ? qd : spec.head_dim)); break;
        case P::k_norm: at = o.k_norm = reserve(static_cast<std::size_t>(whole_qk ? kvd : spec.head_dim)); break;
        case P::post_norm: at = o.post_norm = reserve(H); break;
        case P::gate: at = o.gate_up = reserve(static_cast<std::size_t>(2 * I * H)); break;
        case P::up: at = o.gate_up + I * H * b; break;
        case P::gate_bias: at = o.gate_up_bias = reserve(static_cast<std::size_t>(2 * I)); break;
        case P::up_bias: at = o.gate_up_bias + I * b; break;
        case P::down: at = o.down = reserve(static_cast<std::size_t>(H * I)); break;
        case P::down_bias: at = o.down_bias = reserve(H); break;
        case P::post_attn_out_norm: at = o.post_attn_out_norm = reserve(H); break;
        case P::post_mlp_norm: at = o.post_mlp_norm = reserve(H); break;
        case P::router: at = o.router = reserve(static_cast<std::size_t>(E * H)); break;
        // Experts stacked like the dense projections: expert e's gate|up at e * 2Ie * H (the fused
        // checkpoint layout's own order, uploaded slice by slice as the per-expert one).
        case P::expert_gate:
          if (t.expert == 0) o.experts_gate_up = reserve(static_cast<std::size_t>(E * 2 * Ie * H));
          at = o.experts_gate_up + static_cast<std::size_t>(t.expert * 2 * Ie * H) * b;
          break;
        case P::expert_up: at = o.experts_gate_up + static_cast<std::size_t>((t.expert * 2 + 1) * Ie * H) * b; break;
        case P::expert_down:
          if (t.expert == 0) o.experts_down = reserve(static_cast<std::size_t>(E * H * Ie));
          at = o.experts_down + static_cast<std::size_t>(t.expert * H * Ie) * b;
          break;
        // A shared expert: refused by the CUDA backend before anything is placed (cuda_unsupported).
        case P::shared_gate: case P::shared_up: case P::shared_down: case P::shared_expert_gate:
          throw std::logic_error("CUDA backend: no shared experts");
      }
      plan.push_back(
          {t.name, at, t.stored_shape.empty() ? std::nullopt : std::optional(layer_tensor_view(source, t))});
    }
  }
  const std::size_t norm_off = reserve(H);
  plan.push_back({spec.final_norm_weight(), norm_off});
  std::size_t head_off = embed_off;
  if (!spec.tie_word_embeddings) {
    head_off = reserve(static_cast<std::size_t>(spec.vocab_size * H));
    plan.push_back({spec.lm_head_weight(), head_off});
  }
  std::vector<std::size_t> rope_offs;
  for (const auto& rope : spec.ropes) {
    rope_offs.push_back(cursor);
    cursor += align_up(rope.inv_freq.size() * sizeof(float));
  }
  std::vector<std::size_t> table_offs;
  for (const auto& t : tables) {
    table_offs.push_back(reserve(static_cast<std::size_t>(t.rows.numel())));
    plan.push_back({t.name, table_offs.back(), t.rows});
  }

  w.storage = cu::DeviceBuffer(cursor);
  auto* base = static_cast<std::byte*>(w.storage.data());
  auto at = [&](std::size_t off) { return off == kAbsent ? nullptr : reinterpret_cast<Bf16*>(base + off); };
  w.embed = at(embed_off);
  w.final_norm = at(norm_off);
  w.head = at(head_off);
  for (const std::size_t off : rope_offs) w.inv_freq.push_back(reinterpret_cast<float*>(base + off));
  for (std::size_t i = 0; i < tables.size(); ++i) {
    w.tables.push_back({tables[i].name, at(table_offs[i]), tables[i].rows.shape[0]});
    w.table_rows.push_back(tables[i].rows.shape[0]);
  }
  for (const auto& o : slots)
    w.layers.push_back({at(o.input_norm), at(o.qkv), at(o.qkv_bias), at(o.o), at(o.o_bias), at(o.q_norm),
                         at(o.k_norm), at(o.post_norm), at(o.gate_up), at(o.gate_up_bias), at(o.down),
                         at(o.down_bias), at(o.post_attn_out_norm), at(o.post_mlp_norm), at(o.router),
                         at(o.experts_gate_up), at(o.experts_down)});
  for (std::size_t i = 0; i < spec.ropes.size(); ++i)
    ZOO_CUDA_CHECK(cudaMemcpyAsync(w.inv_freq[i], spec.ropes[i].inv_freq.data(),
                                   spec.ropes[i].inv_freq.size() * sizeof(float), cudaMemcpyHostToDevice, stream));

  std::size_t total = 0, done = 0;
  for (const auto& p : plan) total += p.view ? p.view->nbytes() : source.info(p.name)->nbytes;
  StagedUploader uploader(stream);
  for (const auto& p : plan)
    uploader.upload(p.view ? *p.view : source.view(p.name), at(p.offset), [&](std::size_t bytes) {
      done += bytes;
      if (progress) progress(done, total);
    });
  ZOO_CUDA_CHECK(cudaStreamSynchronize(stream));
  w.bytes = cursor;
  return w;
}

}  // namespace zoo::layers::cuda_backend
