#pragma once
// The text model of a multimodal checkpoint (multimodal_text.cpp). Released image-text checkpoints
// (an *ForConditionalGeneration class in transformers) hold a text model that a text plugin runs,
// beside a vision tower and a projector that Zoo does not run: the plugin gets text_config and the
// text model's tensors under the names it asks for, and the user is told once what is left out.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/alias_weight_source.hpp"
#include "zoo/weight_source.hpp"

namespace zoo {

struct MultimodalTextModel {
  nlohmann::json config;           // text_config, tie_word_embeddings as the wrapper model ties
  std::vector<AliasRule> aliases;  // the text model's names (model.*, lm_head.weight) onto the stored ones
  std::string notice;              // one line: what is not used, and that image inputs are not supported
};

// nullopt unless `config` has a "text_config" object and `weights` holds a text model in one of the
// two layouts transformers' save_pretrained writes: `model.language_model.*` with `lm_head.weight`
// (save_original_format=False), or `language_model.model.*` with `language_model.lm_head.weight`
// (the default, the layout of the first releases). InputError naming `label` and the field when the
// wrapper's config would change the text model's math in a way Zoo cannot tell (a tie_word_embeddings
// that transformers' classes read differently), when text_config has no model_type, or when both
// layouts are present.
std::optional<MultimodalTextModel> multimodal_text_model(const nlohmann::json& config,
                                                         const WeightSource& weights, std::string_view label);

}  // namespace zoo
