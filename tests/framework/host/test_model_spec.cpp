#include <catch2/catch.hpp>

#include "framework/validation_test_util.hpp"
#include "zoo/alias_weight_source.hpp"
#include "zoo/compare.hpp"
#include "zoo/error.hpp"
#include "zoo/model_spec.hpp"

using namespace zoo;
using Catch::Contains;
using Catch::StartsWith;

namespace {

// A directory with what a config may point at: a checkpoint dir, a request and a golden trace.
struct SpecDir {
  vtest::ScratchDir dir;
  SpecDir() {
    dir.write("ckpt/config.json", R"({"model_type": "qwen3", "hidden_size": 8})");
    dir.write("ckpt/model.safetensors", "");
    dir.write("val/request.json", R"({"input_ids": [1]})");
    dir.write("val/golden.safetensors", "");
  }
  std::filesystem::path config(const std::string& yaml) const { return dir.write("cfg/model.yaml", yaml); }
  // The InputError message for a config, which must start with "FILE:LINE:COL: ".
  std::string error(const std::string& yaml) const {
    const auto file = config(yaml);
    try {
      load_model_spec(file);
    } catch (const InputError& e) {
      return e.what();
    }
    FAIL("no InputError for:\n" << yaml);
    return {};
  }
  std::string at(int line, int col) const {
    return fmt_path() + ":" + std::to_string(line) + ":" + std::to_string(col) + ": ";
  }
  std::string fmt_path() const { return (dir / "cfg/model.yaml").string(); }
};

}  // namespace

TEST_CASE("load_model_spec reads a full config with paths relative to the YAML", "[model_spec]") {
  SpecDir d;
  const auto file = d.config(R"(# a comment first
model:
  plugin: qwen3
  checkpoint: ../ckpt
  device: cpu
  dtype: bfloat16
  max_context: 128
  tensor_parallel: 2
  batch_invariant: true
plugins:
  paths: [../plugins, /abs/plugins]
weights:
  aliases:
    - {prefix: "model.layers.", stored: "body.layers."}
    - {name: "model.norm.weight", stored: "body.norm.weight"}
    - {drop: "lm_head.weight"}
    - {drop_prefix: "tied.embedding.modality_embeddings.0.model."}
validation:
  request: ../val/request.json
  golden: ../val/golden.safetensors
  points: "embed, layer.*.output ,logits"
  gates:
    semantic:
      - {tensor: logits, cosine: 0.99999, argmax: exact}
)");
  const ModelSpec spec = load_model_spec(file);
  CHECK(spec.file == file);
  REQUIRE(spec.plugin);
  CHECK(*spec.plugin == "qwen3");
  CHECK(spec.checkpoint == (d.dir / "ckpt").lexically_normal());
  CHECK(spec.device == Device{DeviceKind::CPU, 0});
  CHECK(spec.dtype == DType::BF16);
  CHECK(spec.max_context == 128);
  CHECK(spec.tensor_parallel == 2);
  CHECK(spec.batch_invariant);
  REQUIRE(spec.plugin_paths.size() == 2);
  CHECK(spec.plugin_paths[0] == (d.dir / "plugins").lexically_normal());
  CHECK(spec.plugin_paths[1] == "/abs/plugins");

  REQUIRE(spec.aliases.size() == 4);
  CHECK(spec.aliases[0].kind == AliasRule::Kind::Prefix);
  CHECK(spec.aliases[0].requested == "model.layers.");
  CHECK(spec.aliases[0].stored == "body.layers.");
  CHECK(spec.aliases[1].kind == AliasRule::Kind::Exact);
  CHECK(spec.aliases[1].requested == "model.norm.weight");
  CHECK(spec.aliases[1].stored == "body.norm.weight");
  CHECK(spec.aliases[2].kind == AliasRule::Kind::Drop);
  CHECK_FALSE(spec.aliases[2].prefix);
  CHECK(spec.aliases[2].stored == "lm_head.weight");
  CHECK(spec.aliases[3].kind == AliasRule::Kind::Drop);
  CHECK(spec.aliases[3].prefix);

  REQUIRE(spec.validation);
  CHECK(spec.validation->request == (d.dir / "val/request.json").lexically_normal());
  CHECK(spec.validation->golden == (d.dir / "val/golden.safetensors").lexically_normal());
  REQUIRE(spec.validation->points);
  CHECK(*spec.validation->points == std::vector<std::string>{"embed", "layer.*.output", "logits"});
  const auto gates = parse_gates(spec.validation->gates, file.string());
  REQUIRE(gates.size() == 1);
  CHECK(gates[0].group == "semantic");
  CHECK(gates[0].argmax_exact);
}

TEST_CASE("load_model_spec defaults: cpu, float32 on cpu, bfloat16 on cuda", "[model_spec]") {
  SpecDir d;
  auto spec = load_model_spec(d.config("model:\n  checkpoint: ../ckpt\n"));
  CHECK(spec.device.is_cpu());
  CHECK(spec.dtype == DType::F32);
  CHECK_FALSE(spec.plugin);
  CHECK(spec.max_context == 4096);
  CHECK(spec.tensor_parallel == 1);
  CHECK_FALSE(spec.batch_invariant);
  CHECK(spec.aliases.empty());
  CHECK(spec.plugin_paths.empty());
  CHECK_FALSE(spec.validation);

  // dtype default follows the device even when dtype is written before it... or not at all.
  spec = load_model_spec(d.config("model:\n  device: cuda:1\n  checkpoint: ../ckpt/model.safetensors\n"));
  CHECK(spec.device == Device{DeviceKind::CUDA, 1});
  CHECK(spec.dtype == DType::BF16);
  spec = load_model_spec(d.config("model:\n  dtype: float32\n  device: cuda\n  checkpoint: ../ckpt\n"));
  CHECK(spec.dtype == DType::F32);

  // Points as a YAML list; empty optional sections count as absent.
  spec = load_model_spec(d.config(R"(model: {checkpoint: ../ckpt}
plugins:
weights:
validation:
  request: ../val/request.json
  golden: ../val/golden.safetensors
  points: [embed, "layer.*.output,logits"]
)"));
  REQUIRE(spec.validation);
  CHECK(*spec.validation->points == std::vector<std::string>{"embed", "layer.*.output", "logits"});
  CHECK(spec.validation->gates.IsNull());
}

TEST_CASE("load_model_spec errors carry FILE:LINE:COL", "[model_spec]") {
  SpecDir d;
  SECTION("unknown top-level key") {
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nvalidaton:\n  request: x\n"),
               StartsWith(d.at(3, 1)) && Contains("unknown key 'validaton'"));
  }
  SECTION("unknown key in model") {
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  devcie: cpu\n"),
               StartsWith(d.at(3, 3)) && Contains("'devcie'") && Contains("device"));
  }
  SECTION("duplicate key") {
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  checkpoint: ../ckpt\n"),
               StartsWith(d.at(3, 3)) && Contains("duplicate key 'checkpoint'"));
  }
  SECTION("missing model section") {
    CHECK_THAT(d.error("plugins:\n  paths: [a]\n"), StartsWith(d.at(1, 1)) && Contains("'model:'"));
  }
  SECTION("missing checkpoint names the model map") {
    CHECK_THAT(d.error("# header\nmodel:\n  plugin: qwen3\n"), StartsWith(d.at(3, 3)) && Contains("model.checkpoint is required"));
  }
  SECTION("checkpoint that does not exist") {
    CHECK_THAT(d.error("model:\n  device: cpu\n  checkpoint: ../nowhere\n"),
               StartsWith(d.at(3, 15)) && Contains("'../nowhere' does not exist"));
  }
  SECTION("wrong types") {
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  max_context: lots\n"),
               StartsWith(d.at(3, 16)) && Contains("max_context must be an integer"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  max_context: -4\n"),
               StartsWith(d.at(3, 16)) && Contains("positive"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  tensor_parallel: 0\n"),
               StartsWith(d.at(3, 20)) && Contains("model.tensor_parallel 0 is outside 1..64"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  tensor_parallel: 65\n"),
               StartsWith(d.at(3, 20)) && Contains("outside 1..64"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  tensor_parallel: two\n"),
               StartsWith(d.at(3, 20)) && Contains("tensor_parallel must be an integer"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  batch_invariant: sometimes\n"),
               StartsWith(d.at(3, 20)) && Contains("model.batch_invariant must be true or false"));
    CHECK_THAT(d.error("model:\n  checkpoint: [../ckpt]\n"), StartsWith(d.at(2, 15)) && Contains("must be a string"));
    CHECK_THAT(d.error("model: qwen3\n"), StartsWith(d.at(1, 8)) && Contains("model must be a map"));
    CHECK_THAT(d.error("- model\n"), StartsWith(d.at(1, 1)) && Contains("must be a map"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nplugins:\n  paths: {a: b}\n"),
               StartsWith(d.at(4, 10)) && Contains("plugins.paths"));
  }
  SECTION("bad device and dtype") {
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  device: tpu\n"),
               StartsWith(d.at(3, 11)) && Contains("'tpu'"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  dtype: int8\n"),
               StartsWith(d.at(3, 10)) && Contains("'int8'"));
  }
  SECTION("malformed YAML") {
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  device: [cpu\n"),
               StartsWith(d.fmt_path() + ":") && Contains("invalid YAML"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\n  device: cpu: gpu\n"),
               StartsWith(d.fmt_path() + ":3:") && Contains("invalid YAML"));
  }
  SECTION("empty file") { CHECK_THAT(d.error(""), StartsWith(d.at(1, 1)) && Contains("empty")); }
  SECTION("aliases") {
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nweights:\n  aliases:\n    - {prefix: a., name: b, stored: c}\n"),
               StartsWith(d.at(5, 7)) && Contains("exactly one of"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nweights:\n  aliases:\n    - {prefix: a.}\n"),
               StartsWith(d.at(5, 7)) && Contains("exactly one of"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nweights:\n  aliases:\n    - {drop: x, stored: y}\n"),
               StartsWith(d.at(5, 7)));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nweights:\n  aliases:\n    - {rename: x}\n"),
               StartsWith(d.at(5, 8)) && Contains("unknown key 'rename'"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nweights:\n  aliases: {prefix: a}\n"),
               StartsWith(d.at(4, 12)) && Contains("must be a list"));
  }
  SECTION("validation files and keys") {
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nvalidation:\n  request: ../val/missing.json\n"
                       "  golden: ../val/golden.safetensors\n"),
               StartsWith(d.at(4, 12)) && Contains("validation.request") && Contains("does not exist"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nvalidation:\n  request: ../val/request.json\n"
                       "  golden: ../val\n"),
               StartsWith(d.at(5, 11)) && Contains("is a directory"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nvalidation:\n  request: ../val/request.json\n"),
               StartsWith(d.at(4, 3)) && Contains("validation.golden is required"));
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nvalidation:\n  request: ../val/request.json\n"
                       "  golden: ../val/golden.safetensors\n  points: []\n"),
               StartsWith(d.at(6, 11)) && Contains("selects nothing"));
  }
  SECTION("bad gates are reported when the config loads") {
    CHECK_THAT(d.error("model:\n  checkpoint: ../ckpt\nvalidation:\n  request: ../val/request.json\n"
                       "  golden: ../val/golden.safetensors\n  gates:\n    - tensor: logits\n      cosin: 0.9\n"),
               StartsWith(d.at(8, 7)) && Contains("unknown key 'cosin'"));
  }
}

TEST_CASE("load_model_spec on a missing file or directory", "[model_spec]") {
  SpecDir d;
  const auto missing = d.dir / "none.yaml";
  CHECK_THROWS_WITH(load_model_spec(missing), StartsWith(missing.string() + ": ") && Contains("no such file"));
  CHECK_THROWS_WITH(load_model_spec(d.dir.path()), StartsWith(d.dir.path().string() + ": "));
}

TEST_CASE("load_hf_config reads config.json of a checkpoint directory or beside a file", "[model_spec]") {
  SpecDir d;
  CHECK(load_hf_config(d.dir / "ckpt").at("model_type") == "qwen3");
  CHECK(load_hf_config(d.dir / "ckpt/model.safetensors").at("hidden_size") == 8);

  const auto empty = d.dir / "empty";
  std::filesystem::create_directories(empty);
  CHECK_THROWS_WITH(load_hf_config(empty), StartsWith((empty / "config.json").string() + ": "));
  d.dir.write("broken/config.json", "{\"model_type\": ");
  CHECK_THROWS_WITH(load_hf_config(d.dir / "broken"),
                    StartsWith((d.dir / "broken/config.json").string() + ": not valid JSON"));
  d.dir.write("array/config.json", "[1]");
  CHECK_THROWS_WITH(load_hf_config(d.dir / "array"), StartsWith((d.dir / "array/config.json").string() + ": "));
}

TEST_CASE("load_model_spec takes a Hugging Face model directory as a model", "[model_spec]") {
  SpecDir d;
  const ModelSpec spec = load_model_spec(d.dir / "ckpt");
  // The same spec as a YAML naming only the checkpoint.
  const ModelSpec yaml = load_model_spec(d.config("model:\n  checkpoint: ../ckpt\n"));
  CHECK(spec.file == d.dir / "ckpt");
  CHECK(spec.checkpoint == yaml.checkpoint);
  CHECK(spec.plugin == yaml.plugin);
  CHECK_FALSE(spec.plugin);
  CHECK(spec.device == yaml.device);
  CHECK(spec.dtype == yaml.dtype);
  CHECK(spec.max_context == yaml.max_context);
  CHECK(spec.aliases.empty());
  CHECK_FALSE(spec.validation);
  CHECK(checkpoint_directory(spec) == spec.checkpoint);
  CHECK(checkpoint_directory(load_model_spec(d.config("model:\n  checkpoint: ../ckpt/model.safetensors\n"))) ==
        (d.dir / "ckpt").lexically_normal());

  // A directory that is not a model says what it expected.
  CHECK_THROWS_WITH(load_model_spec(d.dir / "val"),
                    StartsWith((d.dir / "val").string() + ": ") && Contains("without config.json"));
}
