#include "zoo/multimodal_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "zoo/error.hpp"

namespace zoo {

namespace {

// Where save_pretrained puts the text model: its decoder (`model.*` in a causal LM) and its head.
struct Layout {
  std::string_view decoder;
  std::string_view head;
};
constexpr Layout kReleased{"model.language_model.", "lm_head.weight"};  // save_original_format=False
constexpr Layout kOriginal{"language_model.model.", "language_model.lm_head.weight"};  // the default

bool any_under(const std::vector<std::string>& names, std::string_view prefix) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.starts_with(prefix); });
}

// "model.vision_tower.*" for model.vision_tower.encoder..., "vision_tower.*" for vision_tower.encoder...
std::string group_of(std::string_view name) {
  std::size_t end = name.find('.');
  if (end != std::string_view::npos && name.substr(0, end) == "model") end = name.find('.', end + 1);
  return end == std::string_view::npos ? std::string(name) : fmt::format("{}.*", name.substr(0, end));
}

// transformers ties the head by the wrapper's tie_word_embeddings, each class with its own default
// when absent, and one of them also ties when only text_config says so: only the readings on
// which they all agree are taken; the rest is refused by name.
bool tied_head(const nlohmann::json& config, const nlohmann::json& text, bool head_stored,
               std::string_view label) {
  auto flag = [&](const nlohmann::json& object, std::string_view field) -> std::optional<bool> {
    const auto it = object.find("tie_word_embeddings");
    if (it == object.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean())
      throw InputError(fmt::format("{}: field '{}' must be true or false", label, field));
    return it->get<bool>();
  };
  const auto wrapper = flag(config, "tie_word_embeddings");
  const auto own = flag(text, "text_config.tie_word_embeddings");
  if (wrapper == true || own == true) {
    if (wrapper == false)
      throw InputError(fmt::format("{}: field 'tie_word_embeddings' is false while text_config.tie_word_embeddings "
                                   "is true: transformers' multimodal classes disagree on which ties the head; set "
                                   "both to the value the checkpoint was trained with",
                                   label));
    return true;
  }
  if (wrapper == false) return false;
  // No wrapper value, and text_config's is not true: the classes' defaults differ. A checkpoint
  // without a stored head can only run tied; with one, the config must say.
  if (!head_stored) return true;
  throw InputError(
      fmt::format("{}: has no field 'tie_word_embeddings' (transformers' multimodal classes default "
                  "it differently) and stores a head; add \"tie_word_embeddings\" to config.json",
                  label));
}

}  // namespace

std::optional<MultimodalTextModel> multimodal_text_model(const nlohmann::json& config,
                                                         const WeightSource& weights,
                                                         std::string_view label) {
  const auto text_it = config.find("text_config");
  if (text_it == config.end() || !text_it->is_object()) return std::nullopt;
  const std::vector<std::string> names = weights.names();
  const bool released = any_under(names, kReleased.decoder), original = any_under(names, kOriginal.decoder);
  if (!released && !original) return std::nullopt;
  if (released && original)
    throw InputError(
        fmt::format("{}: holds a text model under both {}* and {}*: which one to run is ambiguous", label,
                    kReleased.decoder, kOriginal.decoder));
  const Layout layout = released ? kReleased : kOriginal;

  const nlohmann::json& text = *text_it;
  const auto type = text.find("model_type");
  if (type == text.end() || !type->is_string() || type->get<std::string>().empty())
    throw InputError(
        fmt::format("{}: text_config has no \"model_type\" to pick the text model's plugin by", label));

  MultimodalTextModel out;
  out.config = text;
  const bool head_stored = std::find(names.begin(), names.end(), layout.head) != names.end();
  out.config["tie_word_embeddings"] = tied_head(config, text, head_stored, label);
  out.aliases.push_back(AliasRule::with_prefix("model.", std::string(layout.decoder)));
  if (layout.head != "lm_head.weight")
    out.aliases.push_back(AliasRule::exact("lm_head.weight", std::string(layout.head)));

  std::map<std::string, std::size_t> unused;
  for (const auto& name : names)
    if (!name.starts_with(layout.decoder) && name != layout.head) ++unused[group_of(name)];
  std::vector<std::string> parts;
  for (const auto& [group, count] : unused)
    parts.push_back(fmt::format("{} ({} tensor{})", group, count, count == 1 ? "" : "s"));
  const auto wrapper_type = config.find("model_type");
  out.notice = fmt::format(
      "{}: a multimodal checkpoint{}: running its text model (model_type '{}', tensors {}*); not used: {}; "
      "image inputs are not supported",
      label,
      wrapper_type != config.end() && wrapper_type->is_string()
          ? fmt::format(" (model_type '{}')", wrapper_type->get<std::string>())
          : "",
      type->get<std::string>(), layout.decoder,
      parts.empty() ? "nothing else" : fmt::format("{}", fmt::join(parts, ", ")));
  return out;
}

}  // namespace zoo
