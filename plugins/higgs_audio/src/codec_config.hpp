#pragma once
// The Higgs codec's hyperparameters: transformers' HiggsAudioV2TokenizerConfig, read from a
// `codec_config.json` beside the checkpoint in the form its to_dict() writes (the acoustic DAC and
// the semantic HuBERT configs nested as dicts). The Higgs v3 release embeds the codec without one,
// so a codec without the file takes the published release's values (release_codec_config) only
// when its tensors are exactly that release's; anything else is refused (codec_encoder.cpp,
// codec.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/weight_source.hpp"

namespace zoo::higgs {

inline constexpr const char* kCodecConfigFile = "codec_config.json";

struct CodecConfig {
  std::string source;  // for messages: "codec_config.json at PATH" or the release's name

  std::int64_t sample_rate = 0, semantic_sample_rate = 0, downsample_factor = 0;
  std::int64_t codebook_size = 0, codebook_dim = 0;
  std::vector<double> target_bandwidths;
  // encoder_semantic
  std::int64_t kernel_size = 0, unit_kernel_size = 0;
  std::vector<double> channel_ratios;
  std::vector<std::int64_t> strides, block_dilations;

  struct Acoustic {  // DacConfig
    std::int64_t encoder_hidden_size = 0, decoder_hidden_size = 0, hidden_size = 0;
    std::vector<std::int64_t> downsampling_ratios, upsampling_ratios;
  } acoustic;

  struct Semantic {  // HubertConfig
    std::int64_t hidden_size = 0, num_hidden_layers = 0, num_attention_heads = 0, intermediate_size = 0;
    std::int64_t num_conv_pos_embeddings = 0, num_conv_pos_embedding_groups = 0, num_feat_extract_layers = 0;
    double layer_norm_eps = 0.0;
    std::string feat_extract_norm;  // "group" or "layer"
    std::vector<std::int64_t> conv_dim, conv_stride, conv_kernel;
    bool conv_bias = false;
  } semantic;

  // HiggsAudioV2TokenizerConfig's properties, computed as Python computes them.
  std::int64_t hop_length() const;  // product of acoustic.downsampling_ratios
  std::int64_t frame_rate() const;  // ceil(sample_rate / hop_length)
  std::int64_t num_quantizers() const;
  // The quantizers encode() uses at its default bandwidth (target_bandwidths[-1]), at most
  // num_quantizers().
  std::int64_t encode_quantizers() const;
  // int(hop_length / (sample_rate / semantic_sample_rate) / downsample_factor); encode() keeps
  // every such HuBERT frame when it is above 1, every frame otherwise.
  std::int64_t semantic_downsample_factor() const;
};

// `json` in HiggsAudioV2TokenizerConfig.to_dict()'s form. Every field the codec's math reads must
// be there with a value Zoo implements; a field Zoo does not know is refused (it may change the
// math), as is one whose value Zoo does not implement (e.g. do_stable_layer_norm: true). InputError
// naming `label` and the field.
CodecConfig parse_codec_config(const nlohmann::json& json, const std::string& label);

// codec_config.json in the directory of the file holding `probe` (a tensor of the codec), read
// through the input layer; nullopt when there is none.
std::optional<CodecConfig> read_codec_config(const WeightSource& weights, const std::string& probe);

// The published release's values, which a codec without codec_config.json takes only when its
// tensors are exactly that release's: bosonai/higgs-audio-v2-tokenizer's config (the codec Higgs
// Audio v3 embeds: 24 kHz, hop 960 = 8 x 5 x 4 x 2 x 3, 8 quantizers of 1024 x 64, DAC widths
// 64 -> 2048 -> 256, decoder 1024) with HuBERT base (facebook/hubert-base-ls960, transformers'
// HubertConfig defaults: 768 wide, 12 layers of 12 heads of 64, FFN 3072, 7 feature convs of 512,
// kernels 10,3,3,3,3,2,2, strides 5,2,2,2,2,2,2, group norm, no conv bias, positional conv 128 in
// 16 groups, post-norm, GELU, eps 1e-5).
const CodecConfig& release_codec_config();

// What a codec check collects: the first disagreement between a config and the tensors, naming the
// config field. `first` is empty while all agree.
struct ConfigCheck {
  std::string first;
  template <class A, class B>
  void equal(const char* field, const A& config_value, const B& tensor_value, const std::string& what) {
    if (first.empty() && !(config_value == tensor_value))
      first = fmt_mismatch(field, str(config_value), str(tensor_value), what);
  }
  static std::string fmt_mismatch(const char* field, const std::string& config_value,
                                  const std::string& tensor_value, const std::string& what);
  static std::string str(std::int64_t v);
  static std::string str(const std::string& v);
  static std::string str(bool v);
  static std::string str(const std::vector<std::int64_t>& v);
};

}  // namespace zoo::higgs
