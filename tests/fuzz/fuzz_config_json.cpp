// libFuzzer target: a config.json as the tool reads it. The bytes go through the one JSON reader
// (parse_json_text: depth limit, no echo of input) and, when they are an object, through the decoder
// config reader and the Higgs config parser, as the object itself and as a text_config. Every input must end
// in a value or a zoo::InputError; any other exception, crash or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "higgs_config.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"
#include "zoo/layers/hf_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json config;
  try {
    config = zoo::parse_json_text(text, "fuzz/config.json");
  } catch (const zoo::InputError&) {
    return 0;
  }
  try {
    const auto c = zoo::layers::read_hf_decoder_config(config, "fuzz", "fuzz/config.json");
    // A parsed config's derived sizes must not overflow (the reader checked them).
    (void)c.parameter_count();
    (void)c.summary();
    (void)c.kv_cache_elements(1, "fuzz");
  } catch (const zoo::InputError&) {
  }
  try {
    const auto h = zoo::higgs::HiggsConfig::parse(config, "fuzz/config.json");
    (void)zoo::layers::read_hf_decoder_config(h.text_config, "fuzz", "fuzz/config.json text_config");
  } catch (const zoo::InputError&) {
  }
  return 0;
}
