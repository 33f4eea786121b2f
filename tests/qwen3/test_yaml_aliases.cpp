// A checkpoint whose tensors are stored under other names (body.* instead of model.*) runs through
// the qwen3 plugin with nothing but `weights.aliases` in the model YAML: the plan shows both names,
// the views are the stored bytes (no copy), and the model still matches its transformers golden.
#include <catch2/catch.hpp>

#include <fstream>

#include "qwen3/fixture_test_util.hpp"
#include "zoo/alias_weight_source.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/safetensors.hpp"

using namespace zoo;
using namespace zoo::ptest;

namespace {

// Rewrites the qwen3-tiny fixture with model.* renamed to body.* (embed_tokens to body.embed).
std::string renamed(const std::string& name) {
  if (name == "model.embed_tokens.weight") return "body.embed.weight";
  if (name.starts_with("model.")) return "body." + name.substr(6);
  return name;
}

}  // namespace

TEST_CASE("YAML aliases map model.* requests onto body.* storage, no copy", "[qwen3][aliases]") {
  TempDir tmp;
  const fs::path source = fixture_dir("qwen3-tiny");
  const fs::path ckpt = tmp.path() / "renamed";
  fs::create_directories(ckpt);
  {
    auto original = open_checkpoint(source);
    std::vector<std::pair<std::string, TensorView>> tensors;
    for (const auto& name : original->names()) tensors.emplace_back(renamed(name), original->view(name));
    write_safetensors(ckpt / "model.safetensors", tensors);
    fs::copy_file(source / "config.json", ckpt / "config.json");
  }
  const fs::path yaml = tmp.path() / "renamed.yaml";
  std::ofstream(yaml) << "model:\n  plugin: qwen3\n  checkpoint: renamed\n"
                      << "weights:\n  aliases:\n"
                      << "    - {prefix: \"model.layers.\", stored: \"body.layers.\"}\n"
                      << "    - {name: model.norm.weight, stored: body.norm.weight}\n"
                      << "    - {name: model.embed_tokens.weight, stored: body.embed.weight}\n"
                      << "validation:\n  request: " << (source / "request.json").string() << "\n"
                      << "  golden: " << (source / "golden.safetensors").string() << "\n"
                      << "  gates:\n    - {tensor: \"layer.*.output\", cosine: 0.99999}\n"
                      << "    - {tensor: logits, cosine: 0.99999, argmax: exact}\n";

  auto opened = open_model(load_model_spec(yaml), registry());
  REQUIRE(opened.plan.ok());
  for (const auto& entry : opened.plan.entries) {
    REQUIRE(entry.found.has_value());
    CHECK(entry.found->stored_name == renamed(entry.requirement.name));
    // No copy: the aliased view is the mapped bytes of the stored tensor.
    const auto& aliased = opened.model->weight_source();
    const auto* alias = dynamic_cast<const AliasWeightSource*>(&aliased);
    REQUIRE(alias != nullptr);
    CHECK(aliased.view(entry.requirement.name).data == alias->base().view(entry.found->stored_name).data);
  }

  const auto plan = run_zoo("plan " + shell_quote(yaml.string()));
  CHECK(plan.exit_code == 0);
  CHECK(plan.output.find("model.norm.weight <- body.norm.weight") != std::string::npos);
  CHECK(plan.output.find("model.layers.0.self_attn.q_proj.weight <- body.layers.0.self_attn.q_proj.weight") !=
        std::string::npos);

  const auto validate = run_zoo("validate -q " + shell_quote(yaml.string()));
  INFO(validate.output);
  CHECK(validate.exit_code == 0);

  // Without the aliases the same checkpoint is a plan failure (exit 1) naming the missing tensors.
  const fs::path bare = tmp.path() / "bare.yaml";
  std::ofstream(bare) << "model:\n  plugin: qwen3\n  checkpoint: renamed\n";
  const auto missing = run_zoo("plan " + shell_quote(bare.string()));
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("model.norm.weight") != std::string::npos);
}
