// The Higgs codec decoder on the CPU in float32, channels-last ([steps, channels]) throughout so
// every convolution is one GEMM (kernels/conv_cpu.hpp). Weights of any stored float dtype are
// widened to float32 at load; weight-normalized convolutions (g, v) are folded the way the
// transformers converter folds them, w = g * v / ||v|| with the norm over all dims but the first.
#include "codec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "higgs_config.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"
#include "zoo/kernels/conv_cpu.hpp"
#include "zoo/kernels/cpu_ops.hpp"

namespace zoo::higgs {
namespace {

namespace ops = zoo::kernels::cpu;

// The dilations of the three residual units of every DAC decoder block: fixed by the architecture
// (DacDecoderBlock), not recorded in any tensor shape.
constexpr std::int64_t kUnitDilations[] = {1, 3, 9};

void tap(DiagnosticHook* hook, const std::string& name, const std::vector<float>& data, std::int64_t rows,
         std::int64_t cols) {
  if (!hook || !hook->wants(name)) return;
  hook->record(name, TensorView{data.data(), DType::F32, {rows, cols}, Device{}});
}

// What the host can still give without swapping: MemAvailable of /proc/meminfo (Linux); when that
// cannot be read, no limit (the allocation itself then reports a failure).
std::uint64_t available_host_memory() {
  std::string text;
  try {
    // Through the input layer like every other read (a regular file to stat, though of size 0).
    text = read_text_file("/proc/meminfo", "the kernel's memory statistics", std::size_t{1} << 20);
  } catch (const InputError&) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  for (std::size_t start = 0; start < text.size();) {
    const auto end = std::min(text.find('\n', start), text.size());
    unsigned long long kib = 0;
    if (std::sscanf(text.substr(start, end - start).c_str(), "MemAvailable: %llu kB", &kib) == 1) return kib * 1024;
    start = end + 1;
  }
  return std::numeric_limits<std::uint64_t>::max();
}

}  // namespace

std::string code_problem(std::int64_t value, std::int64_t t, std::int64_t q, std::int64_t codebook_size,
                         bool boc_eoc) {
  if (value < 0) return fmt::format("codes[{}][{}] = {} is negative", t, q, value);
  if (value < codebook_size + (boc_eoc ? 2 : 0)) return {};
  if (!boc_eoc) return fmt::format("codes[{}][{}] = {} is outside [0, {})", t, q, value, codebook_size);
  return fmt::format("codes[{}][{}] = {} is outside [0, {}) and not BOC ({}) or EOC ({})", t, q, value, codebook_size,
                     codebook_size, codebook_size + 1);
}

void check_codes(const std::int64_t* codes, std::int64_t frames, std::int64_t K, std::int64_t codebook_size) {
  if (frames < 1) throw InputError("codec: no code frames to decode");
  for (std::int64_t i = 0; i < frames * K; ++i)
    if (std::string problem = code_problem(codes[i], i / K, i % K, codebook_size, true); !problem.empty())
      throw InputError(problem);
}

std::int64_t CodecGeometry::samples_per_frame() const {
  std::int64_t n = 1;
  for (const auto& b : blocks) n *= b.stride;
  return n;
}

std::int64_t CodecGeometry::working_bytes_per_frame() const {
  std::int64_t unit_kernel = 1;
  for (const auto& b : blocks)
    for (const auto& u : b.units) unit_kernel = std::max(unit_kernel, u.kernel);
  // Before the blocks: the RVQ sum, fc2's output and conv1's columns and output.
  std::int64_t floats = latent + decoder_input * (1 + conv1_kernel) + conv1_channels;
  std::int64_t steps = 1, channels = conv1_channels;
  for (const auto& b : blocks) {
    const std::int64_t out_steps = steps * b.stride;
    // The block's input, the transposed convolution's columns, and at the output length three
    // activations plus a residual unit's im2col columns.
    floats = std::max(floats, steps * b.in_channels + steps * b.kernel * b.out_channels +
                                  out_steps * b.out_channels * (3 + unit_kernel));
    steps = out_steps;
    channels = b.out_channels;
  }
  floats = std::max(floats, steps * channels * (2 + out_kernel) + steps);  // conv2 and the waveform
  return floats * static_cast<std::int64_t>(sizeof(float));
}

std::int64_t CodecGeometry::context_frames() const {
  // One side of the receptive field, traced back from the waveform to the frames, in frames.
  double frames = static_cast<double>(conv1_kernel - 1) / 2.0;
  double rate = 1.0;  // steps per frame at the current stage
  for (const auto& b : blocks) {
    // A transposed convolution's output step reads input steps within kernel / stride of it.
    frames += std::ceil(static_cast<double>(b.kernel) / static_cast<double>(b.stride)) / rate;
    rate *= static_cast<double>(b.stride);
    for (const auto& u : b.units) frames += static_cast<double>(u.dilation * (u.kernel - 1)) / 2.0 / rate;
  }
  frames += static_cast<double>(out_kernel - 1) / 2.0 / rate;
  return static_cast<std::int64_t>(std::ceil(frames)) + 1;
}

std::vector<float> decode_in_pieces(const std::function<std::vector<float>(const std::int64_t*, std::int64_t)>& decode,
                                    const std::int64_t* codes, std::int64_t frames, std::int64_t K,
                                    std::int64_t samples_per_frame, std::int64_t piece, std::int64_t context) {
  if (piece < 1 || context < 0) throw std::invalid_argument("decode_in_pieces: piece must be >= 1, context >= 0");
  std::vector<float> wave(static_cast<std::size_t>(frames * samples_per_frame));
  for (std::int64_t begin = 0; begin < frames; begin += piece) {
    const std::int64_t end = std::min(frames, begin + piece);
    const std::int64_t lo = std::max<std::int64_t>(0, begin - context), hi = std::min(frames, end + context);
    const std::vector<float> part = decode(codes + lo * K, hi - lo);
    if (static_cast<std::int64_t>(part.size()) != (hi - lo) * samples_per_frame)
      throw std::logic_error("decode_in_pieces: a piece decoded to the wrong length");
    std::copy_n(part.begin() + (begin - lo) * samples_per_frame, (end - begin) * samples_per_frame,
                wave.begin() + begin * samples_per_frame);
  }
  return wave;
}

void check_decode_memory(const CodecGeometry& g, std::int64_t frames, std::uint64_t available_bytes,
                         const std::string& where) {
  const double need = static_cast<double>(frames) * static_cast<double>(g.working_bytes_per_frame());
  if (need <= static_cast<double>(available_bytes)) return;
  const double minutes =
      static_cast<double>(frames * g.samples_per_frame()) / static_cast<double>(g.sample_rate) / 60.0;
  throw InputError(fmt::format("{}: {} frames ({:.1f} min of audio) need about {:.1f} GB of working memory to decode at "
                               "once, more than the {:.1f} GB available; decode the codes in shorter pieces",
                               where, frames, minutes, need / 1e9, static_cast<double>(available_bytes) / 1e9));
}

std::string CodecGeometry::summary() const {
  std::string strides, widths = fmt::format("{}", conv1_channels);
  for (const auto& b : blocks) {
    strides += fmt::format("{}{}", strides.empty() ? "" : "x", b.stride);
    widths += fmt::format("->{}", b.out_channels);
  }
  return fmt::format(
      "{} quantizers of {} x {}, latent {}, fc2 -> {}, strides {} ({} samples per frame), widths {}, "
      "{} Hz; config: {}",
      num_quantizers, codebook_size, codebook_dim, latent, decoder_input, strides.empty() ? "none" : strides,
      samples_per_frame(), widths, sample_rate, config_source);
}

namespace {

// The first field of `c` that disagrees with the decoder's tensor-derived geometry `g` (empty when
// none).
std::string decoder_disagreement(const CodecConfig& c, const CodecGeometry& g) {
  ConfigCheck k;
  k.equal("codebook_size", c.codebook_size, g.codebook_size, "quantizer codebook rows");
  k.equal("codebook_dim", c.codebook_dim, g.codebook_dim, "quantizer codebook width");
  k.equal("target_bandwidths", c.num_quantizers(), g.num_quantizers,
          "quantizers: the config's count is 1000 x the last bandwidth // (frame rate x codebook bits)");
  k.equal("acoustic_model_config.hidden_size", c.acoustic.hidden_size, g.decoder_input, "fc2's output width");
  k.equal("semantic_model_config.hidden_size", c.semantic.hidden_size, g.latent - g.decoder_input,
          "project_out's width minus the acoustic hidden size");
  k.equal("acoustic_model_config.decoder_hidden_size", c.acoustic.decoder_hidden_size, g.conv1_channels,
          "acoustic_decoder.conv1's width");
  std::vector<std::int64_t> strides;
  for (const auto& b : g.blocks) strides.push_back(b.stride);
  k.equal("acoustic_model_config.upsampling_ratios", c.acoustic.upsampling_ratios, strides,
          "acoustic_decoder.block.{i}.conv_t1 kernels of 2 x the ratio");
  return k.first;
}

}  // namespace

Codec::Codec(std::shared_ptr<const WeightSource> weights, std::string prefix,
             std::optional<CodecConfig> config)
    : weights_(std::move(weights)), prefix_(std::move(prefix)) {
  const WeightSource& src = *weights_;
  const std::string where = fmt::format("codec in {} (tensors under '{}')", src.describe(), prefix_);
  auto fail = [&](const std::string& what) { return InputError(fmt::format("{}: {}", where, what)); };
  auto info = [&](const std::string& name) { return src.info(prefix_ + name); };
  auto require = [&](const std::string& name, DType) -> Shape {
    auto i = info(name);
    if (!i) throw fail(fmt::format("'{}' is missing", name));
    if (i->dtype != DType::F32 && i->dtype != DType::BF16 && i->dtype != DType::F16)
      throw fail(fmt::format("'{}' is {}; expected a float dtype (BF16, F16, F32)", name, dtype_name(i->dtype)));
    requirements_.push_back({prefix_ + name, i->shape, {DType::BF16, DType::F16, DType::F32}, false});
    return i->shape;
  };
  auto expect = [&](const std::string& name, const Shape& shape, const std::string& why) {
    const Shape got = require(name, DType::F32);
    if (got != shape) throw fail(fmt::format("'{}' has shape {}, expected {} ({})", name, shape_str(got), shape_str(shape), why));
  };
  // A per-channel Snake alpha: torch stores [1, C, 1].
  auto expect_alpha = [&](const std::string& name, std::int64_t channels, const std::string& why) {
    const Shape got = require(name, DType::F32);
    if (numel(got) != channels || got.empty() || got.size() > 3)
      throw fail(fmt::format("'{}' has shape {}, expected [1, {}, 1] ({})", name, shape_str(got), channels, why));
  };
  // A convolution weight `base`.weight, or its weight-norm pair, of rank 3.
  auto conv_weight = [&](const std::string& base) -> Shape {
    StoredWeight w;
    if (info(base + ".weight")) {
      w.plain = prefix_ + base + ".weight";
      w.shape = require(base + ".weight", DType::F32);
    } else {
      for (const auto& [g, v] : {std::pair<std::string, std::string>{".weight_g", ".weight_v"},
                                 {".parametrizations.weight.original0", ".parametrizations.weight.original1"}}) {
        if (info(base + g) && info(base + v)) {
          w.g = prefix_ + base + g;
          w.v = prefix_ + base + v;
          w.shape = require(base + v, DType::F32);
          const Shape gs = require(base + g, DType::F32);
          if (w.shape.empty() || numel(gs) != w.shape[0])
            throw fail(fmt::format("'{}{}' has shape {}, expected {} magnitudes (one per row of '{}{}' {})", base, g,
                                   shape_str(gs), w.shape.empty() ? 0 : w.shape[0], base, v, shape_str(w.shape)));
          break;
        }
      }
      if (w.g.empty()) throw fail(fmt::format("'{}.weight' is missing (neither plain nor weight-normalized)", base));
    }
    if (w.shape.size() != 3) throw fail(fmt::format("'{}.weight' has shape {}, expected rank 3", base, shape_str(w.shape)));
    conv_weights_.emplace_back(base, w);
    return w.shape;
  };

  CodecGeometry& g = geometry_;
  // Quantizers 0.. as long as their codebook exists; all alike.
  for (std::int64_t q = 0;; ++q) {
    const std::string base = fmt::format("quantizer.quantizers.{}.", q);
    if (!info(base + "codebook.embed")) break;
    const Shape embed = require(base + "codebook.embed", DType::F32);
    const Shape proj = require(base + "project_out.weight", DType::F32);
    if (embed.size() != 2 || proj.size() != 2)
      throw fail(fmt::format("quantizer {}: codebook.embed {} and project_out.weight {} must be matrices", q,
                             shape_str(embed), shape_str(proj)));
    if (q == 0) {
      g.codebook_size = embed[0];
      g.codebook_dim = embed[1];
      g.latent = proj[0];
    }
    if (embed != Shape{g.codebook_size, g.codebook_dim})
      throw fail(fmt::format("quantizer {}: codebook.embed is {}, quantizer 0's is [{}, {}]", q, shape_str(embed),
                             g.codebook_size, g.codebook_dim));
    if (proj != Shape{g.latent, g.codebook_dim})
      throw fail(fmt::format("quantizer {}: project_out.weight is {}, expected [{}, {}] (latent x codebook dim {})", q,
                             shape_str(proj), g.latent, g.codebook_dim, g.codebook_dim));
    expect(base + "project_out.bias", {g.latent}, "project_out's output width");
    ++g.num_quantizers;
  }
  if (g.num_quantizers == 0) throw fail("no 'quantizer.quantizers.0.codebook.embed': the checkpoint holds no codec decoder");
  if (g.codebook_size < 1 || g.codebook_dim < 1 || g.latent < 1) throw fail("empty codebook or projection");

  const Shape fc2 = require("fc2.weight", DType::F32);
  if (fc2.size() != 2 || fc2[1] != g.latent)
    throw fail(fmt::format("'fc2.weight' has shape {}, expected [N, {}] (input = project_out's width {})", shape_str(fc2),
                           g.latent, g.latent));
  g.decoder_input = fc2[0];
  expect("fc2.bias", {g.decoder_input}, "fc2's output width");

  const std::string dec = "acoustic_decoder.";
  const Shape conv1 = conv_weight(dec + "conv1");
  if (conv1[1] != g.decoder_input || conv1[2] % 2 == 0)
    throw fail(fmt::format("'{}conv1.weight' has shape {}, expected [C, {}, odd kernel] (input = fc2's width {})", dec,
                           shape_str(conv1), g.decoder_input, g.decoder_input));
  g.conv1_channels = conv1[0];
  g.conv1_kernel = conv1[2];
  expect(dec + "conv1.bias", {g.conv1_channels}, "conv1's output width");

  std::int64_t channels = g.conv1_channels;
  for (std::int64_t b = 0;; ++b) {
    const std::string base = fmt::format("{}block.{}.", dec, b);
    if (!info(base + "conv_t1.weight") && !info(base + "conv_t1.weight_v") &&
        !info(base + "conv_t1.parametrizations.weight.original1"))
      break;
    CodecGeometry::Block block;
    const Shape up = conv_weight(base + "conv_t1");  // ConvTranspose1d: [in, out, kernel]
    if (up[0] != channels)
      throw fail(fmt::format("'{}conv_t1.weight' has shape {}: {} input channels, but the previous stage outputs {}",
                             base, shape_str(up), up[0], channels));
    if (up[2] < 2 || up[2] % 2 != 0)
      throw fail(fmt::format("'{}conv_t1.weight' has kernel {}: a DAC upsampling kernel is 2 x its stride, so it must be even",
                             base, up[2]));
    block.in_channels = up[0];
    block.out_channels = up[1];
    block.kernel = up[2];
    block.stride = up[2] / 2;
    expect_alpha(base + "snake1.alpha", block.in_channels, "the block's input width");
    expect(base + "conv_t1.bias", {block.out_channels}, "conv_t1's output width");
    for (std::int64_t u = 0; u < 3; ++u) {
      const std::string unit = fmt::format("{}res_unit{}.", base, u + 1);
      const std::int64_t c = block.out_channels;
      expect_alpha(unit + "snake1.alpha", c, "the block's output width");
      expect_alpha(unit + "snake2.alpha", c, "the block's output width");
      const Shape c1 = conv_weight(unit + "conv1");
      if (c1[0] != c || c1[1] != c || c1[2] % 2 == 0)
        throw fail(fmt::format("'{}conv1.weight' has shape {}, expected [{}, {}, odd kernel]", unit, shape_str(c1), c, c));
      expect(unit + "conv1.bias", {c}, "the block's output width");
      const Shape c2 = conv_weight(unit + "conv2");
      if (c2 != Shape{c, c, 1}) throw fail(fmt::format("'{}conv2.weight' has shape {}, expected [{}, {}, 1]", unit, shape_str(c2), c, c));
      expect(unit + "conv2.bias", {c}, "the block's output width");
      block.units.push_back({c1[2], kUnitDilations[u]});
    }
    channels = block.out_channels;
    g.blocks.push_back(std::move(block));
  }
  if (g.blocks.empty()) throw fail(fmt::format("no '{}block.0.conv_t1.weight': no upsampling blocks", dec));
  expect_alpha(dec + "snake1.alpha", channels, "the last block's output width");
  const Shape conv2 = conv_weight(dec + "conv2");
  if (conv2[0] != 1 || conv2[1] != channels || conv2[2] % 2 == 0)
    throw fail(fmt::format("'{}conv2.weight' has shape {}, expected [1, {}, odd kernel] (mono output from the last block's {} channels)",
                           dec, shape_str(conv2), channels, channels));
  g.out_kernel = conv2[2];
  expect(dec + "conv2.bias", {1}, "one output channel");

  if (!config) config = read_codec_config(src, prefix_ + "quantizer.quantizers.0.codebook.embed");
  if (config) {
    if (const std::string problem = decoder_disagreement(*config, g); !problem.empty())
      throw fail(fmt::format("{}: {}", config->source, problem));
  } else {
    const CodecConfig& release = release_codec_config();
    if (const std::string problem = decoder_disagreement(release, g); !problem.empty())
      throw fail(fmt::format(
          "the sample_rate is in no tensor shape, and the tensors are not {}'s (its {}); place {} "
          "(HiggsAudioV2TokenizerConfig.to_dict()) beside the checkpoint",
          release.source, problem, kCodecConfigFile));
    config = release;
  }
  g.sample_rate = config->sample_rate;
  g.config_source = config->source;
}

std::vector<TensorRequirement> Codec::requirements() const { return requirements_; }

std::vector<float> Codec::read(const std::string& name) const { return to_f32(weights_->view(name)); }

std::vector<float> Codec::read_weight(const StoredWeight& w) const {
  if (!w.plain.empty()) return read(w.plain);
  const std::vector<float> g = read(w.g);
  std::vector<float> v = read(w.v);
  const std::int64_t rows = w.shape[0], row = numel(w.shape) / rows;
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (std::int64_t i = 0; i < row; ++i) sum += static_cast<double>(v[r * row + i]) * v[r * row + i];
    const float scale = g[r] / static_cast<float>(std::sqrt(sum));
    for (std::int64_t i = 0; i < row; ++i) v[r * row + i] *= scale;
  }
  return v;
}

CodecWeights::Conv Codec::load_conv(const std::string& base, bool transposed, std::int64_t stride, std::int64_t dilation) const {
  const auto it = std::find_if(conv_weights_.begin(), conv_weights_.end(), [&](const auto& e) { return e.first == base; });
  const StoredWeight& w = it->second;
  const std::vector<float> raw = read_weight(w);
  Conv conv;
  conv.kernel = w.shape[2];
  conv.stride = stride;
  conv.dilation = dilation;
  conv.packed.resize(raw.size());
  if (transposed) {
    conv.in = w.shape[0];
    conv.out = w.shape[1];
    ops::ConvTranspose1dShape s{1, conv.in, conv.out, conv.kernel, stride, 0, 0};
    ops::pack_conv_transpose1d_weight(raw.data(), conv.packed.data(), s);
  } else {
    conv.out = w.shape[0];
    conv.in = w.shape[1];
    ops::Conv1dShape s{1, conv.in, conv.out, conv.kernel, 1, 0, dilation};
    ops::pack_conv1d_weight(raw.data(), conv.packed.data(), s);
  }
  conv.bias = read(prefix_ + base + ".bias");
  return conv;
}

void Codec::load() {
  const CodecGeometry& g = geometry_;
  w_ = {};
  // Each quantizer's decode is project_out(embed[code]): precompute it for every code, so a frame
  // costs one row lookup per quantizer (same dot products, same float32 results).
  for (std::int64_t q = 0; q < g.num_quantizers; ++q) {
    const std::string base = fmt::format("{}quantizer.quantizers.{}.", prefix_, q);
    const auto embed = read(base + "codebook.embed");
    const auto weight = read(base + "project_out.weight");
    const auto bias = read(base + "project_out.bias");
    std::vector<float> table(static_cast<std::size_t>(g.codebook_size * g.latent));
    ops::linear(embed.data(), weight.data(), table.data(), g.codebook_size, g.latent, g.codebook_dim);
    for (std::int64_t c = 0; c < g.codebook_size; ++c) ops::add_inplace(table.data() + c * g.latent, bias.data(), g.latent);
    w_.tables.push_back(std::move(table));
  }
  w_.fc2_w = read(prefix_ + "fc2.weight");
  w_.fc2_b = read(prefix_ + "fc2.bias");
  const std::string dec = "acoustic_decoder.";
  w_.conv1 = load_conv(dec + "conv1", false, 1, 1);
  for (std::size_t b = 0; b < g.blocks.size(); ++b) {
    const auto& geo = g.blocks[b];
    const std::string base = fmt::format("{}block.{}.", dec, b);
    CodecWeights::Block block;
    block.alpha = read(prefix_ + base + "snake1.alpha");
    block.up = load_conv(base + "conv_t1", true, geo.stride, 1);
    for (std::size_t u = 0; u < geo.units.size(); ++u) {
      const std::string unit = fmt::format("{}res_unit{}.", base, u + 1);
      CodecWeights::Unit w;
      w.alpha1 = read(prefix_ + unit + "snake1.alpha");
      w.alpha2 = read(prefix_ + unit + "snake2.alpha");
      w.conv1 = load_conv(unit + "conv1", false, 1, geo.units[u].dilation);
      w.conv2 = load_conv(unit + "conv2", false, 1, 1);
      block.units.push_back(std::move(w));
    }
    w_.blocks.push_back(std::move(block));
  }
  w_.final_alpha = read(prefix_ + dec + "snake1.alpha");
  w_.conv2 = load_conv(dec + "conv2", false, 1, 1);
  loaded_ = true;
}

namespace {

// Same-length convolution (odd kernel, padding dilation * (kernel - 1) / 2), as every conv1d of
// the decoder is.
template <class ConvT>
std::vector<float> same_conv(const std::vector<float>& x, std::int64_t steps, const ConvT& c) {
  ops::Conv1dShape s{steps, c.in, c.out, c.kernel, 1, c.dilation * (c.kernel - 1) / 2, c.dilation};
  std::vector<float> y(static_cast<std::size_t>(s.out_length() * c.out));
  ops::conv1d(x.data(), c.packed.data(), c.bias.data(), y.data(), s);
  return y;
}

}  // namespace

std::vector<float> Codec::decode(const std::int64_t* codes, std::int64_t frames, DiagnosticHook* hook) const {
  if (!loaded_) throw std::logic_error("higgs codec: decode() before load()");
  const CodecGeometry& g = geometry_;
  const std::int64_t K = g.num_quantizers;

  // RVQ: sum over quantizers of project_out(embed[code]); BOC/EOC (checked, past the codes) -> 0.
  std::vector<float> x(static_cast<std::size_t>(frames * g.latent), 0.0f);
  for (std::int64_t t = 0; t < frames; ++t)
    for (std::int64_t q = 0; q < K; ++q) {
      const std::int64_t code = codes[t * K + q] >= g.codebook_size ? 0 : codes[t * K + q];
      ops::add_inplace(x.data() + t * g.latent, w_.tables[q].data() + code * g.latent, g.latent);
    }
  tap(hook, "q_sum", x, frames, g.latent);

  std::vector<float> h(static_cast<std::size_t>(frames * g.decoder_input));
  ops::linear(x.data(), w_.fc2_w.data(), h.data(), frames, g.decoder_input, g.latent);
  for (std::int64_t t = 0; t < frames; ++t) ops::add_inplace(h.data() + t * g.decoder_input, w_.fc2_b.data(), g.decoder_input);
  tap(hook, "fc2", h, frames, g.decoder_input);

  std::int64_t steps = frames;
  x = same_conv(h, steps, w_.conv1);
  tap(hook, "conv1", x, steps, g.conv1_channels);

  for (std::size_t b = 0; b < w_.blocks.size(); ++b) {
    const auto& geo = g.blocks[b];
    const auto& w = w_.blocks[b];
    ops::snake(x.data(), w.alpha.data(), x.data(), steps, geo.in_channels);
    // padding ceil(s/2) and output_padding s % 2 (HiggsAudioV2TokenizerModel._adjust_dac_decoder):
    // with kernel 2s the output is exactly s x the input.
    ops::ConvTranspose1dShape s{steps, geo.in_channels, geo.out_channels, geo.kernel, geo.stride,
                                (geo.stride + 1) / 2, geo.stride % 2};
    std::vector<float> up(static_cast<std::size_t>(s.out_length() * geo.out_channels));
    ops::conv_transpose1d(x.data(), w.up.packed.data(), w.up.bias.data(), up.data(), s);
    steps = s.out_length();
    x = std::move(up);
    tap(hook, fmt::format("block.{}.conv_t1", b), x, steps, geo.out_channels);
    std::vector<float> y(x.size());
    for (std::size_t u = 0; u < w.units.size(); ++u) {
      const auto& unit = w.units[u];
      ops::snake(x.data(), unit.alpha1.data(), y.data(), steps, geo.out_channels);
      std::vector<float> z = same_conv(y, steps, unit.conv1);
      ops::snake(z.data(), unit.alpha2.data(), z.data(), steps, geo.out_channels);
      y = same_conv(z, steps, unit.conv2);
      ops::add_inplace(x.data(), y.data(), static_cast<std::int64_t>(x.size()));  // same length: no crop
      tap(hook, fmt::format("block.{}.res_unit{}", b, u + 1), x, steps, geo.out_channels);
    }
  }
  const std::int64_t last = g.blocks.back().out_channels;
  ops::snake(x.data(), w_.final_alpha.data(), x.data(), steps, last);
  std::vector<float> wave = same_conv(x, steps, w_.conv2);  // no tanh: the Higgs decoder drops it
  tap(hook, "waveform", wave, steps, 1);
  return wave;
}

namespace {

class HiggsCodeDecoder : public CodeDecoder {
 public:
  HiggsCodeDecoder(std::unique_ptr<Codec> codec, const Device& device) : codec_(std::move(codec)), device_(device) {}

  std::int64_t num_codebooks() const override { return codec_->geometry().num_quantizers; }
  std::int64_t codebook_size() const override { return codec_->geometry().codebook_size; }
  std::int64_t samples_per_frame() const override { return codec_->geometry().samples_per_frame(); }
  int sample_rate() const override { return static_cast<int>(codec_->geometry().sample_rate); }
  std::int64_t context_frames() const override { return codec_->geometry().context_frames(); }
  std::string summary() const override {
    return fmt::format("{}; float32 on {}", codec_->geometry().summary(), device_.str());
  }
  std::vector<TensorRequirement> requirements() const override { return codec_->requirements(); }
  void load() override {
    codec_->load();
#ifdef ZOO_WITH_CUDA
    if (!device_.is_cpu()) {
      runner_ = make_cuda_codec_runner(codec_->geometry(), codec_->weights(), device_.index);
      codec_->release_weights();  // on the device now
    }
#endif
  }

  Waveform decode(const TensorView& codes, DiagnosticHook* hook) const override {
    const std::int64_t K = num_codebooks();
    if (codes.shape.size() != 2 || codes.shape[1] != K || codes.shape[0] < 1)
      throw InputError(fmt::format("codes have shape {}; the codec expects [frames >= 1, {}]", shape_str(codes.shape), K));
    if (codes.dtype != DType::I64 && codes.dtype != DType::I32)
      throw InputError(fmt::format("codes are {}; expected I64 or I32", dtype_name(codes.dtype)));
    std::vector<std::int64_t> values(static_cast<std::size_t>(codes.numel()));
    if (codes.dtype == DType::I64) {
      std::copy_n(codes.as<std::int64_t>(), values.size(), values.begin());
    } else {
      std::copy_n(codes.as<std::int32_t>(), values.size(), values.begin());
    }
    const std::int64_t frames = codes.shape[0];
    check_codes(values.data(), frames, K, codebook_size());
    // Long sequences go in pieces (kDecodePieceFrames), so memory stays at one piece's; a run with
    // a hook decodes whole, as its taps are of the whole sequence.
    const std::int64_t piece = hook ? frames : kDecodePieceFrames;
    const std::int64_t context = codec_->geometry().context_frames();
    if (!runner_) {
      // Host memory is overcommitted: a decode too long for it would swap or be killed rather than
      // fail to allocate, so it is refused first. (On CUDA a cudaMalloc failure is the error.)
      check_decode_memory(codec_->geometry(), std::min(frames, piece + 2 * context), available_host_memory(),
                          "codec on cpu");
      return {
          decode_in_pieces([&](const std::int64_t* c, std::int64_t n) { return codec_->decode(c, n, hook); },
                           values.data(), frames, K, samples_per_frame(), piece, context),
          sample_rate()};
    }
    // The runner takes concurrent calls (one lane each).
    return {
        decode_in_pieces([&](const std::int64_t* c, std::int64_t n) { return runner_->decode(c, n, hook); },
                         values.data(), frames, K, samples_per_frame(), piece, context),
        sample_rate()};
  }

 private:
  std::unique_ptr<Codec> codec_;
  Device device_;
  std::unique_ptr<CodecRunner> runner_;  // set at load() for a device other than the CPU
};

}  // namespace

void check_codec_fits(const char* what, const WeightSource& weights, std::int64_t num_quantizers,
                      std::int64_t codebook_size, std::int64_t lm_codebooks, std::int64_t lm_codebook_size,
                      const Device& device) {
  if (num_quantizers != lm_codebooks)
    throw InputError(fmt::format("{} in {}: {} quantizers stored, but the LM config has {} codebooks "
                                 "(audio_encoder_config.num_codebooks)",
                                 what, weights.describe(), num_quantizers, lm_codebooks));
  if (codebook_size != lm_codebook_size - 2)
    throw InputError(fmt::format("{} in {}: codebooks of {} codes stored, but the LM config has {} codes + BOC + EOC "
                                 "(audio_encoder_config.vocab_size {})",
                                 what, weights.describe(), codebook_size, lm_codebook_size - 2, lm_codebook_size));
#ifndef ZOO_WITH_CUDA
  if (!device.is_cpu())
    throw InputError(fmt::format("{} in {}: device {} requested, but this build has no CUDA backend", what,
                                 weights.describe(), device.str()));
#else
  (void)device;
#endif
}

bool has_code_decoder(const WeightSource& weights, const std::string& prefix) {
  return weights.info(prefix + "quantizer.quantizers.0.codebook.embed").has_value();
}

std::unique_ptr<CodeDecoder> make_code_decoder(std::shared_ptr<const WeightSource> weights, const std::string& prefix,
                                               std::int64_t lm_codebooks, std::int64_t lm_codebook_size,
                                               const Device& device) {
  auto codec = std::make_unique<Codec>(weights, prefix);
  check_codec_fits("codec", *weights, codec->geometry().num_quantizers, codec->geometry().codebook_size, lm_codebooks,
                   lm_codebook_size, device);
  return std::make_unique<HiggsCodeDecoder>(std::move(codec), device);
}

}  // namespace zoo::higgs
