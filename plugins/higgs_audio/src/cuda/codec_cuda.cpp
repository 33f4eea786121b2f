// The Higgs codec decoder on CUDA in float32, the same sequence as Codec::decode (codec.cpp) over
// the generic ops of kernels/cuda/conv.hpp (GEMM-based: cuDNN is not available outside torch's
// own wheels on the GPU hosts; cuBLASLt with TF32 off). Weights are uploaded once at load in the
// CPU path's packed layouts; each of a few lanes (stream, GEMM plans, buffers) sizes its activation
// and workspace buffers for its longest decode so far and reuses them, so a decode allocates only
// when it is longer than every earlier one on its lane.
//
// Per upsampling block: Snake + transposed conv (GEMM + overlap-add with bias); per residual unit:
// Snake fused into the im2col of the dilated conv (GEMM, bias in the epilogue), Snake, then the
// pointwise conv whose GEMM epilogue adds its bias and the residual in place.
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../codec.hpp"
#include "zoo/error.hpp"
#include "zoo/kernels/cuda/conv.hpp"
#include "zoo/kernels/cuda/event_profiler.hpp"
#include "zoo/kernels/env.hpp"

namespace zoo::higgs {
namespace {

namespace cu = zoo::kernels::cuda;

cu::DeviceBuffer upload(const std::vector<float>& host) {
  cu::DeviceBuffer buf(std::max<std::size_t>(host.size(), 1) * sizeof(float));
  if (!host.empty()) buf.upload(host.data(), host.size() * sizeof(float));
  return buf;
}

struct DevConv {
  cu::DeviceBuffer packed, bias;
  std::int64_t in = 0, out = 0, kernel = 0, dilation = 1;
  explicit DevConv(const CodecWeights::Conv& c)
      : packed(upload(c.packed)), bias(upload(c.bias)), in(c.in), out(c.out), kernel(c.kernel), dilation(c.dilation) {}
  // The decoder's same-length convolution: odd kernel, padding dilation * (kernel - 1) / 2.
  cu::Conv1dShape same(std::int64_t steps) const {
    return {steps, in, out, kernel, 1, dilation * (kernel - 1) / 2, dilation};
  }
  const float* w() const { return packed.as<float>(); }
  const float* b() const { return bias.as<float>(); }
};

struct DevUnit {
  cu::DeviceBuffer alpha1, alpha2;
  DevConv conv1, conv2;
};

struct DevBlock {
  cu::DeviceBuffer alpha;
  DevConv up;
  std::vector<DevUnit> units;
  std::int64_t stride = 0;
  // padding ceil(s/2), output_padding s % 2 (HiggsAudioV2TokenizerModel._adjust_dac_decoder).
  cu::ConvTranspose1dShape shape(std::int64_t steps) const {
    return {steps, up.in, up.out, up.kernel, stride, (stride + 1) / 2, stride % 2};
  }
};

// Per-stage GPU times (ZOO_CODEC_PROFILE=1), one line after each decode.
void print_stages(const std::vector<cu::EventProfiler::Stage>& stages, std::int64_t frames) {
  if (stages.empty()) return;
  std::string line = fmt::format("codec cuda profile ({} frames):", frames);
  double total = 0;
  for (const auto& stage : stages) {
    line += fmt::format(" {} {:.3f}", stage.name, stage.ms);
    total += stage.ms;
  }
  line += fmt::format(" | total {:.3f} ms", total);
  std::fprintf(stderr, "%s\n", line.c_str());
}

class CudaCodecRunner : public CodecRunner {
 public:
  CudaCodecRunner(const CodecGeometry& g, const CodecWeights& w, int device)
      : g_(g), device_(device), conv1_((set_device(device), w.conv1)), conv2_(w.conv2) {
    std::vector<float> tables;
    for (const auto& t : w.tables) tables.insert(tables.end(), t.begin(), t.end());
    tables_ = upload(tables);
    fc2_w_ = upload(w.fc2_w);
    fc2_b_ = upload(w.fc2_b);
    for (std::size_t b = 0; b < w.blocks.size(); ++b) {
      const auto& wb = w.blocks[b];
      DevBlock block{upload(wb.alpha), DevConv(wb.up), {}, g.blocks[b].stride};
      for (const auto& u : wb.units)
        block.units.push_back(
            DevUnit{upload(u.alpha1), upload(u.alpha2), DevConv(u.conv1), DevConv(u.conv2)});
      blocks_.push_back(std::move(block));
    }
    final_alpha_ = upload(w.final_alpha);
    // The first decode of a process pays ~80 ms of one-time setup whatever its length (kernel
    // modules load lazily, cuBLASLt plans, buffers; measured with test_higgs "[codec_cold]": 8
    // frames cold 80 ms, then 250 frames 7 ms, steady 6.3 ms). Pay it here, at load, on every
    // lane, so the first real decode on any of them runs near its steady speed.
    const std::int64_t warm_frames = 8;
    const std::vector<std::int64_t> zeros(static_cast<std::size_t>(warm_frames * g.num_quantizers), 0);
    for (int i = 0; i < kLanes; ++i) lanes_.push_back(std::make_unique<Lane>());
    for (auto& lane : lanes_) (void)run(*lane, zeros.data(), warm_frames, nullptr);
  }

  // Safe from several threads at once: each call takes a free lane (its own stream, GEMM plans and
  // buffers over the shared weights), so a server's streams decode their chunks side by side
  // instead of queueing behind one another; a small chunk's kernels leave the GPU mostly idle.
  std::vector<float> decode(const std::int64_t* codes, std::int64_t frames, DiagnosticHook* hook) override {
    Lane* lane = nullptr;
    {
      std::unique_lock lock(mutex_);
      freed_.wait(lock, [&] {
        return std::any_of(lanes_.begin(), lanes_.end(), [](const auto& l) { return !l->busy; });
      });
      lane = std::find_if(lanes_.begin(), lanes_.end(), [](const auto& l) { return !l->busy; })->get();
      lane->busy = true;
    }
    struct Release {
      CudaCodecRunner& r;
      Lane& l;
      ~Release() {
        {
          const std::lock_guard lock(r.mutex_);
          l.busy = false;
        }
        r.freed_.notify_one();
      }
    } release{*this, *lane};
    return run(*lane, codes, frames, hook);
  }

 private:
  static constexpr int kLanes = 4;

  // What one decode in flight owns.
  struct Lane {
    cu::Stream stream;
    cu::GemmF32 gemm;
    std::int64_t frames_capacity = 0;
    cu::DeviceBuffer q, h, a, b, ws, wave, ids;
    cu::PinnedBuffer wave_host, ids_host;
    bool busy = false;
  };

  std::vector<float> run(Lane& l, const std::int64_t* codes, std::int64_t frames, DiagnosticHook* hook) {
    set_device(device_);
    reserve(l, frames);
    const std::int64_t K = g_.num_quantizers, S = g_.codebook_size;
    std::int32_t* ids = l.ids_host.as<std::int32_t>();
    for (std::int64_t i = 0; i < frames * K; ++i) {
      const std::int64_t code = codes[i] >= S ? 0 : codes[i];  // BOC/EOC -> 0, as the reference
      ids[i] = static_cast<std::int32_t>((i % K) * S + code);
    }
    const cudaStream_t s = l.stream;
    cu::GemmF32& gemm = l.gemm;
    cu::EventProfiler timer(kernels::env_flag("ZOO_CODEC_PROFILE", false));
    timer.begin(s);
    l.ids.upload_async(ids, static_cast<std::size_t>(frames * K) * sizeof(std::int32_t), s);
    float* q = l.q.as<float>();
    cu::sum_rows(tables_.as<float>(), K * S, g_.latent, l.ids.as<std::int32_t>(), K, frames, q, s);
    tap(l, hook, "q_sum", q, frames, g_.latent);
    float* h = l.h.as<float>();
    gemm.linear(q, fc2_w_.as<float>(), fc2_b_.as<float>(), h, frames, g_.decoder_input, g_.latent, s);
    tap(l, hook, "fc2", h, frames, g_.decoder_input);
    float* x = l.a.as<float>();
    float* y = l.b.as<float>();
    float* ws = l.ws.as<float>();
    const std::size_t ws_floats = l.ws.size() / sizeof(float);
    std::int64_t steps = frames;
    cu::conv1d(gemm, h, conv1_.w(), conv1_.b(), x, conv1_.same(steps), ws, ws_floats, s);
    tap(l, hook, "conv1", x, steps, g_.conv1_channels);
    timer.mark("rvq+fc2+conv1");
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      const DevBlock& block = blocks_[b];
      const auto shape = block.shape(steps);
      cu::conv_transpose1d(gemm, x, block.up.w(), block.up.b(), y, shape, ws, ws_floats, s,
                           block.alpha.as<float>());
      std::swap(x, y);
      steps = shape.out_length();
      const std::int64_t c = block.up.out;
      tap(l, hook, fmt::format("block.{}.conv_t1", b), x, steps, c);
      for (std::size_t u = 0; u < block.units.size(); ++u) {
        const DevUnit& unit = block.units[u];
        // y = conv1(snake1(x)); x += conv2(snake2(y)) (bias and residual in the GEMM epilogue).
        cu::conv1d(gemm, x, unit.conv1.w(), unit.conv1.b(), y, unit.conv1.same(steps), ws, ws_floats, s,
                   unit.alpha1.as<float>());
        cu::conv1d(gemm, y, unit.conv2.w(), unit.conv2.b(), x, unit.conv2.same(steps), ws, ws_floats, s,
                   unit.alpha2.as<float>(), /*accumulate=*/true);
        tap(l, hook, fmt::format("block.{}.res_unit{}", b, u + 1), x, steps, c);
      }
      timer.mark(fmt::format("block{}", b));
    }
    float* wave = l.wave.as<float>();
    cu::conv1d(gemm, x, conv2_.w(), conv2_.b(), wave, conv2_.same(steps), ws, ws_floats, s,
               final_alpha_.as<float>());
    timer.mark("conv2");
    std::vector<float> out(static_cast<std::size_t>(steps));
    l.wave.download_async(l.wave_host.data(), out.size() * sizeof(float), s);
    l.stream.synchronize();
    std::copy_n(l.wave_host.as<float>(), out.size(), out.begin());
    print_stages(timer.end(frames), frames);
    if (hook && hook->wants("waveform"))
      hook->record("waveform", TensorView{out.data(), DType::F32, {steps, 1}, Device{}});
    return out;
  }

  static int set_device(int device) {
    ZOO_CUDA_CHECK(cudaSetDevice(device));
    return device;
  }

  // Downloads a [rows, cols] activation for the hook, only when it asks for it.
  static void tap(Lane& l, DiagnosticHook* hook, const std::string& name, const float* dev, std::int64_t rows,
                  std::int64_t cols) {
    if (!hook || !hook->wants(name)) return;
    std::vector<float> host(static_cast<std::size_t>(rows * cols));
    l.stream.synchronize();
    ZOO_CUDA_CHECK(cudaMemcpy(host.data(), dev, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    hook->record(name, TensorView{host.data(), DType::F32, {rows, cols}, Device{}});
  }

  // Sizes a lane's buffers for `frames` by walking the stages (what each holds, what each op needs).
  void reserve(Lane& l, std::int64_t frames) const {
    if (frames <= l.frames_capacity) return;
    std::int64_t steps = frames, act = frames * g_.conv1_channels;
    std::size_t ws = cu::conv1d_workspace_floats(conv1_.same(steps), false);
    for (const auto& block : blocks_) {
      const auto shape = block.shape(steps);
      ws = std::max(ws, cu::conv_transpose1d_workspace_floats(shape, true));
      steps = shape.out_length();
      act = std::max(act, steps * block.up.out);
      for (const auto& unit : block.units) {
        ws = std::max(ws, cu::conv1d_workspace_floats(unit.conv1.same(steps), true));
        ws = std::max(ws, cu::conv1d_workspace_floats(unit.conv2.same(steps), true));
      }
    }
    ws = std::max(ws, cu::conv1d_workspace_floats(conv2_.same(steps), true));
    const auto bytes = [](std::int64_t floats) {
      return static_cast<std::size_t>(std::max<std::int64_t>(floats, 1)) * 4;
    };
    // Free before allocating: the old buffers are smaller and no longer needed.
    l.a = {}, l.b = {}, l.ws = {};
    l.q = cu::DeviceBuffer(bytes(frames * g_.latent));
    l.h = cu::DeviceBuffer(bytes(frames * g_.decoder_input));
    l.a = cu::DeviceBuffer(bytes(act));
    l.b = cu::DeviceBuffer(bytes(act));
    l.ws = cu::DeviceBuffer(bytes(static_cast<std::int64_t>(ws)));
    l.wave = cu::DeviceBuffer(bytes(steps * conv2_.out));
    l.wave_host = cu::PinnedBuffer(bytes(steps * conv2_.out));
    l.ids = cu::DeviceBuffer(bytes(frames * g_.num_quantizers));
    l.ids_host = cu::PinnedBuffer(bytes(frames * g_.num_quantizers));
    l.frames_capacity = frames;
  }

  CodecGeometry g_;
  int device_;
  DevConv conv1_, conv2_;
  cu::DeviceBuffer tables_, fc2_w_, fc2_b_, final_alpha_;
  std::vector<DevBlock> blocks_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace

std::unique_ptr<CodecRunner> make_cuda_codec_runner(const CodecGeometry& geometry, const CodecWeights& weights,
                                                    int device) {
  if (const std::string problem = kernels::cuda::cuda_device_problem(device); !problem.empty())
    throw InputError("higgs codec: " + problem);
  return std::make_unique<CudaCodecRunner>(geometry, weights, device);
}

}  // namespace zoo::higgs
