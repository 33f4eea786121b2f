#pragma once
// Reading a Hugging Face config.json into a DecoderSpec: the fields that dense decoders
// share (sizes, GQA, head_dim, eps, tie_word_embeddings, attention_bias/mlp_bias, hidden_act,
// sliding windows) and the RoPE settings in all their layouts (flat rope_theta + rope_scaling,
// transformers-5 rope_parameters, "type" or "rope_type"). Every value from the file is checked:
// a missing, mistyped, out-of-range or unsupported field is an InputError that names it.
#include <string>

#include <nlohmann/json.hpp>

#include "zoo/layers/decoder.hpp"
#include "zoo/layers/rope.hpp"

namespace zoo::layers {

// `family` goes into the spec; `label` names the source in messages ("ckpt/config.json").
// Sets qkv_bias and o_bias from attention_bias and mlp_bias from mlp_bias; a plugin adjusts the
// switches its family fixes (qk_norm, a qkv bias that the config does not state).
DecoderSpec read_hf_decoder_config(const nlohmann::json& config, const std::string& family, const std::string& label);

// The RoPE parameters alone (read_hf_decoder_config uses it).
RopeParameters read_hf_rope_parameters(const nlohmann::json& config, const std::string& label);

// A boolean field: `fallback` when absent or null, InputError when not a boolean.
bool hf_bool(const nlohmann::json& config, const char* key, bool fallback, const std::string& label);

}  // namespace zoo::layers
