#pragma once
// CPU float32 ops of bidirectional (encoder) stacks and signal front ends, channels-last
// ([steps, channels] row-major) like conv_cpu.hpp: layer / per-channel normalization, GELU and
// ELU as torch computes them, full (non-causal) multi-head attention, grouped convolution, and
// the windowed-sinc polyphase resampler of PyTorch's sound library (functional.resample) with its
// defaults.
// The GEMM-shaped parts run through the dispatched `linear` (cpu_ops.hpp).
#include <cstdint>
#include <vector>

namespace zoo::kernels::cpu {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b, biased variance over `dim` values (torch
// LayerNorm). x and y may alias.
void layer_norm(const float* x, const float* w, const float* b, float* y, std::int64_t rows, std::int64_t dim,
                float eps);

// Each channel normalized over the `length` steps (torch GroupNorm with one group per channel),
// then y = h * w[c] + b[c]. x, y: [length, channels], may alias.
void per_channel_norm(const float* x, const float* w, const float* b, float* y, std::int64_t length,
                      std::int64_t channels, float eps);

// y = 0.5 x (1 + erf(x / sqrt 2)) (torch's exact GELU), over n values; x and y may alias.
void gelu_erf(const float* x, float* y, std::int64_t n);

// y = x > 0 ? x : expm1(x) (torch ELU, alpha 1), over n values; x and y may alias.
void elu(const float* x, float* y, std::int64_t n);

// Full multi-head attention over `tokens` positions (every query sees every key):
//   q, k, v, out: [tokens, heads, head_dim]; scores scaled by `scale`, float32 softmax.
void attention_bidirectional(const float* q, const float* k, const float* v, float* out, std::int64_t tokens,
                             std::int64_t heads, std::int64_t head_dim, float scale);

// A grouped convolution (torch Conv1d with groups > 1): its weight [out, in / groups, kernel] packed
// per group, as conv1d (conv_cpu.hpp) reads each group's slice.
struct GroupedConv1d {
  std::int64_t in_channels = 0, out_channels = 0, kernel = 1, groups = 1, padding = 0;
  std::vector<float> packed;  // groups x [out / groups, kernel, in / groups]
  std::vector<float> bias;    // [out] or empty

  // Throws std::invalid_argument when the channels are not multiples of groups or the weight size
  // does not fit.
  GroupedConv1d(const float* weight, std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel,
                std::int64_t groups, std::int64_t padding, std::vector<float> bias);
  std::int64_t out_length(std::int64_t length) const;
  // y[out_length(length), out] from x[length, in] (stride 1, dilation 1, zero padding both ends).
  void run(const float* x, float* y, std::int64_t length) const;
};

// PyTorch's sound-library functional.resample(waveform, from, to) with its defaults (lowpass_filter_width 6,
// rolloff 0.99, sinc_interp_hann) on float32 samples: the rates reduced by their gcd to
// (orig, new), `new` polyphase filters of 2 width + orig taps built in float32 in that library's
// operation order, the input zero-padded by width on the left and width + orig on the right, and
// the output cut to ceil(new * length / orig). from == to returns the input.
class SincResampler {
 public:
  // Throws std::invalid_argument for a rate < 1.
  SincResampler(std::int64_t from_rate, std::int64_t to_rate);
  std::int64_t output_length(std::int64_t length) const;
  std::vector<float> run(const float* x, std::int64_t length) const;
  std::int64_t width() const { return width_; }
  // The filters, [new][2 width + orig] (for tests).
  const std::vector<float>& filters() const { return filters_; }

 private:
  std::int64_t orig_ = 1, new_ = 1, width_ = 0;
  std::vector<float> filters_;
};

}  // namespace zoo::kernels::cpu
