#pragma once
// Reading a Hugging Face config.json into a DecoderSpec: the fields that dense decoders
// share (sizes, GQA, head_dim, eps, tie_word_embeddings, attention_bias/mlp_bias, hidden_act)
// and the RoPE settings in all their layouts (flat rope_theta + rope_scaling, transformers-5
// rope_parameters, "type" or "rope_type"). The value of every field it reads is checked: a
// missing, mistyped, out-of-range or unsupported field is an InputError that names it.
//
// The reader knows its fields from one table (hf_config_fields): each is implemented, refused or
// ignored. A field the table does not know is ignored with one warning naming it, because
// configs carry many harmless extras and refusing them would refuse real checkpoints.
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/layers/decoder.hpp"
#include "zoo/layers/rope.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

enum class HfFieldUse {
  implemented,  // read into the DecoderSpec; a value the decoder cannot compute is an InputError
  refused,      // changes the math and is not computed: an InputError unless absent, null or "off"
  ignored,      // on purpose: it does not change the logits
};

struct HfField {
  const char* name;
  HfFieldUse use;
  const char* note;  // implemented: the values computed; refused: what it asks for; ignored: why
};

// Every top-level config.json field the reader knows.
const std::vector<HfField>& hf_config_fields();
const char* hf_field_use_name(HfFieldUse use);

// What a family's transformers code reads that the others do not. The table's refused fields stay
// refused for a family unless it lists them in `reads`; then the reader implements them:
//   partial_rotary_factor (top level or in the RoPE parameters): the first int(head_dim x f)
//     dimensions rotate;
//   attn_logit_softcapping, final_logit_softcapping: tanh capping of scores and logits;
//   query_pre_attn_scalar: scores scaled by its inverse square root;
//   sliding_window, use_sliding_window, layer_types (and max_window_layers,
//     sliding_window_pattern where `sliding_layer` reads them): which layers attend through a
//     window, from layer_types when config.json has it, else from `sliding_layer`;
//   rope_local_base_freq, or rope_parameters keyed by layer type: a second RoPE table for the
//     sliding layers;
//   num_experts (with num_local_experts, num_experts_per_tok, moe_intermediate_size,
//     norm_topk_prob, decoder_sparse_step, mlp_only_layers): mixture-of-experts MLPs, on the layers
//     decoder_sparse_step and mlp_only_layers make sparse.
//
// A field config.json lacks takes the family's transformers default, never one of Zoo's own: from
// `defaults` (a copy of the class's), else from the few fallbacks every class Zoo reads shares
// (hf_shared_fallbacks); a field in neither (hf_refused_when_absent) is an InputError naming it.
struct HfFamilyRules {
  std::set<std::string> reads;
  // The transformers config class (`<Family>Config`): named in messages and docs/validation.md.
  std::string config_class;
  // That class's defaults for the fields config.json may leave out, as from_dict fills them (null:
  // the class default is None, and the reader's meaning of None applies: head_dim hidden_size /
  // num_attention_heads, num_key_value_heads num_attention_heads, no window, no capping). Every
  // key must be a field the reader implements or the family reads (std::logic_error otherwise).
  // rope_theta and rope_local_base_freq here are the bases of RoPE parameters that state none.
  nlohmann::json defaults = nlohmann::json::object();
  // The field naming the MLP activation, as the family's transformers MLP reads it: "hidden_act",
  // or "hidden_activation" (where a family keeps it there). The other spelling is never read (transformers
  // does not read it either); a warning names it when it names another function.
  std::string activation_field = "hidden_act";
  // Whether "gelu" means the tanh form (a family whose transformers config converts it on load).
  bool gelu_means_tanh = false;
  // Whether layer `layer` slides when config.json has no layer_types (the family's default, as
  // its transformers config computes layer_types). Needed for sliding_window to be read.
  std::function<bool(std::int64_t layer, const nlohmann::json& config)> sliding_layer;
};

// A field whose absent value, when the family's `defaults` do not state it, is the one every
// transformers class Zoo reads shares.
struct HfFallback {
  const char* field;
  const char* value;   // as config.json would write it
  const char* source;  // where transformers fixes it
};
const std::vector<HfFallback>& hf_shared_fallbacks();
// The fields refused when config.json and the family's `defaults` both lack them: their
// transformers defaults differ between classes or are one released model's sizes. Some apply only
// to the families that read them (sliding_window, query_pre_attn_scalar, the soft-caps, experts).
const std::vector<std::string>& hf_refused_when_absent();

// `family` goes into the spec; `label` names the source in messages ("ckpt/config.json").
// Sets qkv_bias and o_bias from attention_bias and mlp_bias from mlp_bias; a plugin adjusts the
// switches its family fixes (qk_norm, norms, a qkv bias that the config does not state). Warnings
// (the unknown fields) go into spec.config_warnings, which make_decoder_model logs.
DecoderSpec read_hf_decoder_config(const nlohmann::json& config, const std::string& family, const std::string& label,
                                   const HfFamilyRules& rules = {});

// The RoPE parameters alone (read_hf_decoder_config uses it).
RopeParameters read_hf_rope_parameters(const nlohmann::json& config, const std::string& label);

// config.json's model_type, or `fallback` when it has none (a plugin serving several types picks
// its family's rules by it before reading the rest).
std::string hf_model_type(const nlohmann::json& config, const std::string& fallback);

// A boolean field: `fallback` when absent or null, InputError when not a boolean.
bool hf_bool(const nlohmann::json& config, const char* key, bool fallback, const std::string& label);

}  // namespace zoo::layers
