#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/generation.hpp"

namespace zoo {

// What a Hugging Face model directory says about generating: the ids that end a sequence and the
// sampling defaults. Unset fields take transformers' global defaults (do_sample false, temperature
// 1, top_k 50, top_p 1), so a model asks for sampling exactly when transformers would sample.
struct GenerationDefaults {
  std::vector<std::int64_t> eos_token_ids;  // empty: nothing stops generation early
  bool do_sample = false;
  float temperature = 1.0f;
  int top_k = 50;
  float top_p = 1.0f;
  float repetition_penalty = 1.0f;  // applies whether or not it samples, as in transformers
  std::string eos_source;       // the file the eos ids came from ("" when none)
  std::string sampling_source;  // generation_config.json when it was read, else ""

  // resolve_sampling(*this, {}): greedy unless do_sample; the seed is left at 0.
  SamplingOptions sampling() const;
};

// Sampling settings a user gave (command-line flags); unset: not given.
struct SamplingFlags {
  std::optional<float> temperature;
  std::optional<int> top_k;
  std::optional<float> top_p;
  std::optional<float> repetition_penalty;
};

// What a run samples with. It samples when the model's do_sample says so or the user asks to: a
// temperature > 0, or a top_k or top_p given (a filter is only given to sample with); a
// temperature of 0 is greedy whatever else. When sampling, each setting is the flag, else the
// model's generation_config.json value, else GenerationConfig's default (temperature 1, top_k 50,
// top_p 1). When greedy, top_k / top_p are off unless given, so that Sampler can refuse a filter
// that greedy decoding would silently ignore. The repetition penalty is the flag, else the model's,
// either way. The seed is left at 0.
SamplingOptions resolve_sampling(const GenerationDefaults& defaults, const SamplingFlags& flags);

// Reads `eos_token_id` (an integer, a list of integers, or null) and do_sample / temperature / top_k
// / top_p / repetition_penalty from DIR/generation_config.json when it exists, taking eos_token_id from `config` (the
// parsed DIR/config.json) when generation_config.json has none, as transformers does. InputError
// "FILE: ..." on malformed JSON or a field of the wrong type or range.
GenerationDefaults load_generation_defaults(const std::filesystem::path& model_dir, const nlohmann::json& config);

// The eos_token_id field of one config object: integer, list of integers or null/absent. InputError
// "LABEL: ..." otherwise.
std::vector<std::int64_t> parse_eos_token_ids(const nlohmann::json& object, const std::string& label);

}  // namespace zoo
