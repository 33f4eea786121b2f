#include "zoo/generation_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <system_error>

#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/model_spec.hpp"

namespace zoo {

namespace {

bool present(const nlohmann::json& object, const char* key) { return object.contains(key) && !object[key].is_null(); }

// A value quoted in an error: escaped and cut short (a list of a million ids is one field).
std::string quoted(const nlohmann::json& value) { return escape_text(value.dump(), 100); }

double number_field(const nlohmann::json& object, const char* key, const std::string& label) {
  const auto& value = object[key];
  if (!value.is_number()) throw InputError(fmt::format("{}: {} must be a number, got {}", label, key, quoted(value)));
  const double x = value.get<double>();
  if (!std::isfinite(x)) throw InputError(fmt::format("{}: {} must be finite, got {}", label, key, quoted(value)));
  return x;
}

}  // namespace

SamplingOptions GenerationDefaults::sampling() const { return resolve_sampling(*this, {}); }

SamplingOptions resolve_sampling(const GenerationDefaults& defaults, const SamplingFlags& flags) {
  const bool sample = flags.temperature ? *flags.temperature > 0 : defaults.do_sample || flags.top_k || flags.top_p;
  const float temperature = flags.temperature.value_or(defaults.temperature);
  SamplingOptions s;
  if (sample && temperature > 0) {
    s.temperature = temperature;
    s.top_k = flags.top_k.value_or(defaults.top_k);
    s.top_p = flags.top_p.value_or(defaults.top_p);
  } else {
    s.top_k = flags.top_k.value_or(0);
    s.top_p = flags.top_p.value_or(1.0f);
  }
  s.repetition_penalty = flags.repetition_penalty.value_or(defaults.repetition_penalty);
  return s;
}

std::vector<std::int64_t> parse_eos_token_ids(const nlohmann::json& object, const std::string& label) {
  std::vector<std::int64_t> ids;
  if (!present(object, "eos_token_id")) return ids;
  const auto& value = object["eos_token_id"];
  auto one = [&](const nlohmann::json& item) {
    if (!item.is_number_integer() || item.get<std::int64_t>() < 0)
      throw InputError(fmt::format("{}: eos_token_id must be a non-negative integer or a list of them, got {}", label,
                                   quoted(value)));
    ids.push_back(item.get<std::int64_t>());
  };
  if (value.is_array()) {
    for (const auto& item : value) one(item);
  } else {
    one(value);
  }
  return ids;
}

GenerationDefaults load_generation_defaults(const std::filesystem::path& model_dir, const nlohmann::json& config) {
  GenerationDefaults d;
  const auto config_label = (model_dir / "config.json").string();
  const auto file = model_dir / "generation_config.json";
  // Any entry by that name is read, so a FIFO, a directory or a symlink loop is refused by name
  // instead of being skipped as absent.
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(file, ec))) {
    const auto gen = load_json_object(file);
    const auto label = file.string();
    d.sampling_source = label;
    if (present(gen, "eos_token_id")) {
      d.eos_token_ids = parse_eos_token_ids(gen, label);
      d.eos_source = label;
    }
    if (present(gen, "do_sample")) {
      if (!gen["do_sample"].is_boolean())
        throw InputError(fmt::format("{}: do_sample must be true or false, got {}", label, quoted(gen["do_sample"])));
      d.do_sample = gen["do_sample"].get<bool>();
    }
    if (present(gen, "temperature")) {
      const double t = number_field(gen, "temperature", label);
      // The bound --temperature has: past it a float overflows (1e300 became inf) and the sampler
      // blamed the flag, which was never given.
      if (t < 0 || t > 100)
        throw InputError(fmt::format("{}: temperature must be within [0, 100], got {}", label, quoted(gen["temperature"])));
      d.temperature = static_cast<float>(t);
    }
    if (present(gen, "top_k")) {
      if (!gen["top_k"].is_number_integer() || gen["top_k"].get<std::int64_t>() < 0 ||
          gen["top_k"].get<std::int64_t>() > (1 << 30))
        throw InputError(fmt::format("{}: top_k must be a non-negative integer, got {}", label, quoted(gen["top_k"])));
      d.top_k = static_cast<int>(gen["top_k"].get<std::int64_t>());
    }
    if (present(gen, "top_p")) {
      const double p = number_field(gen, "top_p", label);
      if (p < 0 || p > 1) throw InputError(fmt::format("{}: top_p must be within [0, 1], got {}", label, p));
      d.top_p = static_cast<float>(p);
    }
    if (present(gen, "repetition_penalty")) {
      const double r = number_field(gen, "repetition_penalty", label);
      if (!(r > 0 && r <= 100))
        throw InputError(fmt::format("{}: repetition_penalty must be within (0, 100], got {}", label, r));
      d.repetition_penalty = static_cast<float>(r);
    }
  }
  if (d.eos_source.empty() && present(config, "eos_token_id")) {
    d.eos_token_ids = parse_eos_token_ids(config, config_label);
    d.eos_source = config_label;
  }
  return d;
}

}  // namespace zoo
