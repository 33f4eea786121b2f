// Broken Higgs checkpoints through the `zoo` CLI. The checkpoints are written here, from the
// higgs-tiny fixture, with zoo::write_safetensors (no Python needed): a missing body tensor, a
// wrong audio table shape, a config whose K*V disagrees with the table, and checkpoint contents or
// configs the plugin refuses. Plan problems exit 1, bad input exits 2, and the output names the
// tensor or field.
#include "qwen3/fixture_test_util.hpp"

#include <sstream>

#include <nlohmann/json.hpp>

#include "zoo/checkpoint.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/weight_source.hpp"

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

constexpr const char* kAudioTable = "tied.embedding.modality_embeddings.0.embedding.weight";

// A copy of higgs-tiny in one safetensors file, edited, plus a model YAML naming no plugin (the
// plugin is picked by config.json's model_type, as for a user's checkpoint).
class BrokenCheckpoint {
 public:
  BrokenCheckpoint() : source_(open_checkpoint(fixture_dir("higgs-tiny"))) {
    config_ = load_hf_config(fixture_dir("higgs-tiny"));
    for (const auto& name : source_->names()) tensors_.emplace_back(name, source_->view(name));
  }

  json& config() { return config_; }
  void remove(const std::string& name) {
    const auto before = tensors_.size();
    std::erase_if(tensors_, [&](const auto& t) { return t.first == name; });
    REQUIRE(tensors_.size() + 1 == before);
  }
  void replace(const std::string& name, Shape shape) {
    remove(name);
    extra_.push_back(std::make_unique<HostTensor>(DType::BF16, std::move(shape)));
    tensors_.emplace_back(name, extra_.back()->view());
  }
  void add(const std::string& name, Shape shape) {
    extra_.push_back(std::make_unique<HostTensor>(DType::F32, std::move(shape)));
    tensors_.emplace_back(name, extra_.back()->view());
  }

  // Writes the checkpoint and its YAML; returns the YAML's path.
  fs::path write() {
    const fs::path ckpt = dir_ / "ckpt";
    fs::create_directories(ckpt);
    write_safetensors(ckpt / "model.safetensors", tensors_);
    dir_.write("ckpt/config.json", config_.dump(2));
    return dir_.write("broken.yaml", "model:\n  checkpoint: ckpt\n  device: cpu\n");
  }

  std::int64_t K() const { return config_.at("audio_encoder_config").at("num_codebooks").get<std::int64_t>(); }
  std::int64_t V() const { return config_.at("audio_encoder_config").at("vocab_size").get<std::int64_t>(); }
  std::int64_t H() const { return config_.at("text_config").at("hidden_size").get<std::int64_t>(); }

 private:
  TempDir dir_;
  std::shared_ptr<const WeightSource> source_;
  json config_;
  std::vector<std::pair<std::string, TensorView>> tensors_;
  std::vector<std::unique_ptr<HostTensor>> extra_;
};

// The output line that names `tensor` must also carry `status`.
bool some_line_has(const std::string& output, const std::string& tensor, const std::string& status) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (line.find(tensor) != std::string::npos && line.find(status) != std::string::npos) return true;
  return false;
}

void check_no_signal(const CommandResult& r) {
  INFO(r.output);
  REQUIRE(r.signal == 0);
}

}  // namespace

TEST_CASE("higgs manifest: the unedited copy plans and validates cleanly", "[higgs]") {
  BrokenCheckpoint ckpt;  // nothing broken: proves the harness itself is sound
  const fs::path yaml = ckpt.write();
  const auto r = run_zoo("plan " + shell_quote(yaml.string()));
  check_no_signal(r);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(some_line_has(r.output, "body.layers.1.mlp.down_proj.weight", "ok"));
  CHECK(some_line_has(r.output, kAudioTable, "ok"));
  const auto golden = fixture_dir("higgs-tiny");
  const auto trace = yaml.parent_path() / "trace.safetensors";
  const auto t = run_zoo("trace -q " + shell_quote(yaml.string()) + " --request " +
                         shell_quote((golden / "request.json").string()) + " --points '*' --out " +
                         shell_quote(trace.string()));
  check_no_signal(t);
  CHECK(t.exit_code == 0);
  // With the shipped config's gates: a compare without gates checks nothing and never passes.
  const auto c = run_zoo("compare " + shell_quote((golden / "golden.safetensors").string()) + " " +
                         shell_quote(trace.string()) + " --gates " +
                         shell_quote((fs::path(ZOO_SOURCE_DIR) / "configs" / "higgs-tiny.yaml").string()));
  check_no_signal(c);
  INFO(c.output);
  CHECK(c.exit_code == 0);
}

TEST_CASE("higgs manifest: a missing body tensor fails the plan naming it", "[higgs]") {
  BrokenCheckpoint ckpt;
  ckpt.remove("body.layers.1.mlp.down_proj.weight");
  const fs::path yaml = ckpt.write();
  const auto r = run_zoo("plan " + shell_quote(yaml.string()));
  check_no_signal(r);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(some_line_has(r.output, "body.layers.1.mlp.down_proj.weight", "missing"));

  // Running it refuses to load: also exit 1, pointing at `zoo plan`.
  const auto t = run_zoo("trace -q " + shell_quote(yaml.string()) + " --request " +
                         shell_quote((fixture_dir("higgs-tiny") / "request.json").string()) + " --out " +
                         shell_quote((yaml.parent_path() / "t.safetensors").string()));
  check_no_signal(t);
  INFO(t.output);
  CHECK(t.exit_code == 1);
  CHECK_THAT(t.output, Contains("plan"));
  CHECK_FALSE(fs::exists(yaml.parent_path() / "t.safetensors"));
}

TEST_CASE("higgs manifest: a missing body norm or text embedding fails the plan naming it", "[higgs]") {
  for (const char* name : {"body.norm.weight", "tied.embedding.text_embedding.weight", kAudioTable}) {
    INFO("removed " << name);
    BrokenCheckpoint ckpt;
    ckpt.remove(name);
    const auto r = run_zoo("plan " + shell_quote(ckpt.write().string()));
    check_no_signal(r);
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK(some_line_has(r.output, name, "missing"));
  }
}

TEST_CASE("higgs manifest: a wrong audio table shape fails the plan naming it", "[higgs]") {
  BrokenCheckpoint ckpt;
  ckpt.replace(kAudioTable, {ckpt.K() * ckpt.V(), ckpt.H() + 16});
  const auto r = run_zoo("plan " + shell_quote(ckpt.write().string()));
  check_no_signal(r);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(some_line_has(r.output, kAudioTable, "shape"));
}

TEST_CASE("higgs manifest: config K*V disagreeing with the audio table fails the plan naming it", "[higgs]") {
  for (const char* field : {"num_codebooks", "vocab_size"}) {
    INFO("config audio_encoder_config." << field << " + 1");
    BrokenCheckpoint ckpt;
    auto& value = ckpt.config()["audio_encoder_config"][field];
    value = value.get<std::int64_t>() + 1;
    const auto r = run_zoo("plan " + shell_quote(ckpt.write().string()));
    check_no_signal(r);
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK(some_line_has(r.output, kAudioTable, "shape"));
  }
}

TEST_CASE("higgs manifest: an untied audio head is refused naming the tensor", "[higgs]") {
  BrokenCheckpoint ckpt;
  ckpt.add("tied.head.audio.weight", {ckpt.K() * ckpt.V(), ckpt.H()});
  const auto r = run_zoo("plan " + shell_quote(ckpt.write().string()));
  check_no_signal(r);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains("tied.head.audio.weight"));
}

TEST_CASE("higgs manifest: config errors exit 2 naming the field", "[higgs]") {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* field;
  };
  const Case cases[] = {
      {"no audio_encoder_config", [](json& c) { c.erase("audio_encoder_config"); }, "audio_encoder_config"},
      {"no num_codebooks", [](json& c) { c["audio_encoder_config"].erase("num_codebooks"); }, "num_codebooks"},
      {"out_dim != hidden", [](json& c) { c["audio_encoder_config"]["out_dim"] = 8; }, "out_dim"},
      {"no text_config", [](json& c) { c.erase("text_config"); }, "text_config"},
      {"text_config without hidden_size", [](json& c) { c["text_config"].erase("hidden_size"); }, "hidden_size"},
      {"text_config with a sliding window", [](json& c) { c["text_config"]["use_sliding_window"] = true; },
       "use_sliding_window"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    BrokenCheckpoint ckpt;
    c.edit(ckpt.config());
    const auto r = run_zoo("plan " + shell_quote(ckpt.write().string()));
    check_no_signal(r);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Contains(c.field));
    CHECK_THAT(r.output, Contains("config.json"));  // which file is wrong
  }
}

}  // namespace zoo::ptest
