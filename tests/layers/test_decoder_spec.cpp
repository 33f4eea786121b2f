// DecoderSpec: the tensors and tap stages each switch adds, and the checks on sizes.
#include <catch2/catch.hpp>

#include <algorithm>

#include "zoo/error.hpp"
#include "zoo/layers/decoder.hpp"
#include "zoo/layers/hf_config.hpp"

namespace {

using nlohmann::json;
using zoo::layers::DecoderSpec;

DecoderSpec small(const json& extra = json::object()) {
  json config{{"vocab_size", 32}, {"hidden_size", 16}, {"intermediate_size", 24}, {"num_hidden_layers", 2},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 8}};
  config.update(extra);
  return zoo::layers::read_hf_decoder_config(config, "test", "test/config.json");
}

bool has(const DecoderSpec& spec, const std::string& name) {
  const auto reqs = zoo::layers::decoder_requirements(spec);
  return std::any_of(reqs.begin(), reqs.end(), [&](const auto& r) { return r.name == name; });
}

}  // namespace

TEST_CASE("decoder spec: switches add exactly their tensors and tap stages", "[layers]") {
  DecoderSpec plain = small();
  CHECK(zoo::layers::decoder_requirements(plain).size() == 1 + 2 * 9 + 1 + 1);  // untied head, no q/k norm
  CHECK_FALSE(has(plain, "model.layers.0.self_attn.q_norm.weight"));
  CHECK(zoo::layers::layer_stages(plain).size() == 15);
  CHECK(has(plain, "lm_head.weight"));

  DecoderSpec qk = small({{"tie_word_embeddings", true}});
  qk.qk_norm = zoo::layers::QkNorm::per_head;
  CHECK(has(qk, "model.layers.1.self_attn.k_norm.weight"));
  CHECK_FALSE(has(qk, "lm_head.weight"));
  CHECK(zoo::layers::layer_stages(qk).size() == 17);

  DecoderSpec biased = small({{"attention_bias", true}, {"mlp_bias", true}});
  for (const char* module : {"q_proj", "k_proj", "v_proj", "o_proj"})
    CHECK(has(biased, std::string("model.layers.1.self_attn.") + module + ".bias"));
  for (const char* module : {"gate_proj", "up_proj", "down_proj"})
    CHECK(has(biased, std::string("model.layers.0.mlp.") + module + ".bias"));
  CHECK(biased.parameter_count() == plain.parameter_count() + 2 * (32 + 16 + 16 + 16 + 24 + 24 + 16));

  // Tensor names come from the names table alone.
  DecoderSpec renamed = small();
  renamed.names.layer_prefix = "body.blocks.{}.";
  renamed.names.q_proj = "attn.wq";
  CHECK(has(renamed, "body.blocks.1.attn.wq.weight"));
  CHECK_FALSE(has(renamed, "model.layers.1.self_attn.q_proj.weight"));
}

TEST_CASE("decoder spec: inconsistent sizes are InputErrors naming the field", "[layers][input]") {
  using Catch::Matchers::Contains;
  auto error_for = [](const DecoderSpec& spec) {
    try {
      spec.check("test/config.json");
    } catch (const zoo::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  DecoderSpec gqa = small();
  gqa.num_kv_heads = 3;
  CHECK_THAT(error_for(gqa), Contains("num_key_value_heads"));
  DecoderSpec table = small();
  table.ropes[0].inv_freq.pop_back();
  CHECK_THAT(error_for(table), Contains("RoPE table"));
  DecoderSpec zero = small();
  zero.intermediate_size = 0;
  CHECK_THAT(error_for(zero), Contains("intermediate_size"));
  CHECK_THAT(error_for(small()), Contains("no error"));
}
