#include "higgs_config.hpp"

#include <fmt/format.h>

#include "zoo/checked.hpp"
#include "zoo/error.hpp"

namespace zoo::higgs {
namespace {

// Far above the released model (8 codebooks of 1026 codes): the audio table is K x V rows of the
// hidden size, so these bound its size before anything is allocated.
constexpr std::int64_t kMaxCodebooks = 1024;
constexpr std::int64_t kMaxCodebookSize = std::int64_t{1} << 20;
constexpr std::int64_t kMaxHidden = std::int64_t{1} << 18;  // the text body's own limit

// An integer field in [1, max]; unsigned values above int64 are reported as written, never as -1.
std::int64_t positive_int(const nlohmann::json& object, const char* key, std::int64_t max, const std::string& where) {
  if (!object.contains(key)) throw InputError(fmt::format("{}: missing field '{}'", where, key));
  const auto& value = object.at(key);
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    throw InputError(fmt::format("{}: field '{}' = {} is out of range (expected 1..{})", where, key,
                                 value.get<std::uint64_t>(), max));
  if (!value.is_number_integer() || value.get<std::int64_t>() <= 0)
    throw InputError(fmt::format("{}: field '{}' must be a positive integer", where, key));
  return check_range(value.get<std::int64_t>(), 1, max, fmt::format("{}: field '{}'", where, key));
}

}  // namespace

HiggsConfig HiggsConfig::parse(const nlohmann::json& config, const std::string& label) {
  if (!config.is_object()) throw InputError(fmt::format("{}: config is not a JSON object", label));
  HiggsConfig c;
  if (!config.contains("text_config") || !config.at("text_config").is_object())
    throw InputError(fmt::format("{}: missing object 'text_config'", label));
  c.text_config = config.at("text_config");
  // The released config stores rope_theta: null with the value under rope_parameters.
  if (c.text_config.contains("rope_theta") && c.text_config.at("rope_theta").is_null()) c.text_config.erase("rope_theta");
  if (!c.text_config.contains("model_type")) c.text_config["model_type"] = "qwen3";
  // The text head is the text embedding: Higgs ties it, whatever text_config says.
  c.text_config["tie_word_embeddings"] = true;
  c.hidden_size = positive_int(c.text_config, "hidden_size", kMaxHidden, label + " text_config");

  if (!config.contains("audio_encoder_config") || !config.at("audio_encoder_config").is_object())
    throw InputError(fmt::format("{}: missing object 'audio_encoder_config'", label));
  const auto& audio = config.at("audio_encoder_config");
  const std::string where = label + " audio_encoder_config";
  c.num_codebooks = positive_int(audio, "num_codebooks", kMaxCodebooks, where);
  c.codebook_size = positive_int(audio, "vocab_size", kMaxCodebookSize, where);
  if (c.codebook_size < 3)
    throw InputError(fmt::format("{}: vocab_size {} leaves no codes besides BOC and EOC", where, c.codebook_size));
  if (audio.contains("out_dim") && !audio.at("out_dim").is_null()) {
    const auto out_dim = positive_int(audio, "out_dim", kMaxHidden, where);
    if (out_dim != c.hidden_size)
      throw InputError(fmt::format("{}: out_dim {} differs from text_config.hidden_size {} (the audio table is tied to "
                                   "the hidden size)", where, out_dim, c.hidden_size));
  }
  // No transformers class stands behind this config, so nothing here has a default to take: the
  // delay pattern and the audio slot id change what the model reads and are required as written.
  if (!audio.contains("use_delay_pattern") || !audio.at("use_delay_pattern").is_boolean())
    throw InputError(fmt::format("{}: field 'use_delay_pattern' must be true or false (there is no default to take)",
                                 where));
  c.use_delay_pattern = audio.at("use_delay_pattern").get<bool>();
  // The audio table's element count, checked here: the model multiplies K, V and H freely.
  checked_product({c.num_codebooks, c.codebook_size, c.hidden_size},
                  where + ": num_codebooks x vocab_size x hidden_size (the audio table)");
  const nlohmann::json* id = config.contains("audio_token_id") ? &config.at("audio_token_id") : nullptr;
  if (!id || !id->is_number_integer() || (id->is_number_unsigned() && id->get<std::uint64_t>() > 1u << 31))
    throw InputError(fmt::format("{}: field 'audio_token_id' must be an integer id (there is no default to take)",
                                 label));
  c.audio_token_id = id->get<std::int64_t>();
  return c;
}

}  // namespace zoo::higgs
