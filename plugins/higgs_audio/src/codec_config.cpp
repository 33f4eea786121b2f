#include "codec_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "zoo/error.hpp"
#include "zoo/input_file.hpp"

namespace zoo::higgs {
namespace {

// Keys PreTrainedConfig.to_dict() writes for every config that no inference path of the codec
// reads (labels, output switches, generation and training bookkeeping).
const std::set<std::string>& common_inert_keys() {
  static const std::set<std::string> keys{"transformers_version",
                                          "architectures",
                                          "output_hidden_states",
                                          "output_attentions",
                                          "return_dict",
                                          "dtype",
                                          "torch_dtype",
                                          "chunk_size_feed_forward",
                                          "is_encoder_decoder",
                                          "id2label",
                                          "label2id",
                                          "problem_type",
                                          "_name_or_path",
                                          "initializer_range",
                                          "tie_word_embeddings",
                                          "use_return_dict",
                                          "pad_token_id",
                                          "bos_token_id",
                                          "eos_token_id",
                                          "torchscript",
                                          "pruned_heads",
                                          "tf_legacy_loss",
                                          "use_bfloat16",
                                          "finetuning_task",
                                          "tokenizer_class",
                                          "prefix",
                                          "sep_token_id",
                                          "decoder_start_token_id",
                                          "task_specific_params",
                                          "add_cross_attention",
                                          "is_decoder",
                                          "cross_attention_hidden_size",
                                          "tie_encoder_decoder"};
  return keys;
}

// Per config level: the keys that change nothing at inference (dropouts, losses, training-time
// masking, heads the codec does not build), beside the ones parsed.
const std::set<std::string> kTopInert{"model_type"};
const std::set<std::string> kAcousticInert{
    "model_type",
    "n_codebooks",
    "codebook_size",
    "codebook_dim",
    "quantizer_dropout",
    "commitment_loss_weight",
    "codebook_loss_weight",
    "sampling_rate",
    "hop_length"};  // the DAC's own quantizer and rate: unused by the codec
const std::set<std::string> kSemanticInert{
    "model_type",          "vocab_size",          "hidden_dropout",
    "activation_dropout",  "attention_dropout",   "feat_proj_dropout",
    "final_dropout",       "layerdrop",           "apply_spec_augment",
    "mask_time_prob",      "mask_time_length",    "mask_time_min_masks",
    "mask_feature_prob",   "mask_feature_length", "mask_feature_min_masks",
    "ctc_loss_reduction",  "ctc_zero_infinity",   "use_weighted_layer_sum",
    "classifier_proj_size"};

class Reader {
 public:
  Reader(const nlohmann::json& object, std::string label, std::string path,
         const std::set<std::string>& inert)
      : object_(object), label_(std::move(label)), path_(std::move(path)), inert_(inert) {
    if (!object_.is_object()) throw error(path_.empty() ? "the config" : path_, "is not a JSON object");
  }

  InputError error(const std::string& field, const std::string& what) const {
    return InputError(fmt::format("{}: field '{}' {}", label_, field, what));
  }
  std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  const nlohmann::json& at(const std::string& key) {
    used_.insert(key);
    if (!object_.contains(key)) throw error(field(key), "is missing");
    return object_.at(key);
  }
  std::int64_t integer(const std::string& key, std::int64_t min = 1) {
    const auto& v = at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < min ||
        v.get<std::int64_t>() > (std::int64_t{1} << 31))
      throw error(field(key), fmt::format("must be an integer in [{}, 2^31]", min));
    return v.get<std::int64_t>();
  }
  double number(const std::string& key) {
    const auto& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0.0)
      throw error(field(key), "must be a positive number");
    return v.get<double>();
  }
  bool boolean(const std::string& key) {
    const auto& v = at(key);
    if (!v.is_boolean()) throw error(field(key), "must be true or false");
    return v.get<bool>();
  }
  std::string string(const std::string& key) {
    const auto& v = at(key);
    if (!v.is_string()) throw error(field(key), "must be a string");
    return v.get<std::string>();
  }
  std::vector<std::int64_t> integers(const std::string& key, std::int64_t min = 1) {
    const auto& v = at(key);
    if (!v.is_array() || v.empty() || v.size() > 64)
      throw error(field(key), "must be a list of 1 to 64 integers");
    std::vector<std::int64_t> out;
    for (const auto& e : v) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < min ||
          e.get<std::int64_t>() > (std::int64_t{1} << 31))
        throw error(field(key), fmt::format("must hold integers in [{}, 2^31]", min));
      out.push_back(e.get<std::int64_t>());
    }
    return out;
  }
  std::vector<double> numbers(const std::string& key) {
    const auto& v = at(key);
    if (!v.is_array() || v.empty() || v.size() > 64)
      throw error(field(key), "must be a list of 1 to 64 numbers");
    std::vector<double> out;
    for (const auto& e : v) {
      if (!e.is_number() || !std::isfinite(e.get<double>()) || e.get<double>() <= 0.0)
        throw error(field(key), "must hold positive numbers");
      out.push_back(e.get<double>());
    }
    return out;
  }
  // A field whose value is the only one Zoo implements.
  template <class T>
  void only(const std::string& key, const T& value, const T& implemented, const std::string& why) {
    if (value != implemented)
      throw error(field(key), fmt::format("is {}: {}", nlohmann::json(value).dump(), why));
  }
  void model_type(const char* want) {
    const std::string got = string("model_type");
    if (got != want) throw error(field("model_type"), fmt::format("is \"{}\", expected \"{}\"", got, want));
  }
  void sub(const std::string& key) { used_.insert(key); }
  // Every key not parsed must be known to change nothing.
  void no_unknown() const {
    for (const auto& [key, value] : object_.items())
      if (!used_.count(key) && !inert_.count(key) && !common_inert_keys().count(key))
        throw error(field(key),
                    "is unknown to Zoo (it may change the codec's computation); remove it or update Zoo");
  }

 private:
  const nlohmann::json& object_;
  std::string label_, path_;
  const std::set<std::string>& inert_;
  std::set<std::string> used_;
};

// Python's float // (floor division), as `1000 * bandwidth // (frame_rate * nbits)` computes it.
double py_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

}  // namespace

std::int64_t CodecConfig::hop_length() const {
  std::int64_t n = 1;
  for (const auto r : acoustic.downsampling_ratios) n *= r;
  return n;
}

std::int64_t CodecConfig::frame_rate() const {
  return static_cast<std::int64_t>(
      std::ceil(static_cast<double>(sample_rate) / static_cast<double>(hop_length())));
}

std::int64_t CodecConfig::num_quantizers() const {
  const double nbits = std::ceil(std::log2(static_cast<double>(codebook_size)));
  return static_cast<std::int64_t>(
      py_floordiv(1000.0 * target_bandwidths.back(), static_cast<double>(frame_rate()) * nbits));
}

std::int64_t CodecConfig::encode_quantizers() const {
  const double per_quantizer =
      std::log2(static_cast<double>(codebook_size)) * static_cast<double>(frame_rate()) / 1000.0;
  const auto n =
      static_cast<std::int64_t>(std::max(1.0, std::floor(target_bandwidths.back() / per_quantizer)));
  return std::min(n, num_quantizers());
}

std::int64_t CodecConfig::semantic_downsample_factor() const {
  const double ratio = static_cast<double>(sample_rate) / static_cast<double>(semantic_sample_rate);
  return static_cast<std::int64_t>(static_cast<double>(hop_length()) / ratio /
                                   static_cast<double>(downsample_factor));
}

CodecConfig parse_codec_config(const nlohmann::json& json, const std::string& label) {
  CodecConfig c;
  c.source = label;
  Reader top(json, label, "", kTopInert);
  top.model_type("higgs_audio_v2_tokenizer");
  c.sample_rate = top.integer("sample_rate");
  c.semantic_sample_rate = top.integer("semantic_sample_rate");
  c.downsample_factor = top.integer("downsample_factor");
  c.codebook_size = top.integer("codebook_size", 2);
  c.codebook_dim = top.integer("codebook_dim");
  c.target_bandwidths = top.numbers("target_bandwidths");
  c.kernel_size = top.integer("kernel_size");
  c.unit_kernel_size = top.integer("unit_kernel_size");
  c.channel_ratios = top.numbers("channel_ratios");
  c.strides = top.integers("strides");
  c.block_dilations = top.integers("block_dilations");
  if (c.strides.size() != c.channel_ratios.size())
    throw top.error("strides",
                    fmt::format("has {} entries but channel_ratios {} (transformers refuses it too)",
                                c.strides.size(), c.channel_ratios.size()));

  top.sub("acoustic_model_config");
  Reader ac(top.at("acoustic_model_config"), label, "acoustic_model_config", kAcousticInert);
  ac.model_type("dac");
  c.acoustic.encoder_hidden_size = ac.integer("encoder_hidden_size");
  c.acoustic.decoder_hidden_size = ac.integer("decoder_hidden_size");
  c.acoustic.hidden_size = ac.integer("hidden_size");
  c.acoustic.downsampling_ratios = ac.integers("downsampling_ratios");
  c.acoustic.upsampling_ratios = ac.integers("upsampling_ratios");
  ac.no_unknown();

  top.sub("semantic_model_config");
  Reader se(top.at("semantic_model_config"), label, "semantic_model_config", kSemanticInert);
  se.model_type("hubert");
  auto& s = c.semantic;
  s.hidden_size = se.integer("hidden_size");
  s.num_hidden_layers = se.integer("num_hidden_layers");
  s.num_attention_heads = se.integer("num_attention_heads");
  s.intermediate_size = se.integer("intermediate_size");
  s.num_conv_pos_embeddings = se.integer("num_conv_pos_embeddings");
  s.num_conv_pos_embedding_groups = se.integer("num_conv_pos_embedding_groups");
  s.num_feat_extract_layers = se.integer("num_feat_extract_layers");
  s.layer_norm_eps = se.number("layer_norm_eps");
  s.feat_extract_norm = se.string("feat_extract_norm");
  if (s.feat_extract_norm != "group" && s.feat_extract_norm != "layer")
    throw se.error(se.field("feat_extract_norm"),
                   fmt::format("is \"{}\", expected \"group\" or \"layer\"", s.feat_extract_norm));
  s.conv_dim = se.integers("conv_dim");
  s.conv_stride = se.integers("conv_stride");
  s.conv_kernel = se.integers("conv_kernel");
  s.conv_bias = se.boolean("conv_bias");
  if (s.hidden_size % s.num_attention_heads != 0)
    throw se.error(se.field("num_attention_heads"), fmt::format("is {}, which does not divide hidden_size {}",
                                                                s.num_attention_heads, s.hidden_size));
  // What Zoo implements of HuBERT: the post-norm encoder with GELU (erf) everywhere and the
  // weight-normalized positional convolution.
  se.only("hidden_act", se.string("hidden_act"), std::string("gelu"),
          "Zoo implements HuBERT with \"gelu\" (erf)");
  se.only("feat_extract_activation", se.string("feat_extract_activation"), std::string("gelu"),
          "Zoo implements HuBERT with \"gelu\" (erf)");
  se.only("do_stable_layer_norm", se.boolean("do_stable_layer_norm"), false,
          "Zoo implements HuBERT's post-norm encoder only");
  se.only("feat_proj_layer_norm", se.boolean("feat_proj_layer_norm"), true,
          "Zoo implements HuBERT's feature projection with its LayerNorm only");
  if (json.at("semantic_model_config").contains("conv_pos_batch_norm"))
    se.only("conv_pos_batch_norm", se.boolean("conv_pos_batch_norm"), false,
            "Zoo implements the weight-normalized positional convolution only");
  se.no_unknown();
  top.no_unknown();
  return c;
}

std::optional<CodecConfig> read_codec_config(const WeightSource& weights, const std::string& probe) {
  const auto info = weights.info(probe);
  if (!info || info->file.empty()) return std::nullopt;
  const std::filesystem::path path = std::filesystem::path(info->file).parent_path() / kCodecConfigFile;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return std::nullopt;
  const nlohmann::json json = read_json_file(path, "a codec config (HiggsAudioV2TokenizerConfig.to_dict())");
  return parse_codec_config(json, path.string());
}

const CodecConfig& release_codec_config() {
  static const CodecConfig c = [] {
    CodecConfig r;
    r.source = "the published release (bosonai/higgs-audio-v2-tokenizer with HuBERT base)";
    r.sample_rate = 24000;
    r.semantic_sample_rate = 16000;
    r.downsample_factor = 320;
    r.codebook_size = 1024;
    r.codebook_dim = 64;
    r.target_bandwidths = {0.5, 1, 1.5, 2};
    r.kernel_size = 3;
    r.unit_kernel_size = 3;
    r.channel_ratios = {1, 1};
    r.strides = {1, 1};
    r.block_dilations = {1, 1};
    r.acoustic = {64, 1024, 256, {8, 5, 4, 2, 3}, {8, 5, 4, 2, 3}};
    auto& s = r.semantic;
    s.hidden_size = 768;
    s.num_hidden_layers = 12;
    s.num_attention_heads = 12;
    s.intermediate_size = 3072;
    s.num_conv_pos_embeddings = 128;
    s.num_conv_pos_embedding_groups = 16;
    s.num_feat_extract_layers = 7;
    s.layer_norm_eps = 1e-5;
    s.feat_extract_norm = "group";
    s.conv_dim = std::vector<std::int64_t>(7, 512);
    s.conv_stride = {5, 2, 2, 2, 2, 2, 2};
    s.conv_kernel = {10, 3, 3, 3, 3, 2, 2};
    s.conv_bias = false;
    return r;
  }();
  return c;
}

std::string ConfigCheck::fmt_mismatch(const char* field, const std::string& config_value,
                                      const std::string& tensor_value, const std::string& what) {
  return fmt::format("'{}' is {}, but the tensors hold {} ({})", field, config_value, tensor_value, what);
}
std::string ConfigCheck::str(std::int64_t v) {
  return fmt::format("{}", v);
}
std::string ConfigCheck::str(const std::string& v) {
  return fmt::format("\"{}\"", v);
}
std::string ConfigCheck::str(bool v) {
  return v ? "true" : "false";
}
std::string ConfigCheck::str(const std::vector<std::int64_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

}  // namespace zoo::higgs
