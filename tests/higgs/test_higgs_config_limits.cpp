// Absurd sizes in a Higgs config.json are rejected by name before anything is allocated, and
// 64-bit values are quoted as written (docs/safety.md, "Input files").
#include "qwen3/fixture_test_util.hpp"

#include <limits>

#include <nlohmann/json.hpp>

#include "zoo/checkpoint.hpp"
#include "zoo/model_spec.hpp"

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

std::string error_with(const std::function<void(json&)>& edit) {
  const fs::path dir = fixture_dir("higgs-tiny");
  ModelArgs args;
  args.config = load_hf_config(dir);
  edit(args.config);
  args.weights = open_checkpoint(dir);
  return input_error_of([&] { registry().create_model("higgs_audio", args); });
}

}  // namespace

TEST_CASE("higgs config: absurd audio sizes are InputErrors naming the field", "[higgs][input]") {
  CHECK_THAT(error_with([](json& c) { c["audio_encoder_config"]["num_codebooks"] = std::int64_t{1} << 62; }),
             Contains("num_codebooks") && Contains("4611686018427387904") && Contains("out of range"));
  CHECK_THAT(error_with([](json& c) { c["audio_encoder_config"]["vocab_size"] = std::int64_t{1} << 40; }),
             Contains("vocab_size") && Contains("out of range"));
  const auto u64 = error_with(
      [](json& c) { c["audio_encoder_config"]["num_codebooks"] = std::numeric_limits<std::uint64_t>::max(); });
  CHECK_THAT(u64, Contains("18446744073709551615") && !Contains("-1"));
  CHECK_THAT(error_with([](json& c) { c["text_config"]["hidden_size"] = std::int64_t{1} << 62; }),
             Contains("hidden_size"));
  // The text body's limits apply through text_config too.
  CHECK_THAT(error_with([](json& c) { c["text_config"]["num_hidden_layers"] = 1'000'000'000; }),
             Contains("num_hidden_layers"));
  CHECK_THAT(error_with([](json& c) { c["text_config"]["rms_norm_eps"] = 1e308; }), Contains("rms_norm_eps"));
}

TEST_CASE("higgs config: the delay pattern and the audio slot id are required as written", "[higgs][input]") {
  // No transformers class gives either a default, so a config without them is refused by name.
  CHECK_THAT(error_with([](json& c) { c["audio_encoder_config"].erase("use_delay_pattern"); }),
             Contains("use_delay_pattern"));
  CHECK_THAT(error_with([](json& c) { c["audio_encoder_config"]["use_delay_pattern"] = "yes"; }),
             Contains("use_delay_pattern"));
  CHECK_THAT(error_with([](json& c) { c.erase("audio_token_id"); }), Contains("audio_token_id"));
}

}  // namespace zoo::ptest
