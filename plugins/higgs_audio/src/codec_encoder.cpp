// The Higgs codec encoder on the CPU in float32, channels-last ([steps, channels]) throughout:
// every convolution and linear is a GEMM (kernels/conv_cpu.hpp, cpu_ops.hpp), the HuBERT pieces
// are kernels/encoder_cpu.hpp's model-neutral ops. Weights of any stored float dtype are widened
// to float32 at load; weight-normalized convolutions are folded as torch's weight_norm computes
// them.
#include "codec_encoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>

#include "codec.hpp"
#include "zoo/error.hpp"
#include "zoo/kernels/conv_cpu.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/encoder_cpu.hpp"

namespace zoo::higgs {
namespace {

namespace ops = zoo::kernels::cpu;
using Conv = EncoderWeights::Conv;

constexpr std::int64_t kUnitDilations[] = {1, 3, 9};  // DacEncoderBlock's residual units (in code)
constexpr std::int64_t kSemanticPad = 160;            // _extract_semantic_features: F.pad(x, (160, 160))
constexpr float kFeatureNormEps = 1e-5f;  // the feature convs' GroupNorm / LayerNorm: torch's default

// An activation buffer: each is written whole by the op that makes it, so it is not zero-filled
// first (a serial pass over up to 61 MB at the real shapes, while the ops run on every core), and
// its fresh pages are first touched by that parallel op.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;  // default-initialized: no value for a float
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }
};
using Activation = std::vector<float, UninitializedAllocator<float>>;

template <class Buffer>
void tap(DiagnosticHook* hook, const std::string& name, const Buffer& data, std::int64_t rows, std::int64_t cols) {
  if (!hook || !hook->wants(name)) return;
  hook->record(name, TensorView{data.data(), DType::F32, {rows, cols}, Device{}});
}

// torch's conv1d_output_length as transformers computes it (int() of a float division).
std::int64_t conv_out(std::int64_t length, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                      std::int64_t dilation = 1) {
  const std::int64_t span = length + 2 * padding - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

Activation run_conv(const Activation& x, std::int64_t steps, const Conv& c, std::int64_t* out_steps) {
  const ops::Conv1dShape s{steps, c.in, c.out, c.kernel, c.stride, c.padding, c.dilation};
  const std::int64_t n = s.checked_out_length();
  Activation y(static_cast<std::size_t>(n * c.out));
  ops::conv1d(x.data(), c.packed.data(), c.bias.empty() ? nullptr : c.bias.data(), y.data(), s);
  if (out_steps) *out_steps = n;
  return y;
}

void add_rows(float* y, const float* bias, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) ops::add_inplace(y + r * cols, bias, cols);
}

template <class Buffer>
Activation linear(const Buffer& x, std::int64_t rows, const std::vector<float>& w, const std::vector<float>& b,
                  std::int64_t out, std::int64_t in) {
  Activation y(static_cast<std::size_t>(rows * out));
  ops::linear(x.data(), w.data(), y.data(), rows, out, in);
  if (!b.empty()) add_rows(y.data(), b.data(), rows, out);
  return y;
}

}  // namespace

float EncodeResult::min_gap(std::int64_t q) const {
  float m = std::numeric_limits<float>::infinity();
  for (std::int64_t t = 0; t < frames; ++t) m = std::min(m, gaps[static_cast<std::size_t>(t * num_quantizers + q)]);
  return m;
}

std::int64_t EncoderGeometry::hop() const {
  std::int64_t n = 1;
  for (const auto& b : acoustic_blocks) n *= b.stride;
  return n;
}

std::int64_t EncoderGeometry::semantic_stride() const {
  std::int64_t n = 1;
  for (const auto& f : features) n *= f.stride;
  return n;
}

std::int64_t EncoderGeometry::downsample() const {
  return std::max<std::int64_t>(1, semantic_downsample);
}

std::int64_t EncoderGeometry::hubert_frames(std::int64_t samples16k) const {
  std::int64_t n = samples16k + 2 * kSemanticPad;
  for (const auto& f : features) n = conv_out(n, f.kernel, f.stride, 0);
  return n;
}

std::int64_t EncoderGeometry::acoustic_frames(std::int64_t samples) const {
  std::int64_t n = conv_out(samples, acoustic_conv1_kernel, 1, acoustic_conv1_kernel / 2);
  for (const auto& b : acoustic_blocks) n = conv_out(n, b.kernel, b.stride, (b.stride + 1) / 2);
  return conv_out(n, acoustic_out_kernel, 1, acoustic_out_kernel / 2);
}

std::string EncoderGeometry::summary() const {
  std::string strides;
  for (const auto& b : acoustic_blocks) strides += fmt::format("{}{}", strides.empty() ? "" : "x", b.stride);
  return fmt::format(
      "DAC {} -> {} (strides {}, hop {}), HuBERT {} x {} ({} heads, {} convs, stride {}), "
      "semantic frames every {}, fc {} -> {} quantizers of {} x {}; {} Hz; config: {}",
      acoustic_conv1_channels, acoustic, strides, hop(), layers, semantic, heads, features.size(),
      semantic_stride(), downsample(), hidden, num_quantizers, codebook_size, codebook_dim, sample_rate,
      config_source);
}

namespace {

// The first field of `c` that disagrees with the tensor-derived geometry `g` (empty when none).
std::string encoder_disagreement(const CodecConfig& c, const EncoderGeometry& g) {
  ConfigCheck k;
  std::vector<std::int64_t> v;
  k.equal("acoustic_model_config.encoder_hidden_size", c.acoustic.encoder_hidden_size,
          g.acoustic_conv1_channels, "acoustic_encoder.conv1's width");
  for (const auto& b : g.acoustic_blocks) v.push_back(b.stride);
  k.equal("acoustic_model_config.downsampling_ratios", c.acoustic.downsampling_ratios, v,
          "acoustic_encoder.block.{i}.conv1 kernels of 2 x the ratio");
  k.equal("acoustic_model_config.hidden_size", c.acoustic.hidden_size, g.acoustic,
          "acoustic_encoder.conv2's width");
  const auto& s = c.semantic;
  k.equal("semantic_model_config.num_feat_extract_layers", s.num_feat_extract_layers,
          static_cast<std::int64_t>(g.features.size()), "feature_extractor.conv_layers");
  v.clear();
  for (const auto& f : g.features) v.push_back(f.out_channels);
  k.equal("semantic_model_config.conv_dim", s.conv_dim, v, "the feature convs' widths");
  v.clear();
  for (const auto& f : g.features) v.push_back(f.kernel);
  k.equal("semantic_model_config.conv_kernel", s.conv_kernel, v, "the feature convs' kernels");
  k.equal("semantic_model_config.conv_stride", static_cast<std::int64_t>(s.conv_stride.size()),
          static_cast<std::int64_t>(g.features.size()), "entries: one stride per feature conv");
  for (const auto& f : g.features)
    k.equal("semantic_model_config.conv_bias", s.conv_bias, f.bias, "whether the feature convs have a bias");
  k.equal("semantic_model_config.feat_extract_norm", s.feat_extract_norm,
          std::string(g.feature_layer_norm ? "layer" : "group"), "the feature convs' norms");
  k.equal("semantic_model_config.hidden_size", s.hidden_size, g.semantic,
          "feature_projection.projection's width");
  k.equal("semantic_model_config.num_hidden_layers", s.num_hidden_layers, g.layers, "encoder.layers");
  k.equal("semantic_model_config.intermediate_size", s.intermediate_size, g.intermediate,
          "the feed-forward width");
  k.equal("semantic_model_config.num_conv_pos_embeddings", s.num_conv_pos_embeddings, g.pos_kernel,
          "pos_conv_embed's kernel");
  k.equal("semantic_model_config.num_conv_pos_embedding_groups", s.num_conv_pos_embedding_groups,
          g.pos_groups, "pos_conv_embed's groups (hidden / its input width)");
  k.equal("kernel_size", c.kernel_size, g.semantic_conv_kernel, "encoder_semantic.conv's kernel");
  v.clear();
  for (const auto& b : g.semantic_blocks) v.push_back(b.stride);
  k.equal("strides", c.strides, v,
          "encoder_semantic.conv_blocks.{i}.conv kernels: 3 for stride 1, else 2 x stride");
  v.clear();
  std::vector<std::int64_t> widths;
  for (std::size_t b = 0; b < c.channel_ratios.size(); ++b)
    v.push_back(static_cast<std::int64_t>(static_cast<double>(s.hidden_size) * c.channel_ratios[b]));
  for (const auto& b : g.semantic_blocks) widths.push_back(b.out_channels);
  k.equal("channel_ratios", v, widths, "encoder_semantic's block widths, int(hidden_size x ratio)");
  for (const auto& b : g.semantic_blocks) {
    k.equal("block_dilations", static_cast<std::int64_t>(c.block_dilations.size()), b.units,
            "entries: one residual unit per dilation in every encoder_semantic block");
    if (b.units > 0)
      k.equal("unit_kernel_size", c.unit_kernel_size, b.unit_kernel, "encoder_semantic's unit kernel");
  }
  k.equal("codebook_size", c.codebook_size, g.codebook_size, "quantizer codebook rows");
  k.equal("codebook_dim", c.codebook_dim, g.codebook_dim, "quantizer codebook width");
  k.equal("target_bandwidths", c.num_quantizers(), g.num_quantizers,
          "quantizers: the config's count is 1000 x the last bandwidth // (frame rate x codebook bits)");
  k.equal("target_bandwidths", c.encode_quantizers(), g.num_quantizers,
          "quantizers that encode() uses at the last bandwidth");
  return k.first;
}

}  // namespace

CodecEncoder::CodecEncoder(std::shared_ptr<const WeightSource> weights, std::string prefix,
                           std::optional<CodecConfig> config)
    : weights_(std::move(weights)), prefix_(std::move(prefix)) {
  const WeightSource& src = *weights_;
  const std::string where = fmt::format("codec encoder in {} (tensors under '{}')", src.describe(), prefix_);
  auto fail = [&](const std::string& what) { return InputError(fmt::format("{}: {}", where, what)); };
  auto info = [&](const std::string& name) { return src.info(prefix_ + name); };
  auto require = [&](const std::string& name) -> Shape {
    auto i = info(name);
    if (!i) throw fail(fmt::format("'{}' is missing", name));
    if (i->dtype != DType::F32 && i->dtype != DType::BF16 && i->dtype != DType::F16)
      throw fail(fmt::format("'{}' is {}; expected a float dtype (BF16, F16, F32)", name, dtype_name(i->dtype)));
    requirements_.push_back({prefix_ + name, i->shape, {DType::BF16, DType::F16, DType::F32}, false});
    return i->shape;
  };
  auto expect = [&](const std::string& name, const Shape& shape, const std::string& why) {
    const Shape got = require(name);
    if (numel(got) != numel(shape) || (got.size() != shape.size() && shape.size() != 1))
      throw fail(fmt::format("'{}' has shape {}, expected {} ({})", name, shape_str(got), shape_str(shape), why));
  };
  // A plain convolution weight, or a weight-norm pair (g over dim 2 for HuBERT's positional conv).
  auto conv_weight = [&](const std::string& base) -> Shape {
    if (info(base + ".weight")) {
      const Shape s = require(base + ".weight");
      if (s.size() != 3) throw fail(fmt::format("'{}.weight' has shape {}, expected rank 3", base, shape_str(s)));
      return s;
    }
    for (const auto& [g, v] : {std::pair<std::string, std::string>{".parametrizations.weight.original0",
                                                                   ".parametrizations.weight.original1"},
                               {".weight_g", ".weight_v"}}) {
      if (!info(base + g) || !info(base + v)) continue;
      const Shape vs = require(base + v), gs = require(base + g);
      if (vs.size() != 3) throw fail(fmt::format("'{}{}' has shape {}, expected rank 3", base, v, shape_str(vs)));
      if (gs.empty()) throw fail(fmt::format("'{}{}' is empty", base, g));
      weight_norm_.push_back({base, {base + g, base + v}});
      return vs;
    }
    throw fail(fmt::format("'{}.weight' is missing (neither plain nor weight-normalized)", base));
  };
  auto has_conv = [&](const std::string& base) {
    return info(base + ".weight") || info(base + ".parametrizations.weight.original1") || info(base + ".weight_v");
  };

  EncoderGeometry& g = geometry_;
  // DAC encoder
  const std::string ac = "acoustic_encoder.";
  const Shape c1 = conv_weight(ac + "conv1");
  if (c1[1] != 1 || c1[2] % 2 == 0)
    throw fail(fmt::format("'{}conv1.weight' has shape {}, expected [C, 1, odd kernel] (mono input)", ac, shape_str(c1)));
  g.acoustic_conv1_channels = c1[0];
  g.acoustic_conv1_kernel = c1[2];
  expect(ac + "conv1.bias", {c1[0]}, "conv1's width");
  std::int64_t channels = c1[0];
  for (std::int64_t b = 0; has_conv(fmt::format("{}block.{}.conv1", ac, b)); ++b) {
    const std::string base = fmt::format("{}block.{}.", ac, b);
    EncoderGeometry::AcousticBlock block;
    for (int u = 1; u <= 3; ++u) {
      const std::string unit = fmt::format("{}res_unit{}.", base, u);
      expect(unit + "snake1.alpha", {1, channels, 1}, "the block's input width");
      expect(unit + "snake2.alpha", {1, channels, 1}, "the block's input width");
      const Shape k1 = conv_weight(unit + "conv1");
      if (k1[0] != channels || k1[1] != channels || k1[2] % 2 == 0)
        throw fail(fmt::format("'{}conv1.weight' has shape {}, expected [{}, {}, odd kernel]", unit, shape_str(k1),
                               channels, channels));
      expect(unit + "conv1.bias", {channels}, "the unit's width");
      const Shape k2 = conv_weight(unit + "conv2");
      if (k2 != Shape{channels, channels, 1})
        throw fail(fmt::format("'{}conv2.weight' has shape {}, expected [{}, {}, 1]", unit, shape_str(k2), channels, channels));
      expect(unit + "conv2.bias", {channels}, "the unit's width");
      if (u == 1) block.unit_kernel = k1[2];
      if (k1[2] != block.unit_kernel) throw fail(fmt::format("'{}conv1.weight': residual units of one block differ in kernel", unit));
    }
    expect(base + "snake1.alpha", {1, channels, 1}, "the block's input width");
    const Shape down = conv_weight(base + "conv1");
    if (down[1] != channels || down[2] < 2 || down[2] % 2 != 0)
      throw fail(fmt::format("'{}conv1.weight' has shape {}, expected [C, {}, 2 x stride]", base, shape_str(down), channels));
    expect(base + "conv1.bias", {down[0]}, "the block's output width");
    block.in_channels = channels;
    block.out_channels = down[0];
    block.kernel = down[2];
    block.stride = down[2] / 2;
    channels = down[0];
    g.acoustic_blocks.push_back(block);
  }
  if (g.acoustic_blocks.empty()) throw fail(fmt::format("no '{}block.0.conv1.weight': no downsampling blocks", ac));
  expect(ac + "snake1.alpha", {1, channels, 1}, "the last block's width");
  const Shape c2 = conv_weight(ac + "conv2");
  if (c2[1] != channels || c2[2] % 2 == 0)
    throw fail(fmt::format("'{}conv2.weight' has shape {}, expected [A, {}, odd kernel]", ac, shape_str(c2), channels));
  g.acoustic = c2[0];
  g.acoustic_out_kernel = c2[2];
  expect(ac + "conv2.bias", {g.acoustic}, "conv2's width");

  // HuBERT
  const std::string hb = "semantic_model.";
  channels = 1;
  g.feature_layer_norm = info(hb + "feature_extractor.conv_layers.1.layer_norm.weight").has_value();
  for (std::int64_t i = 0; has_conv(fmt::format("{}feature_extractor.conv_layers.{}.conv", hb, i)); ++i) {
    const std::string base = fmt::format("{}feature_extractor.conv_layers.{}.", hb, i);
    const Shape w = conv_weight(base + "conv");
    if (w[1] != channels)
      throw fail(fmt::format("'{}conv.weight' has shape {}: {} inputs, the previous conv outputs {}", base, shape_str(w), w[1], channels));
    EncoderGeometry::FeatureConv f;
    f.in_channels = channels;
    f.out_channels = w[0];
    f.kernel = w[2];  // the stride is the config's (no shape records it)
    f.bias = info(base + "conv.bias").has_value();
    if (f.bias) expect(base + "conv.bias", {w[0]}, "the conv's width");
    f.norm = i == 0 || g.feature_layer_norm;
    if (f.norm) {
      expect(base + "layer_norm.weight", {w[0]}, "the conv's width");
      expect(base + "layer_norm.bias", {w[0]}, "the conv's width");
    }
    channels = w[0];
    g.features.push_back(f);
  }
  if (g.features.empty()) throw fail(fmt::format("no '{}feature_extractor.conv_layers.0.conv.weight': no HuBERT", hb));
  expect(hb + "feature_projection.layer_norm.weight", {channels}, "the last feature conv's width");
  expect(hb + "feature_projection.layer_norm.bias", {channels}, "the last feature conv's width");
  const Shape proj = require(hb + "feature_projection.projection.weight");
  if (proj.size() != 2 || proj[1] != channels)
    throw fail(fmt::format("'{}feature_projection.projection.weight' has shape {}, expected [H, {}]", hb, shape_str(proj), channels));
  g.semantic = proj[0];
  const std::int64_t H = g.semantic;
  expect(hb + "feature_projection.projection.bias", {H}, "HuBERT's width");
  const std::string enc = hb + "encoder.";
  const Shape pos = conv_weight(enc + "pos_conv_embed.conv");
  if (pos[0] != H || pos[1] < 1 || H % pos[1] != 0)
    throw fail(fmt::format("'{}pos_conv_embed.conv' weight has shape {}, expected [{}, {} / groups, kernel]", enc, shape_str(pos), H, H));
  g.pos_kernel = pos[2];
  g.pos_groups = H / pos[1];
  expect(enc + "pos_conv_embed.conv.bias", {H}, "HuBERT's width");
  expect(enc + "layer_norm.weight", {H}, "HuBERT's width");
  expect(enc + "layer_norm.bias", {H}, "HuBERT's width");
  for (std::int64_t l = 0; info(fmt::format("{}layers.{}.attention.q_proj.weight", enc, l)); ++l) {
    const std::string base = fmt::format("{}layers.{}.", enc, l);
    for (const char* p : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      expect(fmt::format("{}attention.{}.weight", base, p), {H, H}, "HuBERT's width");
      expect(fmt::format("{}attention.{}.bias", base, p), {H}, "HuBERT's width");
    }
    for (const char* n : {"layer_norm", "final_layer_norm"}) {
      expect(fmt::format("{}{}.weight", base, n), {H}, "HuBERT's width");
      expect(fmt::format("{}{}.bias", base, n), {H}, "HuBERT's width");
    }
    const Shape ff1 = require(base + "feed_forward.intermediate_dense.weight");
    if (ff1.size() != 2 || ff1[1] != H)
      throw fail(fmt::format("'{}feed_forward.intermediate_dense.weight' has shape {}, expected [I, {}]", base, shape_str(ff1), H));
    if (l == 0) g.intermediate = ff1[0];
    if (ff1[0] != g.intermediate) throw fail(fmt::format("'{}feed_forward': layers differ in intermediate width", base));
    expect(base + "feed_forward.intermediate_dense.bias", {g.intermediate}, "the intermediate width");
    expect(base + "feed_forward.output_dense.weight", {H, g.intermediate}, "HuBERT's width x intermediate");
    expect(base + "feed_forward.output_dense.bias", {H}, "HuBERT's width");
    ++g.layers;
  }
  if (g.layers == 0) throw fail(fmt::format("no '{}layers.0': HuBERT has no transformer layers", enc));

  // encoder_semantic
  const std::string es = "encoder_semantic.";
  const Shape sc = conv_weight(es + "conv");
  if (sc[0] != H || sc[1] != H || sc[2] % 2 == 0)
    throw fail(fmt::format("'{}conv.weight' has shape {}, expected [{}, {}, odd kernel]", es, shape_str(sc), H, H));
  g.semantic_conv_kernel = sc[2];
  channels = H;
  for (std::int64_t b = 0; has_conv(fmt::format("{}conv_blocks.{}.conv", es, b)); ++b) {
    const std::string base = fmt::format("{}conv_blocks.{}.", es, b);
    EncoderGeometry::SemanticBlock block;
    block.in_channels = channels;
    for (std::int64_t u = 0; has_conv(fmt::format("{}res_units.{}.conv1", base, u)); ++u) {
      const std::string unit = fmt::format("{}res_units.{}.", base, u);
      const Shape k1 = conv_weight(unit + "conv1");
      if (k1[0] != channels || k1[1] != channels || k1[2] % 2 == 0)
        throw fail(fmt::format("'{}conv1.weight' has shape {}, expected [{}, {}, odd kernel]", unit, shape_str(k1), channels, channels));
      const Shape k2 = conv_weight(unit + "conv2");
      if (k2 != Shape{channels, channels, 1})
        throw fail(fmt::format("'{}conv2.weight' has shape {}, expected [{}, {}, 1]", unit, shape_str(k2), channels, channels));
      if (u > 0 && k1[2] != block.unit_kernel)
        throw fail(fmt::format("'{}conv1.weight': residual units of one block differ in kernel", unit));
      block.unit_kernel = k1[2];
      ++block.units;
    }
    const Shape w = conv_weight(base + "conv");
    if (w[1] != channels) throw fail(fmt::format("'{}conv.weight' has shape {}, expected [C, {}, kernel]", base, shape_str(w), channels));
    expect(base + "conv.bias", {w[0]}, "the block's output width");
    block.out_channels = w[0];
    block.kernel = w[2];
    // SemanticEncoderBlock: kernel 3 for stride 1, else 2 x stride.
    block.stride = w[2] == 3 ? 1 : w[2] / 2;
    if (w[2] != 3 && w[2] % 2 != 0)
      throw fail(fmt::format("'{}conv.weight' has kernel {}, expected 3 (stride 1) or 2 x stride", base, w[2]));
    channels = w[0];
    g.semantic_blocks.push_back(block);
  }
  if (channels != H)
    throw fail(fmt::format("encoder_semantic outputs {} channels; fc expects HuBERT's {} after the acoustic {}", channels, H, g.acoustic));

  g.hidden = g.acoustic + H;
  expect("fc.weight", {g.hidden, g.hidden}, "acoustic + semantic widths");
  expect("fc.bias", {g.hidden}, "acoustic + semantic widths");
  for (std::int64_t q = 0; info(fmt::format("quantizer.quantizers.{}.codebook.embed", q)); ++q) {
    const std::string base = fmt::format("quantizer.quantizers.{}.", q);
    const Shape e = require(base + "codebook.embed");
    if (e.size() != 2) throw fail(fmt::format("'{}codebook.embed' has shape {}, expected [size, dim]", base, shape_str(e)));
    if (q == 0) {
      g.codebook_size = e[0];
      g.codebook_dim = e[1];
    }
    if (e != Shape{g.codebook_size, g.codebook_dim})
      throw fail(fmt::format("'{}codebook.embed' is {}, quantizer 0's is [{}, {}]", base, shape_str(e), g.codebook_size, g.codebook_dim));
    expect(base + "project_in.weight", {g.codebook_dim, g.hidden}, "codebook dim x fc width");
    expect(base + "project_in.bias", {g.codebook_dim}, "codebook dim");
    expect(base + "project_out.weight", {g.hidden, g.codebook_dim}, "fc width x codebook dim");
    expect(base + "project_out.bias", {g.hidden}, "fc width");
    ++g.num_quantizers;
  }
  if (g.num_quantizers == 0) throw fail("no 'quantizer.quantizers.0.codebook.embed'");

  // What no shape records comes from the config; without one, from the published release only when
  // these tensors are exactly its (a rule that guessed HuBERT's heads from its width ran a 2 x 16
  // codec as 4 x 8, silently).
  if (!config) config = read_codec_config(src, prefix_ + "quantizer.quantizers.0.codebook.embed");
  if (config) {
    if (const std::string problem = encoder_disagreement(*config, g); !problem.empty())
      throw fail(fmt::format("{}: {}", config->source, problem));
  } else {
    const CodecConfig& release = release_codec_config();
    if (const std::string problem = encoder_disagreement(release, g); !problem.empty())
      throw fail(
          fmt::format("HuBERT's num_attention_heads is in no tensor shape (nor its conv_stride, "
                      "layer_norm_eps and hidden_act, "
                      "encoder_semantic's block_dilations, the sample rates and downsample_factor), and the "
                      "tensors are not {}'s "
                      "(its {}); place {} (HiggsAudioV2TokenizerConfig.to_dict()) beside the checkpoint",
                      release.source, problem, kCodecConfigFile));
    config = release;
  }
  const CodecConfig& c = *config;
  for (std::size_t i = 0; i < g.features.size(); ++i) g.features[i].stride = c.semantic.conv_stride[i];
  g.heads = c.semantic.num_attention_heads;
  g.layer_norm_eps = static_cast<float>(c.semantic.layer_norm_eps);
  for (auto& b : g.semantic_blocks) b.unit_dilations = c.block_dilations;
  g.sample_rate = c.sample_rate;
  g.semantic_rate = c.semantic_sample_rate;
  g.semantic_downsample = c.semantic_downsample_factor();
  g.config_source = c.source;
}

void CodecEncoder::load() {
  const EncoderGeometry& g = geometry_;
  w_ = {};
  auto read = [&](const std::string& name) { return to_f32(weights_->view(prefix_ + name)); };
  auto read_conv_weight = [&](const std::string& base) -> std::pair<std::vector<float>, Shape> {
    const auto it = std::find_if(weight_norm_.begin(), weight_norm_.end(), [&](const auto& e) { return e.first == base; });
    if (it == weight_norm_.end()) {
      const TensorView v = weights_->view(prefix_ + base + ".weight");
      return {to_f32(v), v.shape};
    }
    // Weight norm: w = g * v / ||v||, the norm over every dim but the one g spans (dim 0 for a
    // [out, 1, 1] g, dim 2 for HuBERT's [1, 1, kernel]).
    const TensorView vv = weights_->view(prefix_ + it->second.second);
    const TensorView gv = weights_->view(prefix_ + it->second.first);
    std::vector<float> v = to_f32(vv);
    const std::vector<float> gs = to_f32(gv);
    const Shape s = vv.shape;
    const std::int64_t O = s[0], I = s[1], K = s[2];
    const bool over_kernel = gv.shape == Shape{1, 1, K};
    if (over_kernel) {
      for (std::int64_t k = 0; k < K; ++k) {
        double sum = 0.0;
        for (std::int64_t o = 0; o < O; ++o)
          for (std::int64_t i = 0; i < I; ++i) sum += static_cast<double>(v[(o * I + i) * K + k]) * v[(o * I + i) * K + k];
        const float scale = gs[k] / static_cast<float>(std::sqrt(sum));
        for (std::int64_t o = 0; o < O; ++o)
          for (std::int64_t i = 0; i < I; ++i) v[(o * I + i) * K + k] *= scale;
      }
    } else {
      for (std::int64_t o = 0; o < O; ++o) {
        double sum = 0.0;
        for (std::int64_t i = 0; i < I * K; ++i) sum += static_cast<double>(v[o * I * K + i]) * v[o * I * K + i];
        const float scale = gs[o] / static_cast<float>(std::sqrt(sum));
        for (std::int64_t i = 0; i < I * K; ++i) v[o * I * K + i] *= scale;
      }
    }
    return {std::move(v), s};
  };
  auto load_conv = [&](const std::string& base, std::int64_t stride, std::int64_t dilation, std::int64_t padding,
                       bool bias) {
    auto [raw, shape] = read_conv_weight(base);
    Conv c;
    c.out = shape[0];
    c.in = shape[1];
    c.kernel = shape[2];
    c.stride = stride;
    c.dilation = dilation;
    c.padding = padding;
    c.packed.resize(raw.size());
    ops::pack_conv1d_weight(raw.data(), c.packed.data(), ops::Conv1dShape{1, c.in, c.out, c.kernel, stride, 0, dilation});
    if (bias) c.bias = read(base + ".bias");
    return c;
  };

  const std::string ac = "acoustic_encoder.";
  w_.acoustic_conv1 = load_conv(ac + "conv1", 1, 1, g.acoustic_conv1_kernel / 2, true);
  for (std::size_t b = 0; b < g.acoustic_blocks.size(); ++b) {
    const auto& geo = g.acoustic_blocks[b];
    const std::string base = fmt::format("{}block.{}.", ac, b);
    EncoderWeights::AcousticBlock block;
    for (int u = 0; u < 3; ++u) {
      const std::string unit = fmt::format("{}res_unit{}.", base, u + 1);
      EncoderWeights::Unit w;
      w.alpha1 = read(unit + "snake1.alpha");
      w.alpha2 = read(unit + "snake2.alpha");
      const std::int64_t d = kUnitDilations[u];
      w.conv1 = load_conv(unit + "conv1", 1, d, (geo.unit_kernel - 1) * d / 2, true);
      w.conv2 = load_conv(unit + "conv2", 1, 1, 0, true);
      block.units.push_back(std::move(w));
    }
    block.alpha = read(base + "snake1.alpha");
    block.down = load_conv(base + "conv1", geo.stride, 1, (geo.stride + 1) / 2, true);  // padding ceil(stride / 2)
    w_.acoustic_blocks.push_back(std::move(block));
  }
  w_.acoustic_alpha = read(ac + "snake1.alpha");
  w_.acoustic_conv2 = load_conv(ac + "conv2", 1, 1, g.acoustic_out_kernel / 2, true);

  const std::string hb = "semantic_model.";
  for (std::size_t i = 0; i < g.features.size(); ++i) {
    const auto& f = g.features[i];
    const std::string base = fmt::format("{}feature_extractor.conv_layers.{}.", hb, i);
    w_.features.push_back(load_conv(base + "conv", f.stride, 1, 0, f.bias));
    w_.feature_norm_w.push_back(f.norm ? read(base + "layer_norm.weight") : std::vector<float>{});
    w_.feature_norm_b.push_back(f.norm ? read(base + "layer_norm.bias") : std::vector<float>{});
  }
  w_.proj_ln_w = read(hb + "feature_projection.layer_norm.weight");
  w_.proj_ln_b = read(hb + "feature_projection.layer_norm.bias");
  w_.proj_w = read(hb + "feature_projection.projection.weight");
  w_.proj_b = read(hb + "feature_projection.projection.bias");
  const std::string enc = hb + "encoder.";
  w_.pos_w = read_conv_weight(enc + "pos_conv_embed.conv").first;
  w_.pos_b = read(enc + "pos_conv_embed.conv.bias");
  w_.enc_ln_w = read(enc + "layer_norm.weight");
  w_.enc_ln_b = read(enc + "layer_norm.bias");
  for (std::int64_t l = 0; l < g.layers; ++l) {
    const std::string base = fmt::format("{}layers.{}.", enc, l);
    EncoderWeights::Layer L;
    for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
      const auto w = read(fmt::format("{}attention.{}.weight", base, p));
      const auto b = read(fmt::format("{}attention.{}.bias", base, p));
      L.qkv_w.insert(L.qkv_w.end(), w.begin(), w.end());
      L.qkv_b.insert(L.qkv_b.end(), b.begin(), b.end());
    }
    L.out_w = read(base + "attention.out_proj.weight");
    L.out_b = read(base + "attention.out_proj.bias");
    L.ln1_w = read(base + "layer_norm.weight");
    L.ln1_b = read(base + "layer_norm.bias");
    L.ff1_w = read(base + "feed_forward.intermediate_dense.weight");
    L.ff1_b = read(base + "feed_forward.intermediate_dense.bias");
    L.ff2_w = read(base + "feed_forward.output_dense.weight");
    L.ff2_b = read(base + "feed_forward.output_dense.bias");
    L.ln2_w = read(base + "final_layer_norm.weight");
    L.ln2_b = read(base + "final_layer_norm.bias");
    w_.layers.push_back(std::move(L));
  }

  const std::string es = "encoder_semantic.";
  w_.semantic_conv = load_conv(es + "conv", 1, 1, g.semantic_conv_kernel / 2, false);
  for (std::size_t b = 0; b < g.semantic_blocks.size(); ++b) {
    const auto& geo = g.semantic_blocks[b];
    const std::string base = fmt::format("{}conv_blocks.{}.", es, b);
    EncoderWeights::SemanticBlock block;
    for (std::int64_t u = 0; u < geo.units; ++u) {
      const std::string unit = fmt::format("{}res_units.{}.", base, u);
      EncoderWeights::SemanticUnit su;
      const std::int64_t d = geo.unit_dilations[static_cast<std::size_t>(u)];
      su.conv1 = load_conv(unit + "conv1", 1, d, (geo.unit_kernel - 1) / 2 * d, false);
      su.conv2 = load_conv(unit + "conv2", 1, 1, 0, false);
      block.units.push_back(std::move(su));
    }
    block.conv = load_conv(base + "conv", geo.stride, 1, (geo.kernel - 1) / 2, true);
    w_.semantic_blocks.push_back(std::move(block));
  }
  w_.fc_w = read("fc.weight");
  w_.fc_b = read("fc.bias");
  for (std::int64_t q = 0; q < g.num_quantizers; ++q) {
    const std::string base = fmt::format("quantizer.quantizers.{}.", q);
    EncoderWeights::Quantizer Q;
    Q.in_w = read(base + "project_in.weight");
    Q.in_b = read(base + "project_in.bias");
    Q.embed = read(base + "codebook.embed");
    Q.embed_sq.resize(static_cast<std::size_t>(g.codebook_size));
    for (std::int64_t c = 0; c < g.codebook_size; ++c) {
      float s = 0.0f;
      for (std::int64_t d = 0; d < g.codebook_dim; ++d) s += Q.embed[c * g.codebook_dim + d] * Q.embed[c * g.codebook_dim + d];
      Q.embed_sq[static_cast<std::size_t>(c)] = s;
    }
    const Activation table = linear(Q.embed, g.codebook_size, read(base + "project_out.weight"),
                                    read(base + "project_out.bias"), g.hidden, g.codebook_dim);
    Q.table.assign(table.begin(), table.end());
    w_.quantizers.push_back(std::move(Q));
  }
  loaded_ = true;
}

void check_encode_input(const EncoderGeometry& g, const float* samples, std::int64_t n, const std::string& what) {
  if (n < 1) throw InputError(fmt::format("{}: no audio samples", what));
  if (n > max_encode_samples(g))
    throw InputError(fmt::format("{}: {:.1f} s of audio; the encoder takes at most {} s", what,
                                 static_cast<double>(n) / static_cast<double>(g.sample_rate),
                                 kMaxEncodeSeconds));
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(samples[i]))
      throw InputError(fmt::format("{}: sample {} is {} (the audio must be finite)", what, i, samples[i]));
  const kernels::cpu::SincResampler resampler(g.sample_rate, g.semantic_rate);
  if (g.hubert_frames(resampler.output_length(n)) < 1 || g.acoustic_frames(n) < 1)
    throw InputError(fmt::format("{}: {} samples are too short to encode", what, n));
}

EncodeResult CodecEncoder::encode(const float* samples, std::int64_t n, DiagnosticHook* hook) const {
  if (!loaded_) throw std::logic_error("higgs codec encoder: encode() before load()");
  const EncoderGeometry& g = geometry_;
  check_encode_input(g, samples, n, "codec encoder input");
  const std::int64_t H = g.semantic;

  // --- semantic branch: at HuBERT's rate, padded by 160 both sides
  const kernels::cpu::SincResampler resampler(g.sample_rate, g.semantic_rate);
  const std::vector<float> resampled = resampler.run(samples, n);
  tap(hook, "resampled", resampled, static_cast<std::int64_t>(resampled.size()), 1);
  Activation x(resampled.size() + 2 * kSemanticPad, 0.0f);
  std::copy(resampled.begin(), resampled.end(), x.begin() + kSemanticPad);
  std::int64_t steps = static_cast<std::int64_t>(x.size());
  for (std::size_t i = 0; i < g.features.size(); ++i) {
    const auto& f = g.features[i];
    x = run_conv(x, steps, w_.features[i], &steps);
    if (f.norm && g.feature_layer_norm) {
      ops::layer_norm(x.data(), w_.feature_norm_w[i].data(), w_.feature_norm_b[i].data(), x.data(), steps,
                      f.out_channels, kFeatureNormEps);
    } else if (f.norm) {
      ops::per_channel_norm(x.data(), w_.feature_norm_w[i].data(), w_.feature_norm_b[i].data(), x.data(),
                            steps, f.out_channels, kFeatureNormEps);
    }
    ops::gelu_erf(x.data(), x.data(), static_cast<std::int64_t>(x.size()));
  }
  const std::int64_t T = steps, C = g.features.back().out_channels;
  tap(hook, "hubert.features", x, T, C);
  ops::layer_norm(x.data(), w_.proj_ln_w.data(), w_.proj_ln_b.data(), x.data(), T, C, g.layer_norm_eps);
  Activation h = linear(x, T, w_.proj_w, w_.proj_b, H, C);
  {
    // positional conv embedding: grouped conv, padding kernel / 2, the last step dropped for an
    // even kernel (HubertSamePadLayer), GELU; added to the input.
    const kernels::cpu::GroupedConv1d pos(w_.pos_w.data(), H, H, g.pos_kernel, g.pos_groups, g.pos_kernel / 2, w_.pos_b);
    Activation p(static_cast<std::size_t>(pos.out_length(T) * H));
    pos.run(h.data(), p.data(), T);
    ops::gelu_erf(p.data(), p.data(), T * H);  // only the first T steps are used
    ops::add_inplace(h.data(), p.data(), T * H);
  }
  ops::layer_norm(h.data(), w_.enc_ln_w.data(), w_.enc_ln_b.data(), h.data(), T, H, g.layer_norm_eps);
  Activation mean = h;  // the sum of the hidden states, then their mean
  tap(hook, "hubert.hidden.0", h, T, H);
  const std::int64_t head_dim = H / g.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  Activation q(static_cast<std::size_t>(T * H)), k(q.size()), v(q.size()), attn(q.size());
  for (std::int64_t l = 0; l < g.layers; ++l) {
    const auto& L = w_.layers[static_cast<std::size_t>(l)];
    const Activation qkv = linear(h, T, L.qkv_w, L.qkv_b, 3 * H, H);
    for (std::int64_t t = 0; t < T; ++t) {
      std::copy_n(qkv.data() + t * 3 * H, H, q.data() + t * H);
      std::copy_n(qkv.data() + t * 3 * H + H, H, k.data() + t * H);
      std::copy_n(qkv.data() + t * 3 * H + 2 * H, H, v.data() + t * H);
    }
    ops::attention_bidirectional(q.data(), k.data(), v.data(), attn.data(), T, g.heads, head_dim, scale);
    Activation o = linear(attn, T, L.out_w, L.out_b, H, H);
    ops::add_inplace(h.data(), o.data(), T * H);
    ops::layer_norm(h.data(), L.ln1_w.data(), L.ln1_b.data(), h.data(), T, H, g.layer_norm_eps);
    Activation ff = linear(h, T, L.ff1_w, L.ff1_b, g.intermediate, H);
    ops::gelu_erf(ff.data(), ff.data(), static_cast<std::int64_t>(ff.size()));
    const Activation ff2 = linear(ff, T, L.ff2_w, L.ff2_b, H, g.intermediate);
    ops::add_inplace(h.data(), ff2.data(), T * H);
    ops::layer_norm(h.data(), L.ln2_w.data(), L.ln2_b.data(), h.data(), T, H, g.layer_norm_eps);
    tap(hook, fmt::format("hubert.hidden.{}", l + 1), h, T, H);
    ops::add_inplace(mean.data(), h.data(), T * H);
  }
  const std::int64_t f = g.downsample();
  const std::int64_t frames = (T + f - 1) / f;  // x[:, ::f]
  Activation sem(static_cast<std::size_t>(frames * H));
  const float inv = 1.0f / static_cast<float>(g.layers + 1);
  for (std::int64_t t = 0; t < frames; ++t)
    for (std::int64_t c = 0; c < H; ++c) sem[t * H + c] = mean[(t * f) * H + c] * inv;
  tap(hook, "semantic_features", sem, frames, H);

  // encoder_semantic
  std::int64_t s_steps = frames;
  Activation e = run_conv(sem, s_steps, w_.semantic_conv, &s_steps);
  for (std::size_t b = 0; b < w_.semantic_blocks.size(); ++b) {
    const auto& block = w_.semantic_blocks[b];
    for (const auto& unit : block.units) {
      Activation y(e.size());
      ops::elu(e.data(), y.data(), static_cast<std::int64_t>(e.size()));
      y = run_conv(y, s_steps, unit.conv1, nullptr);
      ops::elu(y.data(), y.data(), static_cast<std::int64_t>(y.size()));
      y = run_conv(y, s_steps, unit.conv2, nullptr);
      ops::add_inplace(e.data(), y.data(), static_cast<std::int64_t>(e.size()));
    }
    e = run_conv(e, s_steps, block.conv, &s_steps);
  }
  tap(hook, "e_semantic", e, s_steps, H);

  // --- acoustic branch, padded by hop / 2 when its length would not match
  Activation a;
  std::int64_t a_steps = n;
  const std::int64_t pad = g.acoustic_frames(n) != s_steps ? g.hop() / 2 : 0;
  a.assign(static_cast<std::size_t>(n + 2 * pad), 0.0f);
  std::copy_n(samples, n, a.begin() + pad);
  a_steps = n + 2 * pad;
  a = run_conv(a, a_steps, w_.acoustic_conv1, &a_steps);
  for (std::size_t b = 0; b < w_.acoustic_blocks.size(); ++b) {
    const auto& geo = g.acoustic_blocks[b];
    const auto& block = w_.acoustic_blocks[b];
    const std::int64_t c = geo.in_channels;
    Activation y(a.size());
    for (const auto& unit : block.units) {
      ops::snake(a.data(), unit.alpha1.data(), y.data(), a_steps, c);
      Activation z = run_conv(y, a_steps, unit.conv1, nullptr);
      ops::snake(z.data(), unit.alpha2.data(), z.data(), a_steps, c);
      z = run_conv(z, a_steps, unit.conv2, nullptr);
      ops::add_inplace(a.data(), z.data(), static_cast<std::int64_t>(a.size()));  // same length: no crop
    }
    ops::snake(a.data(), block.alpha.data(), a.data(), a_steps, c);
    a = run_conv(a, a_steps, block.down, &a_steps);
  }
  ops::snake(a.data(), w_.acoustic_alpha.data(), a.data(), a_steps, g.acoustic_blocks.back().out_channels);
  a = run_conv(a, a_steps, w_.acoustic_conv2, &a_steps);
  tap(hook, "e_acoustic", a, a_steps, g.acoustic);
  if (a_steps != s_steps)
    throw InputError(fmt::format("codec encoder input: {} samples give {} acoustic and {} semantic frames, which cannot be joined",
                                 n, a_steps, s_steps));

  // --- fc over cat(acoustic, semantic), then residual VQ
  const std::int64_t F = a_steps, D = g.hidden;
  Activation cat(static_cast<std::size_t>(F * D));
  for (std::int64_t t = 0; t < F; ++t) {
    std::copy_n(a.data() + t * g.acoustic, g.acoustic, cat.data() + t * D);
    std::copy_n(e.data() + t * H, H, cat.data() + t * D + g.acoustic);
  }
  Activation residual = linear(cat, F, w_.fc_w, w_.fc_b, D, D);
  tap(hook, "embeddings", residual, F, D);

  EncodeResult r;
  r.frames = F;
  r.num_quantizers = g.num_quantizers;
  r.codes.assign(static_cast<std::size_t>(F * g.num_quantizers), 0);
  r.gaps.assign(r.codes.size(), 0.0f);
  const std::int64_t S = g.codebook_size, CD = g.codebook_dim;
  Activation dots(static_cast<std::size_t>(F * S));
  for (std::int64_t qi = 0; qi < g.num_quantizers; ++qi) {
    const auto& Q = w_.quantizers[static_cast<std::size_t>(qi)];
    tap(hook, fmt::format("residual.{}", qi), residual, F, D);
    const Activation p = linear(residual, F, Q.in_w, Q.in_b, CD, D);
    tap(hook, fmt::format("projected.{}", qi), p, F, CD);
    ops::linear(p.data(), Q.embed.data(), dots.data(), F, S, CD);
    for (std::int64_t t = 0; t < F; ++t) {
      float xx = 0.0f;
      for (std::int64_t d = 0; d < CD; ++d) xx += p[t * CD + d] * p[t * CD + d];
      // -(|x|^2 - 2 x.e + |e|^2) in transformers' order, float32; the first maximum wins.
      float best = -std::numeric_limits<float>::infinity(), second = best;
      std::int64_t arg = 0;
      for (std::int64_t c = 0; c < S; ++c) {
        const float score = -((xx - 2.0f * dots[t * S + c]) + Q.embed_sq[static_cast<std::size_t>(c)]);
        if (score > best) {
          second = best;
          best = score;
          arg = c;
        } else if (score > second) {
          second = score;
        }
      }
      r.codes[static_cast<std::size_t>(t * g.num_quantizers + qi)] = arg;
      r.gaps[static_cast<std::size_t>(t * g.num_quantizers + qi)] = best - second;
      const float* row = Q.table.data() + arg * D;
      for (std::int64_t d = 0; d < D; ++d) residual[t * D + d] -= row[d];
    }
  }
  tap(hook, "gap", r.gaps, F, g.num_quantizers);
  return r;
}

namespace {

class HiggsCodeEncoder : public CodeEncoder {
 public:
  HiggsCodeEncoder(std::unique_ptr<CodecEncoder> encoder, const Device& device)
      : encoder_(std::move(encoder)), device_(device) {}

  std::int64_t num_codebooks() const override { return encoder_->geometry().num_quantizers; }
  std::int64_t codebook_size() const override { return encoder_->geometry().codebook_size; }
  int sample_rate() const override { return static_cast<int>(encoder_->geometry().sample_rate); }
  std::int64_t max_samples() const override { return max_encode_samples(encoder_->geometry()); }
  std::string summary() const override { return fmt::format("{}; float32 on {}", encoder_->geometry().summary(), device_.str()); }
  std::vector<TensorRequirement> requirements() const override { return encoder_->requirements(); }
  void load() override {
    encoder_->load();
#ifdef ZOO_WITH_CUDA
    if (!device_.is_cpu()) {
      runner_ = make_cuda_codec_encoder_runner(encoder_->geometry(), encoder_->weights(), device_.index);
      encoder_->release_weights();  // on the device now
    }
#endif
  }
  EncodedFrames encode(std::span<const float> samples, const std::string& what, DiagnosticHook* hook) const override {
    const auto n = static_cast<std::int64_t>(samples.size());
    check_encode_input(encoder_->geometry(), samples.data(), n, what);
    EncodeResult r;
    try {
      if (runner_) {
        const std::lock_guard<std::mutex> lock(mutex_);  // the runner's buffers and stream
        r = runner_->encode(samples.data(), n, hook);
      } else {
        r = encoder_->encode(samples.data(), n, hook);
      }
    } catch (const InputError& e) {  // what the input check could not foresee still names the input
      throw InputError(fmt::format("{}: {}", what, e.what()));
    }
    return {r.frames, r.num_quantizers, std::move(r.codes), std::move(r.gaps)};
  }

 private:
  std::unique_ptr<CodecEncoder> encoder_;
  Device device_;
  std::unique_ptr<CodecEncoderRunner> runner_;
  mutable std::mutex mutex_;
};

}  // namespace

std::unique_ptr<CodeEncoder> make_code_encoder(std::shared_ptr<const WeightSource> weights, const std::string& prefix,
                                               std::int64_t lm_codebooks, std::int64_t lm_codebook_size,
                                               const Device& device) {
  auto encoder = std::make_unique<CodecEncoder>(weights, prefix);
  check_codec_fits("codec encoder", *weights, encoder->geometry().num_quantizers, encoder->geometry().codebook_size,
                   lm_codebooks, lm_codebook_size, device);
  return std::make_unique<HiggsCodeEncoder>(std::move(encoder), device);
}

bool has_code_encoder(const WeightSource& weights, const std::string& prefix) {
  return weights.info(prefix + "acoustic_encoder.conv1.weight").has_value() &&
         weights.info(prefix + "semantic_model.encoder.layers.0.attention.q_proj.weight").has_value() &&
         weights.info(prefix + "quantizer.quantizers.0.project_in.weight").has_value();
}

}  // namespace zoo::higgs
