// HF config.json handling of the qwen3 plugin, seen from outside: models are created through the
// plugin registry from hand-built configs, and checked by their requirements, load plans, numbers
// and errors.
#include "qwen3/fixture_test_util.hpp"

#include <algorithm>
#include <limits>
#include <optional>

#include "zoo/checkpoint.hpp"
#include "zoo/compare.hpp"
#include "zoo/load_plan.hpp"
#include "zoo/request.hpp"

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

json small_config() {
  return json{{"model_type", "qwen3"},
              {"vocab_size", 96},
              {"hidden_size", 64},
              {"intermediate_size", 128},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"head_dim", 16},
              {"rms_norm_eps", 1e-6},
              {"rope_theta", 10000.0},
              {"tie_word_embeddings", true},
              {"hidden_act", "silu"}};
}

std::shared_ptr<Model> create(const json& config, std::shared_ptr<const WeightSource> weights = nullptr) {
  ModelArgs args;
  args.config = config;
  args.weights = weights ? std::move(weights) : std::make_shared<EmptySource>();
  args.device = Device{};
  args.dtype = DType::F32;
  return registry().create_model("qwen3", args);
}

std::optional<TensorRequirement> requirement(const Model& model, const std::string& name) {
  for (auto& r : model.requirements())
    if (r.name == name) return r;
  return std::nullopt;
}

// Logits of the fixture's request for a model built from `config` over the fixture's weights.
HostTensor fixture_logits(const std::string& fixture, const json& config) {
  auto weights = open_checkpoint(fixture_dir(fixture));
  auto model = create(config, weights);
  const LoadPlan plan = make_load_plan(model->requirements(), model->weight_source());
  INFO(plan.table());
  REQUIRE(plan.ok());
  model->load();
  const Prompt prompt = model->prepare(load_request(fixture_dir(fixture) / "request.json"));
  auto session = model->new_session();
  return std::move(session->forward(prompt.step({.hidden = false, .logits = true, .all_positions = true})).logits);
}

std::string error_for(const json& config) {
  return input_error_of([&] { create(config); });
}

}  // namespace

TEST_CASE("qwen3 config: rope_theta flat, under rope_parameters, or null flat with nested value", "[qwen3]") {
  const json base = load_hf_config(fixture_dir("qwen3-tiny"));
  REQUIRE(base.at("rope_theta").get<double>() != 10000.0);  // else "ignored" and "read" look alike
  const double theta = base.at("rope_theta").get<double>();
  const HostTensor flat = fixture_logits("qwen3-tiny", base);
  {
    const HostTensor golden = TraceFile(fixture_dir("qwen3-tiny") / "golden.safetensors").get("logits");
    CHECK(compare_tensors("logits", golden.view(), flat.view()).cosine >= 0.99999);
  }

  json nested = base;
  nested.erase("rope_theta");
  nested["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", theta}};
  CHECK(max_abs_diff(fixture_logits("qwen3-tiny", nested), flat) == 0.0);

  json null_flat = nested;
  null_flat["rope_theta"] = nullptr;
  CHECK(max_abs_diff(fixture_logits("qwen3-tiny", null_flat), flat) == 0.0);

  // An integer theta (the fixture's own spelling) and a float one are the same theta.
  json float_flat = base;
  float_flat["rope_theta"] = theta + 0.0;
  CHECK(max_abs_diff(fixture_logits("qwen3-tiny", float_flat), flat) == 0.0);

  // And theta matters for this prompt, so the equalities above are not vacuous.
  json other = base;
  other["rope_theta"] = 10000.0;
  CHECK(max_abs_diff(fixture_logits("qwen3-tiny", other), flat) > 1e-3);
  json absent = base;
  absent.erase("rope_theta");
  CHECK(max_abs_diff(fixture_logits("qwen3-tiny", absent), flat) > 1e-3);
}

TEST_CASE("qwen3 config: tied head ignores a stray lm_head.weight in the checkpoint", "[qwen3]") {
  const fs::path dir = fixture_dir("qwen3-tiny-sharded");
  auto weights = open_checkpoint(dir);
  REQUIRE(weights->contains("lm_head.weight"));  // the fixture's point
  json config = load_hf_config(dir);
  REQUIRE(config.at("tie_word_embeddings") == true);

  auto tied = create(config, weights);
  CHECK_FALSE(requirement(*tied, "lm_head.weight").has_value());
  REQUIRE(requirement(*tied, "model.embed_tokens.weight").has_value());
  const LoadPlan plan = make_load_plan(tied->requirements(), tied->weight_source());
  CHECK(plan.ok());
  CHECK(std::count(plan.unused.begin(), plan.unused.end(), "lm_head.weight") == 1);
  CHECK(plan.unused.size() == 1);

  // Untied, the same file's lm_head is required and found, and it is a different head.
  config["tie_word_embeddings"] = false;
  auto untied = create(config, weights);
  const auto head = requirement(*untied, "lm_head.weight");
  REQUIRE(head.has_value());
  CHECK(head->shape == Shape{config.at("vocab_size").get<std::int64_t>(), config.at("hidden_size").get<std::int64_t>()});
  CHECK_FALSE(head->optional);
  const LoadPlan untied_plan = make_load_plan(untied->requirements(), untied->weight_source());
  CHECK(untied_plan.ok());
  CHECK(untied_plan.unused.empty());

  config["tie_word_embeddings"] = true;
  const HostTensor tied_logits = fixture_logits("qwen3-tiny-sharded", config);
  config["tie_word_embeddings"] = false;
  const HostTensor untied_logits = fixture_logits("qwen3-tiny-sharded", config);
  CHECK(max_abs_diff(tied_logits, untied_logits) > 1e-3);
}

TEST_CASE("qwen3 config: an untied checkpoint without lm_head.weight is a plan problem", "[qwen3]") {
  json config = load_hf_config(fixture_dir("qwen3-tiny"));
  config["tie_word_embeddings"] = false;
  auto model = create(config, open_checkpoint(fixture_dir("qwen3-tiny")));
  const LoadPlan plan = make_load_plan(model->requirements(), model->weight_source());
  CHECK_FALSE(plan.ok());
  CHECK(plan.problem_count() == 1);
  const auto it = std::find_if(plan.entries.begin(), plan.entries.end(),
                               [](const PlanEntry& e) { return e.requirement.name == "lm_head.weight"; });
  REQUIRE(it != plan.entries.end());
  CHECK(it->status == PlanEntry::Status::Missing);
}

TEST_CASE("qwen3 config: head_dim * heads may differ from hidden_size", "[qwen3]") {
  json config = small_config();
  config["head_dim"] = 32;  // 4 x 32 = 128 != 64
  auto model = create(config);
  CHECK(requirement(*model, "model.layers.0.self_attn.q_proj.weight")->shape == Shape{128, 64});
  CHECK(requirement(*model, "model.layers.0.self_attn.k_proj.weight")->shape == Shape{64, 64});
  CHECK(requirement(*model, "model.layers.1.self_attn.v_proj.weight")->shape == Shape{64, 64});
  CHECK(requirement(*model, "model.layers.1.self_attn.o_proj.weight")->shape == Shape{64, 128});
  CHECK(requirement(*model, "model.layers.1.self_attn.q_norm.weight")->shape == Shape{32});
  CHECK(requirement(*model, "model.layers.1.mlp.down_proj.weight")->shape == Shape{64, 128});
  CHECK_FALSE(requirement(*model, "model.layers.2.input_layernorm.weight").has_value());
  CHECK(model->info().hidden_size == 64);
  CHECK(model->info().num_layers == 2);
  CHECK(model->info().vocab_size == 96);

  // Without head_dim it is Qwen3Config's default, 128 (not hidden_size / heads); null is None,
  // which the modeling code's getattr turns into hidden_size / heads.
  config.erase("head_dim");
  auto defaulted = create(config);
  CHECK(requirement(*defaulted, "model.layers.0.self_attn.q_proj.weight")->shape == Shape{512, 64});
  CHECK(requirement(*defaulted, "model.layers.0.self_attn.k_norm.weight")->shape == Shape{128});
  config["head_dim"] = nullptr;
  CHECK(requirement(*create(config), "model.layers.0.self_attn.q_proj.weight")->shape == Shape{64, 64});
  CHECK(requirement(*create(config), "model.layers.0.self_attn.k_norm.weight")->shape == Shape{16});
}

TEST_CASE("qwen3 config: unsupported features are InputErrors naming the field", "[qwen3]") {
  {
    json config = small_config();
    config["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};  // the older spelling
    CHECK_THAT(error_for(config), Contains("rope_type") && Contains("dynamic"));
  }
  {
    json config = small_config();
    config["rope_parameters"] = {{"rope_type", "longrope"}, {"factor", 2.0}, {"rope_theta", 10000.0}};
    CHECK_THAT(error_for(config), Contains("longrope"));
  }
  {
    json config = small_config();
    config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};  // no band parameters
    CHECK_THAT(error_for(config), Contains("llama3") && Contains("original_max_position_embeddings"));
  }
  {
    json config = small_config();
    config["use_sliding_window"] = true;
    config["sliding_window"] = 4096;
    CHECK_THAT(error_for(config), Contains("use_sliding_window"));
  }
  {
    json config = small_config();
    config["attention_bias"] = "yes";
    CHECK_THAT(error_for(config), Contains("attention_bias"));
  }
  {
    json config = small_config();
    config["hidden_act"] = "relu";  // silu and the GELUs run; others are refused
    CHECK_THAT(error_for(config), Contains("hidden_act"));
  }
  // The supported values of the same fields are accepted.
  json config = small_config();
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  config["rope_scaling"] = nullptr;
  config["use_sliding_window"] = false;
  config["sliding_window"] = nullptr;
  config["attention_bias"] = false;
  CHECK_NOTHROW(create(config));
  // Scaled RoPE and attention biases are features of the shared decoder runtime, not errors.
  for (const json& rope : {json{{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 10000.0}},
                           json{{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 10000.0},
                                {"original_max_position_embeddings", 512}}}) {
    json scaled = small_config();
    scaled["rope_parameters"] = rope;
    CHECK_NOTHROW(create(scaled));
  }
  json biased = small_config();
  biased["attention_bias"] = true;
  auto with_bias = create(biased);
  CHECK(requirement(*with_bias, "model.layers.0.self_attn.q_proj.bias")->shape == Shape{64});
  CHECK(requirement(*with_bias, "model.layers.1.self_attn.o_proj.bias")->shape == Shape{64});
  CHECK_FALSE(requirement(*create(small_config()), "model.layers.0.self_attn.q_proj.bias"));
}

TEST_CASE("qwen3 config: inconsistent or missing sizes are InputErrors naming the field", "[qwen3]") {
  {
    json config = small_config();
    config["num_key_value_heads"] = 3;  // 4 heads
    CHECK_THAT(error_for(config), Contains("num_key_value_heads") && Contains("num_attention_heads"));
  }
  {
    json config = small_config();
    config["head_dim"] = nullptr;
    config["num_attention_heads"] = 6;  // 64 % 6 != 0
    config["num_key_value_heads"] = 3;
    CHECK_THAT(error_for(config), Contains("head_dim"));
  }
  for (const char* field : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    INFO("field " << field);
    json missing = small_config();
    missing.erase(field);
    CHECK_THAT(error_for(missing), Contains(field) && Contains("missing"));
    json wrong_type = small_config();
    wrong_type[field] = "64";
    CHECK_THAT(error_for(wrong_type), Contains(field));
    json zero = small_config();
    zero[field] = 0;
    CHECK_THAT(error_for(zero), Contains(field));
  }
  {
    json config = small_config();
    config["rms_norm_eps"] = -1.0;
    CHECK_THAT(error_for(config), Contains("rms_norm_eps"));
  }
  {
    json config = small_config();
    config["rope_theta"] = "big";
    CHECK_THAT(error_for(config), Contains("rope_theta"));
  }
  {
    json config = small_config();
    config["tie_word_embeddings"] = "yes";
    CHECK_THAT(error_for(config), Contains("tie_word_embeddings"));
  }
  CHECK_THAT(error_for(json::array({1, 2})), Contains("object"));
}

TEST_CASE("qwen3 config: absurd sizes are rejected by name before any allocation", "[qwen3][input]") {
  // 2^62 heads wrapped q_dim to 0 (then SIGFPE); 1e9 layers built a 3 GB requirement table.
  const auto with = [](const char* field, json value) {
    json config = small_config();
    config[field] = std::move(value);
    return error_for(config);
  };
  CHECK_THAT(with("num_attention_heads", std::int64_t{1} << 62),
             Contains("num_attention_heads") && Contains("4611686018427387904") && Contains("out of range"));
  CHECK_THAT(with("num_hidden_layers", 1'000'000'000), Contains("num_hidden_layers") && Contains("out of range"));
  CHECK_THAT(with("vocab_size", std::int64_t{1} << 40), Contains("vocab_size") && Contains("out of range"));
  CHECK_THAT(with("hidden_size", std::int64_t{1} << 33), Contains("hidden_size"));
  CHECK_THAT(with("intermediate_size", std::int64_t{1} << 33), Contains("intermediate_size"));
  CHECK_THAT(with("head_dim", std::int64_t{1} << 40), Contains("head_dim"));
  // u64 values are printed as written, never as -1.
  const auto max_u64 = with("num_key_value_heads", std::numeric_limits<std::uint64_t>::max());
  CHECK_THAT(max_u64, Contains("num_key_value_heads") && Contains("18446744073709551615") && !Contains("-1"));
  // The largest accepted values give sizes that still fit in 64 bits (the bounds are chosen so),
  // even for a KV cache at the largest max_context.
  json big = small_config();
  big["num_attention_heads"] = 4096;
  big["num_key_value_heads"] = 4096;
  big["head_dim"] = 4096;
  big["hidden_size"] = 1 << 18;
  big["intermediate_size"] = 1 << 20;
  big["num_hidden_layers"] = 4096;
  big["vocab_size"] = 1 << 24;
  std::shared_ptr<Model> model;
  REQUIRE_NOTHROW(model = create(big));
  CHECK(model->info().num_layers == 4096);
  CHECK(model->requirements().size() == 4096 * 11 + 2);
}

TEST_CASE("qwen3 config: meaningless rope_theta and rms_norm_eps are rejected by name", "[qwen3][input]") {
  const auto with = [](const char* field, json value) {
    json config = small_config();
    config[field] = std::move(value);
    return error_for(config);
  };
  CHECK_THAT(with("rope_theta", 1e-300), Contains("rope_theta") && Contains("out of range"));
  CHECK_THAT(with("rope_theta", 1.0), Contains("rope_theta"));
  CHECK_THAT(with("rope_theta", 0.5), Contains("rope_theta"));
  CHECK_THAT(with("rope_theta", std::numeric_limits<double>::infinity()), Contains("rope_theta"));
  CHECK_THAT(with("rms_norm_eps", 1e308), Contains("rms_norm_eps") && Contains("out of range"));
  CHECK_THAT(with("rms_norm_eps", 0.0), Contains("rms_norm_eps"));
  CHECK_THAT(with("rms_norm_eps", std::numeric_limits<double>::quiet_NaN()), Contains("rms_norm_eps"));
  json nested = small_config();
  nested.erase("rope_theta");
  nested["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e-300}};
  CHECK_THAT(error_for(nested), Contains("rope_parameters.rope_theta"));
  // Ordinary values pass.
  CHECK_NOTHROW(create(small_config()));
}

TEST_CASE("qwen3: max_context is bounded and the KV cache size checked before allocation", "[qwen3][input]") {
  // 576460752303423489 * kv_dim overflowed size_t and corrupted the heap on the first forward.
  const auto with_context = [](std::int64_t max_context) {
    ModelArgs args;
    args.config = small_config();
    args.weights = std::make_shared<EmptySource>();
    args.max_context = max_context;
    return input_error_of([&] { registry().create_model("qwen3", args); });
  };
  CHECK_THAT(with_context(576460752303423489), Contains("max_context") && Contains("576460752303423489"));
  CHECK_THAT(with_context(0), Contains("max_context"));
  CHECK_THAT(with_context(-5), Contains("max_context"));

  // Through open_model, the --max-context override is named.
  ModelSpec spec;
  spec.file = fixture_dir("qwen3-tiny") / "config.json";
  spec.checkpoint = fixture_dir("qwen3-tiny");
  SpecOverrides overrides;
  overrides.max_context = 576460752303423489;
  CHECK_THAT(input_error_of([&] { open_model(spec, registry(), overrides); }),
             Contains("--max-context") && Contains("576460752303423489"));
  overrides.max_context = 64;
  CHECK(open_model(spec, registry(), overrides).spec.max_context == 64);
}

}  // namespace zoo::ptest
