// Encoder-stack and signal front-end ops (encoder_cpu.hpp). Portable code, built once for the
// baseline ISA: the heavy parts (attention's two products, the grouped convolution's GEMMs) go
// through the dispatched `linear` / `conv1d`; what is left is elementwise or per-row work.
#include "zoo/kernels/encoder_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "zoo/kernels/conv_cpu.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/thread_pool.hpp"

namespace zoo::kernels::cpu {
namespace {

constexpr std::int64_t kGrain = std::int64_t{1} << 14;

std::int64_t rows_grain(std::int64_t dim) { return std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(dim, 1)); }

}  // namespace

void layer_norm(const float* x, const float* w, const float* b, float* y, std::int64_t rows, std::int64_t dim,
                float eps) {
  if (rows <= 0 || dim <= 0) return;
  ThreadPool::global().parallel_for(rows, rows_grain(dim), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      // Two passes in float32 (mean, then the centred squares), as torch's CPU LayerNorm does.
      float sum = 0.0f;
      for (std::int64_t i = 0; i < dim; ++i) sum += xr[i];
      const float mean = sum / static_cast<float>(dim);
      float sq = 0.0f;
      for (std::int64_t i = 0; i < dim; ++i) sq += (xr[i] - mean) * (xr[i] - mean);
      const float inv = 1.0f / std::sqrt(sq / static_cast<float>(dim) + eps);
      for (std::int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
    }
  });
}

void per_channel_norm(const float* x, const float* w, const float* b, float* y, std::int64_t length,
                      std::int64_t channels, float eps) {
  if (length <= 0 || channels <= 0) return;
  // Channels-last: a channel's values are strided, so the statistics are gathered per channel in
  // double (thousands of steps: a float32 running sum would drift), each thread a block of
  // channels walking every step (each channel's sums keep their order: the result does not
  // depend on the thread count), then applied row by row.
  std::vector<float> scale(static_cast<std::size_t>(channels)), m32(static_cast<std::size_t>(channels));
  constexpr std::int64_t kChannelBlock = 16;
  ThreadPool::global().parallel_for((channels + kChannelBlock - 1) / kChannelBlock, 1, [&](std::int64_t begin,
                                                                                          std::int64_t end) {
    double mean[kChannelBlock], sq[kChannelBlock];
    for (std::int64_t block = begin; block < end; ++block) {
      const std::int64_t c0 = block * kChannelBlock, n = std::min(kChannelBlock, channels - c0);
      std::fill_n(mean, n, 0.0);
      std::fill_n(sq, n, 0.0);
      for (std::int64_t t = 0; t < length; ++t)
        for (std::int64_t c = 0; c < n; ++c) mean[c] += x[t * channels + c0 + c];
      for (std::int64_t c = 0; c < n; ++c) mean[c] /= static_cast<double>(length);
      for (std::int64_t t = 0; t < length; ++t)
        for (std::int64_t c = 0; c < n; ++c) {
          const double d = x[t * channels + c0 + c] - mean[c];
          sq[c] += d * d;
        }
      for (std::int64_t c = 0; c < n; ++c) {
        m32[c0 + c] = static_cast<float>(mean[c]);
        scale[c0 + c] = static_cast<float>(1.0 / std::sqrt(sq[c] / static_cast<double>(length) + eps));
      }
    }
  });
  ThreadPool::global().parallel_for(length, rows_grain(channels), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t)
      for (std::int64_t c = 0; c < channels; ++c)
        y[t * channels + c] = (x[t * channels + c] - m32[c]) * scale[c] * w[c] + b[c];
  });
}

void gelu_erf(const float* x, float* y, std::int64_t n) {
  ThreadPool::global().parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * static_cast<float>(M_SQRT1_2)));
  });
}

void elu(const float* x, float* y, std::int64_t n) {
  ThreadPool::global().parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) y[i] = x[i] > 0.0f ? x[i] : std::expm1(x[i]);
  });
}

void attention_bidirectional(const float* q, const float* k, const float* v, float* out, std::int64_t tokens,
                             std::int64_t heads, std::int64_t head_dim, float scale) {
  if (tokens <= 0 || heads <= 0 || head_dim <= 0) return;
  const std::int64_t T = tokens, D = head_dim, row = heads * head_dim;
  std::vector<float> qh(static_cast<std::size_t>(T * D)), kh(qh.size()), vt(qh.size()), o(qh.size());
  std::vector<float> scores(static_cast<std::size_t>(T * T));
  for (std::int64_t h = 0; h < heads; ++h) {
    // One head's rows made contiguous (and V transposed) so both products are plain GEMMs.
    for (std::int64_t t = 0; t < T; ++t) {
      std::copy_n(q + t * row + h * D, D, qh.data() + t * D);
      std::copy_n(k + t * row + h * D, D, kh.data() + t * D);
      for (std::int64_t d = 0; d < D; ++d) vt[d * T + t] = v[t * row + h * D + d];
    }
    linear(qh.data(), kh.data(), scores.data(), T, T, D);
    ThreadPool::global().parallel_for(T, rows_grain(T), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t) {
        float* s = scores.data() + t * T;
        float max_score = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = 0; j < T; ++j) {
          s[j] *= scale;
          max_score = std::max(max_score, s[j]);
        }
        float sum = 0.0f;
        for (std::int64_t j = 0; j < T; ++j) {
          s[j] = std::exp(s[j] - max_score);
          sum += s[j];
        }
        const float inv = 1.0f / sum;
        for (std::int64_t j = 0; j < T; ++j) s[j] *= inv;
      }
    });
    linear(scores.data(), vt.data(), o.data(), T, D, T);
    for (std::int64_t t = 0; t < T; ++t) std::copy_n(o.data() + t * D, D, out + t * row + h * D);
  }
}

GroupedConv1d::GroupedConv1d(const float* weight, std::int64_t in, std::int64_t out, std::int64_t k,
                             std::int64_t g, std::int64_t pad, std::vector<float> b)
    : in_channels(in), out_channels(out), kernel(k), groups(g), padding(pad), bias(std::move(b)) {
  if (g < 1 || in % g != 0 || out % g != 0 || k < 1 || pad < 0)
    throw std::invalid_argument("GroupedConv1d: channels " + std::to_string(in) + " -> " + std::to_string(out) +
                                " are not multiples of " + std::to_string(g) + " groups (or kernel/padding invalid)");
  if (!bias.empty() && static_cast<std::int64_t>(bias.size()) != out)
    throw std::invalid_argument("GroupedConv1d: bias of " + std::to_string(bias.size()) + " values for " +
                                std::to_string(out) + " outputs");
  const std::int64_t gi = in / g, go = out / g, per = go * gi * k;
  packed.resize(static_cast<std::size_t>(out * gi * k));
  const Conv1dShape s{1, gi, go, k, 1, 0, 1};
  for (std::int64_t j = 0; j < g; ++j) pack_conv1d_weight(weight + j * per, packed.data() + j * per, s);
}

std::int64_t GroupedConv1d::out_length(std::int64_t length) const {
  return Conv1dShape{length, in_channels / groups, out_channels / groups, kernel, 1, padding, 1}.out_length();
}

void GroupedConv1d::run(const float* x, float* y, std::int64_t length) const {
  const std::int64_t gi = in_channels / groups, go = out_channels / groups;
  const Conv1dShape s{length, gi, go, kernel, 1, padding, 1};
  const std::int64_t out_len = s.checked_out_length();
  std::vector<float> xg(static_cast<std::size_t>(length * gi)), yg(static_cast<std::size_t>(out_len * go));
  for (std::int64_t j = 0; j < groups; ++j) {
    for (std::int64_t t = 0; t < length; ++t) std::copy_n(x + t * in_channels + j * gi, gi, xg.data() + t * gi);
    conv1d(xg.data(), packed.data() + j * go * gi * kernel, bias.empty() ? nullptr : bias.data() + j * go, yg.data(), s);
    for (std::int64_t t = 0; t < out_len; ++t) std::copy_n(yg.data() + t * go, go, y + t * out_channels + j * go);
  }
}

SincResampler::SincResampler(std::int64_t from_rate, std::int64_t to_rate) {
  if (from_rate < 1 || to_rate < 1)
    throw std::invalid_argument("SincResampler: rates must be >= 1 (got " + std::to_string(from_rate) + " -> " +
                                std::to_string(to_rate) + ")");
  if (from_rate == to_rate) return;
  const std::int64_t gcd = std::gcd(from_rate, to_rate);
  orig_ = from_rate / gcd;
  new_ = to_rate / gcd;
  constexpr int kWidth = 6;          // lowpass_filter_width
  constexpr double kRolloff = 0.99;  // rolloff
  const double base = static_cast<double>(std::min(orig_, new_)) * kRolloff;
  width_ = static_cast<std::int64_t>(std::ceil(kWidth * static_cast<double>(orig_) / base));
  const std::int64_t taps = 2 * width_ + orig_;
  filters_.resize(static_cast<std::size_t>(new_ * taps));
  // The reference builds the filters in the waveform's dtype: every step below is one float32
  // operation in its order (python scalars enter as float32).
  const float base_f = static_cast<float>(base), pi_f = static_cast<float>(M_PI);
  const float scale_f = static_cast<float>(base / static_cast<double>(orig_));
  for (std::int64_t p = 0; p < new_; ++p)
    for (std::int64_t i = 0; i < taps; ++i) {
      const float idx = static_cast<float>(i - width_) / static_cast<float>(orig_);
      float t = static_cast<float>(-p) / static_cast<float>(new_) + idx;
      t *= base_f;
      t = std::clamp(t, -static_cast<float>(kWidth), static_cast<float>(kWidth));
      const float c = static_cast<float>(std::cos(static_cast<double>(t * pi_f / static_cast<float>(kWidth) / 2.0f)));
      const float window = c * c;
      t *= pi_f;
      const float sinc = t == 0.0f ? 1.0f : static_cast<float>(std::sin(static_cast<double>(t))) / t;
      filters_[static_cast<std::size_t>(p * taps + i)] = sinc * (window * scale_f);
    }
}

std::int64_t SincResampler::output_length(std::int64_t length) const {
  if (filters_.empty()) return length;
  // ceil(new * length / orig), computed in integers
  return (new_ * length + orig_ - 1) / orig_;
}

std::vector<float> SincResampler::run(const float* x, std::int64_t length) const {
  if (filters_.empty()) return std::vector<float>(x, x + length);
  const std::int64_t out_len = output_length(length), taps = 2 * width_ + orig_;
  std::vector<float> y(static_cast<std::size_t>(out_len));
  ThreadPool::global().parallel_for(out_len, kGrain / taps + 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) {
      const std::int64_t frame = j / new_, phase = j % new_;
      const float* f = filters_.data() + phase * taps;
      const std::int64_t start = frame * orig_ - width_;  // input index of tap 0
      float acc = 0.0f;
      for (std::int64_t i = std::max<std::int64_t>(0, -start); i < taps && start + i < length; ++i) acc += x[start + i] * f[i];
      y[static_cast<std::size_t>(j)] = acc;
    }
  });
  return y;
}

}  // namespace zoo::kernels::cpu
