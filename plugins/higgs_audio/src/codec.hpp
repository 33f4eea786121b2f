#pragma once
// The Higgs Audio v3 codec decoder (transformers' HiggsAudioV2TokenizerModel.decode): RVQ lookups
// with project_out summed over quantizers, fc2, then a DAC decoder (conv1, upsampling blocks of
// Snake + ConvTranspose1d + three dilated residual units, Snake, conv2; no final tanh). Its weights
// sit in the TTS checkpoint under kCodecPrefix. The geometry is derived from the stored tensor
// shapes; the sample rate, which no shape records, from codec_config.json beside the checkpoint
// (checked against the shapes, field by field), else from the published release when the tensors
// are exactly its (codec_config.hpp), else the codec is refused.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codec_config.hpp"
#include "zoo/code_decoder.hpp"
#include "zoo/weight_source.hpp"

namespace zoo::higgs {

struct CodecGeometry {
  struct ResidualUnit {
    std::int64_t kernel = 0, dilation = 1;
  };
  struct Block {
    std::int64_t in_channels = 0, out_channels = 0, stride = 0, kernel = 0;
    std::vector<ResidualUnit> units;
  };
  std::int64_t num_quantizers = 0, codebook_size = 0, codebook_dim = 0;
  std::int64_t latent = 0;           // project_out output = fc2 input
  std::int64_t decoder_input = 0;    // fc2 output = conv1 input
  std::int64_t conv1_channels = 0, conv1_kernel = 0;
  std::vector<Block> blocks;
  std::int64_t out_kernel = 0;       // conv2: last block's channels -> 1
  std::int64_t sample_rate = 0;      // the config's (no shape records it)
  std::string config_source;

  std::int64_t samples_per_frame() const;  // product of the strides
  // An upper bound of the float32 working memory one decode holds per frame (activations,
  // transposed-convolution and im2col columns of its largest stage), CPU or CUDA: a decode's
  // memory grows linearly with its length.
  std::int64_t working_bytes_per_frame() const;
  // Frames on each side of a frame that its samples depend on (the decoder's receptive field,
  // rounded up, plus one): a piece decoded with this much context on both sides equals the whole
  // decode inside the piece, as the decoder is convolutional end to end.
  std::int64_t context_frames() const;
  std::string summary() const;
};

// How a stored convolution weight is held: plain, or weight-normalized (g, v) to be folded.
struct StoredWeight {
  std::string plain;             // requested name of the plain weight, or empty
  std::string g, v;              // weight-norm magnitude and direction, when not plain
  Shape shape;                   // the (folded) weight's shape
};

// The decoder's weights in float32, convolutions packed as kernels/conv_cpu.hpp's ops read them
// (the CUDA ops in kernels/cuda/conv.hpp read the same layouts).
struct CodecWeights {
  struct Conv {
    std::vector<float> packed, bias;
    std::int64_t in = 0, out = 0, kernel = 0, stride = 1, dilation = 1;
  };
  struct Unit {
    std::vector<float> alpha1, alpha2;
    Conv conv1, conv2;
  };
  struct Block {
    std::vector<float> alpha;
    Conv up;  // transposed
    std::vector<Unit> units;
  };
  std::vector<std::vector<float>> tables;  // per quantizer: project_out(embed) + bias, [size, latent]
  std::vector<float> fc2_w, fc2_b;
  Conv conv1, conv2;
  std::vector<Block> blocks;
  std::vector<float> final_alpha;
};

class Codec {
 public:
  // Derives the geometry from the tensor headers under `prefix` (nothing is read yet) and the
  // config: `config` when given, else codec_config.json beside the checkpoint, else the release's
  // values when the tensors are exactly its. Throws InputError naming the source and saying what
  // does not fit (a config field that disagrees with the tensors, or the sample rate when there is
  // no config).
  Codec(std::shared_ptr<const WeightSource> weights, std::string prefix,
        std::optional<CodecConfig> config = std::nullopt);

  const CodecGeometry& geometry() const { return geometry_; }
  std::vector<TensorRequirement> requirements() const;
  void load();
  bool loaded() const { return loaded_; }
  // codes [frames, num_quantizers], row-major, already checked by check_codes (the CodeDecoder
  // checks a whole sequence once, before its pieces); BOC and EOC map to 0 (the reference's
  // cleanup).
  std::vector<float> decode(const std::int64_t* codes, std::int64_t frames, DiagnosticHook* hook = nullptr) const;
  // The loaded float32 weights (what a device backend uploads), and a way to drop them after.
  const CodecWeights& weights() const { return w_; }
  void release_weights() { w_ = {}; }

 private:
  using Conv = CodecWeights::Conv;
  std::vector<float> read(const std::string& name) const;
  std::vector<float> read_weight(const StoredWeight& w) const;
  Conv load_conv(const std::string& base, bool transposed, std::int64_t stride, std::int64_t dilation) const;

  std::shared_ptr<const WeightSource> weights_;
  std::string prefix_;
  CodecGeometry geometry_;
  std::vector<std::pair<std::string, StoredWeight>> conv_weights_;  // base name -> how stored
  std::vector<TensorRequirement> requirements_;
  bool loaded_ = false;
  CodecWeights w_;
};

// What is wrong with code `value` at [t][q] of a user's frames, empty when nothing: a code is in
// [0, codebook_size); with `boc_eoc` also BOC (codebook_size) or EOC (codebook_size + 1), which
// the decoder maps to 0 (what generated frames may hold). Anything past them is an error, never
// silently code 0. The one rule for `zoo tts --codes` and `--ref-codes`.
std::string code_problem(std::int64_t value, std::int64_t t, std::int64_t q, std::int64_t codebook_size,
                         bool boc_eoc);

// InputError for an empty code sequence or a code code_problem (with BOC/EOC) refuses.
void check_codes(const std::int64_t* codes, std::int64_t frames, std::int64_t num_quantizers,
                 std::int64_t codebook_size);

// InputError when decoding `frames` at once would need more than `available_bytes` of working
// memory (working_bytes_per_frame), rather than an allocation that fails or swaps half-way: names
// the frames, the audio length and both sizes, and says to decode shorter pieces.
void check_decode_memory(const CodecGeometry& geometry, std::int64_t frames, std::uint64_t available_bytes,
                         const std::string& where);

// Frames a long decode is cut into (20 s of audio at the real geometry): a decode's working memory
// grows with its length (working_bytes_per_frame, ~1.6 MB per frame at the real shapes), so longer
// sequences are decoded piece by piece, each with context_frames() of context on both sides
// (5% more work at the real geometry), and the memory stays at one piece's.
inline constexpr std::int64_t kDecodePieceFrames = 500;

// The waveform of `frames` code frames ([frames, num_quantizers], row-major) decoded in pieces of
// at most `piece` frames, each with `context` frames of context on both sides (cut away after),
// through `decode` (codes, frames) -> samples_per_frame x frames samples.
std::vector<float> decode_in_pieces(const std::function<std::vector<float>(const std::int64_t*, std::int64_t)>& decode,
                                    const std::int64_t* codes, std::int64_t frames, std::int64_t num_quantizers,
                                    std::int64_t samples_per_frame, std::int64_t piece, std::int64_t context);

// Runs a loaded codec's decode on a device; made from the host weights at load.
class CodecRunner {
 public:
  virtual ~CodecRunner() = default;
  // As Codec::decode; safe to call from several threads at once.
  virtual std::vector<float> decode(const std::int64_t* codes, std::int64_t frames, DiagnosticHook* hook) = 0;
};

#ifdef ZOO_WITH_CUDA
// cuda/codec_cuda.cpp: float32 on CUDA device `device`, weights uploaded here once.
std::unique_ptr<CodecRunner> make_cuda_codec_runner(const CodecGeometry& geometry, const CodecWeights& weights,
                                                    int device);
#endif

// The CodeDecoder a Higgs model hands out: the codec, checked against the LM's codebook count,
// decoding on `device` (the model's): the CPU reference, or CUDA when built with it.
// Whether the checkpoint holds a codec decoder under `prefix` at all (its first quantizer's
// codebook, where the geometry starts); whether that codec is well formed is make_code_decoder's.
bool has_code_decoder(const WeightSource& weights, const std::string& prefix);
// That a codec part (`what`: "codec", "codec encoder") of `weights` matches the LM's codebooks
// (lm_codebook_size counts BOC and EOC) and can run on `device` in this build; InputError otherwise.
void check_codec_fits(const char* what, const WeightSource& weights, std::int64_t num_quantizers,
                      std::int64_t codebook_size, std::int64_t lm_codebooks, std::int64_t lm_codebook_size,
                      const Device& device);
std::unique_ptr<CodeDecoder> make_code_decoder(std::shared_ptr<const WeightSource> weights, const std::string& prefix,
                                               std::int64_t lm_codebooks, std::int64_t lm_codebook_size,
                                               const Device& device = {});

}  // namespace zoo::higgs
