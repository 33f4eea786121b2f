#pragma once
// The Higgs Audio codec encoder (transformers' HiggsAudioV2TokenizerModel.encode): 24 kHz mono
// samples -> code frames [T, num_quantizers].
//
//   semantic: resample to 16 kHz (torchaudio's windowed sinc), pad 160 both sides, HuBERT
//             (conv feature extractor, projection, positional conv, post-norm transformer), the
//             mean of all its hidden states, every `downsample`-th frame, encoder_semantic
//             (conv + blocks of ELU residual units and a conv);
//   acoustic: the DAC encoder on the 24 kHz samples, padded by hop / 2 on both sides when its
//             unpadded length would not equal the semantic frame count;
//   fc(cat(acoustic, semantic)), then residual VQ: per quantizer project_in, the code with the
//             largest -(|x|^2 - 2 x.e + |e|^2) (float32, ties to the lower code), and
//             project_out(embed[code]) subtracted from the residual.
//
// Geometry comes from the stored tensor shapes like the decoder's (codec.hpp); what no shape
// records (HuBERT's heads, conv strides and eps, encoder_semantic's dilations, the rates and
// downsample_factor) from codec_config.json beside the checkpoint, else from the published release
// when the tensors are exactly its, else the codec is refused (codec_config.hpp). What the
// architecture fixes in code, not in any config: the DAC unit dilations 1, 3, 9, the 160-sample
// pad, the feature convs' GroupNorm / LayerNorm eps 1e-5 (torch's default).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codec_config.hpp"
#include "zoo/code_encoder.hpp"
#include "zoo/diagnostic_hook.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/tensor.hpp"
#include "zoo/weight_source.hpp"

namespace zoo::higgs {

struct EncoderGeometry {
  struct AcousticBlock {
    std::int64_t in_channels = 0, out_channels = 0, stride = 0, kernel = 0;
    std::int64_t unit_kernel = 0;
  };
  struct FeatureConv {
    std::int64_t in_channels = 0, out_channels = 0, kernel = 0, stride = 0;
    bool bias = false, norm = false;  // norm: GroupNorm per channel (layer 0) or LayerNorm (layer mode)
  };
  struct SemanticBlock {
    std::int64_t in_channels = 0, out_channels = 0, kernel = 0, stride = 1, units = 0, unit_kernel = 0;
    std::vector<std::int64_t> unit_dilations;  // block_dilations, one per unit
  };
  // DAC encoder
  std::int64_t acoustic_conv1_channels = 0, acoustic_conv1_kernel = 0;
  std::vector<AcousticBlock> acoustic_blocks;
  std::int64_t acoustic = 0, acoustic_out_kernel = 0;  // conv2's width and kernel
  // HuBERT
  std::vector<FeatureConv> features;
  bool feature_layer_norm = false;  // "layer" mode: every conv has a LayerNorm over channels
  std::int64_t semantic = 0, heads = 0, layers = 0, intermediate = 0;
  std::int64_t pos_kernel = 0, pos_groups = 0;
  // encoder_semantic
  std::int64_t semantic_conv_kernel = 0;
  std::vector<SemanticBlock> semantic_blocks;
  // fc and the quantizers
  std::int64_t hidden = 0;  // acoustic + semantic
  std::int64_t num_quantizers = 0, codebook_size = 0, codebook_dim = 0;
  // From the config (codec_config.json or the release's values)
  std::int64_t sample_rate = 0, semantic_rate = 0;  // the input's and HuBERT's
  std::int64_t semantic_downsample = 0;             // the config's semantic_downsample_factor
  float layer_norm_eps = 0.0f;                      // HuBERT's layer_norm_eps
  std::string config_source;

  std::int64_t hop() const;              // product of the DAC strides (24 kHz samples per frame)
  std::int64_t semantic_stride() const;  // product of HuBERT's conv strides (16 kHz samples per frame)
  // Every how many HuBERT frames one is kept: transformers' semantic_downsample_factor when above
  // 1, else 1 (encode() slices only above 1).
  std::int64_t downsample() const;
  // HuBERT frames for `samples` 16 kHz samples (0 when too short), and the frames kept.
  std::int64_t hubert_frames(std::int64_t samples16k) const;
  // The DAC encoder's output length on `samples` 24 kHz samples (0 when too short).
  std::int64_t acoustic_frames(std::int64_t samples) const;
  std::string summary() const;
};

// The encoder's weights in float32, convolutions packed as kernels/conv_cpu.hpp reads them.
struct EncoderWeights {
  struct Conv {
    std::vector<float> packed, bias;  // bias empty when the convolution has none
    std::int64_t in = 0, out = 0, kernel = 0, stride = 1, dilation = 1, padding = 0;
  };
  struct Unit {  // DAC residual unit
    std::vector<float> alpha1, alpha2;
    Conv conv1, conv2;
  };
  struct AcousticBlock {
    std::vector<Unit> units;
    std::vector<float> alpha;
    Conv down;
  };
  struct Layer {  // HuBERT post-norm transformer layer
    std::vector<float> qkv_w, qkv_b;  // q, k, v stacked: [3 H, H]
    std::vector<float> out_w, out_b, ln1_w, ln1_b, ff1_w, ff1_b, ff2_w, ff2_b, ln2_w, ln2_b;
  };
  struct SemanticUnit {
    Conv conv1, conv2;
  };
  struct SemanticBlock {
    std::vector<SemanticUnit> units;
    Conv conv;
  };
  Conv acoustic_conv1, acoustic_conv2;
  std::vector<AcousticBlock> acoustic_blocks;
  std::vector<float> acoustic_alpha;
  std::vector<Conv> features;
  std::vector<std::vector<float>> feature_norm_w, feature_norm_b;  // per conv (empty when none)
  std::vector<float> proj_ln_w, proj_ln_b, proj_w, proj_b;
  std::vector<float> pos_w, pos_b;  // folded weight-norm weight [H, H / groups, kernel]
  std::vector<float> enc_ln_w, enc_ln_b;
  std::vector<Layer> layers;
  Conv semantic_conv;
  std::vector<SemanticBlock> semantic_blocks;
  std::vector<float> fc_w, fc_b;
  struct Quantizer {
    std::vector<float> in_w, in_b;  // project_in [D, hidden]
    std::vector<float> embed;       // [size, D]
    std::vector<float> embed_sq;    // |e|^2 per code, float32
    std::vector<float> table;       // project_out(embed) + bias, [size, hidden]
  };
  std::vector<Quantizer> quantizers;
};

// What one encode gives: the codes and, per [frame, quantizer], the best score minus the second
// best (how near a tie each code was).
struct EncodeResult {
  std::int64_t frames = 0, num_quantizers = 0;
  std::vector<std::int64_t> codes;  // [frames, num_quantizers]
  std::vector<float> gaps;          // [frames, num_quantizers]
  float min_gap(std::int64_t q) const;
};

// The most seconds one encode takes (sglang's reference-audio cap): HuBERT's attention is
// quadratic in the length.
inline constexpr std::int64_t kMaxEncodeSeconds = 100;
inline std::int64_t max_encode_samples(const EncoderGeometry& g) {
  return kMaxEncodeSeconds * g.sample_rate;
}

class CodecEncoder {
 public:
  // Derives the geometry from the tensor headers under `prefix` (nothing is read yet) and the
  // config: `config` when given, else codec_config.json beside the checkpoint, else the release's
  // values when the tensors are exactly its. Throws InputError naming the source and what does not
  // fit: a config field that disagrees with the tensors, or the head count when there is no config.
  CodecEncoder(std::shared_ptr<const WeightSource> weights, std::string prefix,
               std::optional<CodecConfig> config = std::nullopt);

  const EncoderGeometry& geometry() const { return geometry_; }
  std::vector<TensorRequirement> requirements() const { return requirements_; }
  void load();
  bool loaded() const { return loaded_; }
  const EncoderWeights& weights() const { return w_; }
  void release_weights() { w_ = {}; }

  // samples: 24 kHz mono float32 (checked by check_encode_input). Taps (float32, [steps,
  // channels]) named as tools/fixtures/make_codec_encode_fixtures.py's goldens.
  EncodeResult encode(const float* samples, std::int64_t n, DiagnosticHook* hook = nullptr) const;

 private:
  std::shared_ptr<const WeightSource> weights_;
  std::string prefix_;
  EncoderGeometry geometry_;
  std::vector<TensorRequirement> requirements_;
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> weight_norm_;  // base -> (g, v)
  bool loaded_ = false;
  EncoderWeights w_;
};

// InputError unless `n` samples can be encoded: not empty, no NaN or infinity, at most
// max_encode_samples, long enough for HuBERT and the DAC encoder. `what` names the input.
void check_encode_input(const EncoderGeometry& geometry, const float* samples, std::int64_t n, const std::string& what);

bool has_code_encoder(const WeightSource& weights, const std::string& prefix);

// Runs a loaded encoder on a device; made from the host weights at load.
class CodecEncoderRunner {
 public:
  virtual ~CodecEncoderRunner() = default;
  // As CodecEncoder::encode (the input already checked by check_encode_input).
  virtual EncodeResult encode(const float* samples, std::int64_t n, DiagnosticHook* hook) = 0;
};

// The CodeEncoder a Higgs model hands out: checked against the LM's codebooks (count and size, as
// make_code_decoder), encoding on `device` (the model's): the CPU reference, or CUDA when built
// with it.
std::unique_ptr<CodeEncoder> make_code_encoder(std::shared_ptr<const WeightSource> weights, const std::string& prefix,
                                               std::int64_t lm_codebooks, std::int64_t lm_codebook_size,
                                               const Device& device = {});

#ifdef ZOO_WITH_CUDA
// cuda/codec_encoder_cuda.cpp: float32 on CUDA device `device` (TF32 off), weights uploaded once.
std::unique_ptr<CodecEncoderRunner> make_cuda_codec_encoder_runner(const EncoderGeometry& geometry,
                                                                   const EncoderWeights& weights, int device);
#endif

}  // namespace zoo::higgs
