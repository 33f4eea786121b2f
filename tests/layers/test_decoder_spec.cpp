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
  json config{{"vocab_size", 32},       {"hidden_size", 16},        {"intermediate_size", 24},
              {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
              {"head_dim", 8},          {"rms_norm_eps", 1e-6}};
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
  CHECK(zoo::layers::layer_stages(plain, 0).size() == 15);
  CHECK(has(plain, "lm_head.weight"));

  DecoderSpec qk = small({{"tie_word_embeddings", true}});
  qk.qk_norm = zoo::layers::QkNorm::per_head;
  CHECK(has(qk, "model.layers.1.self_attn.k_norm.weight"));
  CHECK_FALSE(has(qk, "lm_head.weight"));
  CHECK(zoo::layers::layer_stages(qk, 0).size() == 17);

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

namespace {
DecoderSpec small_moe(const json& extra = json::object()) {
  json config{{"vocab_size", 32},
              {"hidden_size", 16},
              {"intermediate_size", 24},
              {"num_hidden_layers", 4},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"head_dim", 8},
              {"num_experts", 6},
              {"num_experts_per_tok", 2},
              {"moe_intermediate_size", 8},
              {"rms_norm_eps", 1e-6}};
  config.update(extra);
  zoo::layers::HfFamilyRules rules;
  rules.reads = {"num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
                 "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers"};
  return zoo::layers::read_hf_decoder_config(config, "test", "test/config.json", rules);
}
}  // namespace

TEST_CASE("decoder spec: mixture-of-experts layers, their tensors, stages and checks", "[layers][input]") {
  using zoo::layers::MlpKind;
  // decoder_sparse_step 2: layers 1 and 3 sparse; mlp_only_layers takes layer 3 back.
  const DecoderSpec spec = small_moe({{"decoder_sparse_step", 2}, {"mlp_only_layers", {3}}, {"norm_topk_prob", true}});
  CHECK(spec.moe.experts == 6);
  CHECK(spec.moe.top_k == 2);
  CHECK(spec.moe.normalize_top_k);
  CHECK(spec.moe_layers() == 1);
  CHECK(spec.is_moe(1));
  CHECK_FALSE(spec.is_moe(0));
  CHECK_FALSE(spec.is_moe(3));
  CHECK(has(spec, "model.layers.1.mlp.gate.weight"));
  CHECK(has(spec, "model.layers.1.mlp.experts.5.down_proj.weight"));
  CHECK_FALSE(has(spec, "model.layers.1.mlp.gate_proj.weight"));
  CHECK(has(spec, "model.layers.0.mlp.gate_proj.weight"));
  CHECK_FALSE(has(spec, "model.layers.0.mlp.gate.weight"));
  const auto moe = zoo::layers::layer_stages(spec, 1), dense = zoo::layers::layer_stages(spec, 0);
  CHECK(moe.size() == dense.size());
  CHECK(std::count(moe.begin(), moe.end(), "router_topk_ids") == 1);
  CHECK(std::count(dense.begin(), dense.end(), "router_topk_ids") == 0);
  CHECK_THAT(spec.summary(), Catch::Matchers::Contains("6 experts top-2 normalized (ffn 8) on 1/4 layers"));
  // transformers 5 names the count num_local_experts; 0 experts is a dense model.
  CHECK(small_moe({{"num_experts", nullptr}, {"num_local_experts", 6}}).moe_layers() == 4);
  CHECK(small_moe({{"num_experts", 0}}).moe_layers() == 0);
  // Bad values are refused by field.
  CHECK_THROWS_WITH(small_moe({{"num_experts_per_tok", 7}}), Catch::Matchers::Contains("num_experts_per_tok"));
  CHECK_THROWS_WITH(small_moe({{"mlp_only_layers", {4}}}), Catch::Matchers::Contains("mlp_only_layers entry 4"));
  CHECK_THROWS_WITH(small_moe({{"mlp_only_layers", 1}}), Catch::Matchers::Contains("mlp_only_layers"));
  CHECK_THROWS_WITH(small_moe({{"moe_intermediate_size", nullptr}}), Catch::Matchers::Contains("moe_intermediate_size"));
  CHECK_THROWS_WITH(small_moe({{"mlp_bias", true}}), Catch::Matchers::Contains("mlp_bias"));
  // A family that does not read experts refuses them.
  CHECK_THROWS_WITH(small({{"num_experts", 4}}), Catch::Matchers::Contains("num_experts"));
}
