// Checkpoints written by transformers' own save_pretrained (tools/fixtures/make_saved_fixtures.py,
// tests/fixtures/saved): every dense family in float32, bfloat16 and float16, one file or shards with
// an index, tied and untied heads, each within the gates of the family's own fixture
// (configs/<family>-tiny.yaml) and generating transformers' greedy tokens. And the released layouts
// of multimodal checkpoints (Gemma 3, LLaVA, Mistral 3): Zoo runs the text model, says once what it
// leaves out, and refuses a head tie it cannot read.
#include "qwen3/decoder_golden_checks.hpp"

#include <set>

#include "stderr_capture.hpp"
#include "zoo/compare.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/request.hpp"
#include "zoo/trace.hpp"

namespace zoo::ptest::saved_checkpoints {
namespace {

struct SavedFixture {
  const char* name;
  const char* plugin;
  const char* gates;   // configs/<gates>.yaml: the family's fixture, whose gates these meet
  std::size_t stages;  // per layer, as in test_family_golden.cpp
  bool multimodal = false;
};

// Pre norms 15 stages, + q/k norm 17 (qwen3); sandwich 17, + q/k norm 19 (gemma3); post + q/k norm 17
// (olmo2).
const SavedFixture kFixtures[] = {
    {"qwen3-bf16-tied", "qwen3", "qwen3-tiny", 17},
    {"qwen3-f32-sharded-untied", "qwen3", "qwen3-tiny", 17},
    {"llama-fp16-untied", "llama", "llama-tiny", 15},
    {"llama-bf16-sharded-tied", "llama", "llama-tiny", 15},
    {"mistral-bf16-untied", "llama", "mistral-tiny", 15},
    {"mistral-f32-tied", "llama", "mistral-tiny", 15},
    {"qwen2-fp16-tied", "llama", "qwen2-tiny", 15},
    {"qwen2-f32-sharded-untied", "llama", "qwen2-tiny", 15},
    {"gemma-bf16-tied", "gemma", "gemma-tiny", 15},
    {"gemma-fp16-sharded-untied", "gemma", "gemma-tiny", 15},
    {"gemma2-f32-untied", "gemma", "gemma2-tiny", 17},
    {"gemma2-bf16-sharded-untied", "gemma", "gemma2-tiny", 17},
    {"gemma3-text-bf16-untied", "gemma", "gemma3-tiny", 19},
    {"gemma3-text-fp16-sharded-untied", "gemma", "gemma3-tiny", 19},
    {"phi3-bf16-untied", "phi3", "phi3-tiny", 15},
    {"phi3-f32-sharded-tied", "phi3", "phi3-tiny", 15},
    {"olmo2-fp16-untied", "olmo2", "olmo2-tiny", 17},
    {"olmo2-bf16-sharded-tied", "olmo2", "olmo2-tiny", 17},
    {"gemma3-mm-bf16-untied", "gemma", "gemma3-tiny", 19, true},
    {"llava-mm-fp16-sharded-untied", "llama", "llama-tiny", 15, true},
    {"mistral3-mm-bf16-tied-legacy", "llama", "mistral-tiny", 15, true},
};

fs::path saved_dir(const std::string& name) {
  return fixture_dir("saved") / name;
}

// Opens the fixture with stderr captured: what Zoo said while opening it.
struct Captured {
  OpenedModel opened;
  std::string said;
};
Captured open_saved(const fs::path& dir) {
  test::StderrCapture capture;
  Captured out{open_fixture(dir), ""};
  out.said = capture.text();
  return out;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void check_golden_trace(const SavedFixture& fx) {
  INFO("fixture saved/" << fx.name);
  const fs::path dir = saved_dir(fx.name);
  Captured c = open_saved(dir);
  OpenedModel& opened = c.opened;
  REQUIRE(opened.model->info().plugin == fx.plugin);
  CHECK(occurrences(c.said, "a multimodal checkpoint") == (fx.multimodal ? 1u : 0u));

  const Prompt prompt = opened.model->prepare(load_request(dir / "request.json"));
  auto session = opened.model->new_session();
  TraceRecorder recorder(PointSelection({"*"}));
  session->forward(prompt.step(), &recorder);
  const auto T = static_cast<std::int64_t>(prompt.ids.size());
  NamedTensors actual;
  actual.emplace_back("input_ids", TensorView{prompt.ids.data(), DType::I64, {T}, Device{}});
  for (const auto& [n, t] : recorder.tensors()) actual.emplace_back(n, t.view());
  const auto golden_file = SafetensorsFile::open(dir / "golden.safetensors");
  NamedTensors golden;
  for (const auto& entry : golden_file->entries()) golden.emplace_back(entry.name, golden_file->view(entry));
  const fs::path gates = fs::path(ZOO_SOURCE_DIR) / "configs" / (std::string(fx.gates) + ".yaml");
  const CompareReport report = compare_trace_tensors(golden, actual, load_gates(gates));
  INFO(report.table());
  CHECK(report.evaluated());
  CHECK(report.passed());

  // The same tap points as transformers, as many as the family's layout has.
  std::set<std::string> expected, recorded;
  for (const auto& [n, t] : golden)
    if (n != "input_ids") expected.insert(n);
  for (const auto& [n, t] : recorder.tensors()) recorded.insert(n);
  CHECK(expected == recorded);
  CHECK(expected.size() == 3 + fx.stages * static_cast<std::size_t>(opened.model->info().num_layers));
}

// A copy of a saved fixture whose config.json is `edit`ed.
class EditedFixture {
 public:
  EditedFixture(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    for (const auto& entry : fs::directory_iterator(saved_dir(name)))
      if (entry.path().filename() != "config.json")
        fs::copy_file(entry.path(), dir_ / entry.path().filename().string());
    nlohmann::json config = load_hf_config(saved_dir(name));
    edit(config);
    dir_.write("config.json", config.dump(2));
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

OpenedModel open_unchecked(const fs::path& dir) {
  ModelSpec spec;
  spec.file = dir / "config.json";
  spec.checkpoint = dir;
  return open_model(std::move(spec), registry());
}

}  // namespace

TEST_CASE("save_pretrained checkpoints: golden traces within the family's gates", "[families][saved]") {
  for (const auto& fx : kFixtures) check_golden_trace(fx);
}

TEST_CASE("save_pretrained checkpoints: greedy generation matches transformers", "[families][saved]") {
  for (const auto& fx : kFixtures) {
    INFO("fixture saved/" << fx.name);
    const fs::path dir = saved_dir(fx.name);
    Captured c = open_saved(dir);
    const Prompt prompt = c.opened.model->prepare(load_request(dir / "request.json"));
    check_generation_matches_golden(*c.opened.model, prompt, dir);
  }
}

TEST_CASE("multimodal checkpoints: one notice names what is not used", "[families][saved]") {
  for (const auto& fx : kFixtures) {
    if (!fx.multimodal) continue;
    INFO("fixture saved/" << fx.name);
    const fs::path dir = saved_dir(fx.name);
    const bool released = std::string(fx.name).find("legacy") == std::string::npos;
    test::StderrCapture capture;
    {
      OpenedModel opened = open_fixture(dir);
      const Prompt prompt = opened.model->prepare(load_request(dir / "request.json"));
      auto session = opened.model->new_session();
      GenerationOptions options;
      options.max_new_tokens = 3;
      (void)generate(*session, prompt, options);
    }
    const std::string said = capture.text();
    INFO(said);
    CHECK(occurrences(said, "zoo: note: ") == 1);
    CHECK(occurrences(said, "a multimodal checkpoint") == 1);
    CHECK(occurrences(said, "image inputs are not supported") == 1);
    CHECK(occurrences(said, released ? "model.vision_tower.* (" : " vision_tower.* (") == 1);
    CHECK(occurrences(said, released ? "model.multi_modal_projector.* (" : " multi_modal_projector.* (") ==
          1);
    CHECK(occurrences(said, released ? "tensors model.language_model.*" : "tensors language_model.model.*") ==
          1);
  }
}

TEST_CASE("multimodal checkpoints: the head is tied as transformers ties it, or refused by name",
          "[families][saved]") {
  // mistral3-mm-bf16-legacy stores no head: tie_word_embeddings true at the top level (Mistral3Config's
  // default) over text_config's false. Read from text_config, the head would be missing.
  const fs::path dir = saved_dir("mistral3-mm-bf16-tied-legacy");
  const nlohmann::json config = load_hf_config(dir);
  REQUIRE(config.at("tie_word_embeddings") == true);
  REQUIRE(config.at("text_config").at("tie_word_embeddings") == false);
  {
    test::StderrCapture quiet;
    CHECK(open_unchecked(dir).plan.ok());
  }
  EditedFixture as_text("mistral3-mm-bf16-tied-legacy",
                        [](nlohmann::json& c) { c["tie_word_embeddings"] = false; });
  {
    test::StderrCapture quiet;
    OpenedModel untied = open_unchecked(as_text.path());
    CHECK_FALSE(untied.plan.ok());
    CHECK_THAT(untied.plan.table(), Catch::Matchers::Contains("language_model.lm_head.weight"));
  }

  // false at the top level, true in text_config: LLaVA's config ties, Gemma 3's and Mistral 3's do not.
  EditedFixture conflict("llava-mm-fp16-sharded-untied", [](nlohmann::json& c) {
    c["tie_word_embeddings"] = false;
    c["text_config"]["tie_word_embeddings"] = true;
  });
  const std::string conflict_error = input_error_of([&] { (void)open_unchecked(conflict.path()); });
  CHECK_THAT(conflict_error, Catch::Matchers::Contains("'tie_word_embeddings' is false") &&
                                 Catch::Matchers::Contains("text_config.tie_word_embeddings is true"));
  // No top-level value and a stored head: the classes' defaults differ (LLaVA unties, Mistral 3 ties).
  EditedFixture absent("llava-mm-fp16-sharded-untied", [](nlohmann::json& c) {
    c.erase("tie_word_embeddings");
    c["text_config"].erase("tie_word_embeddings");
  });
  CHECK_THAT(input_error_of([&] { (void)open_unchecked(absent.path()); }),
             Catch::Matchers::Contains("has no field 'tie_word_embeddings'"));
  // What the text model's plugin refuses, or a text model no plugin serves, is named as text_config's.
  EditedFixture bad_eps("gemma3-mm-bf16-untied",
                        [](nlohmann::json& c) { c["text_config"]["rms_norm_eps"] = 5; });
  CHECK_THAT(
      input_error_of([&] { (void)open_unchecked(bad_eps.path()); }),
      Catch::Matchers::Contains("config.json text_config: ") && Catch::Matchers::Contains("rms_norm_eps"));
  EditedFixture unserved("gemma3-mm-bf16-untied",
                         [](nlohmann::json& c) { c["text_config"]["model_type"] = "nope"; });
  CHECK_THAT(input_error_of([&] { (void)open_unchecked(unserved.path()); }),
             Catch::Matchers::Contains("config.json text_config: no plugin serves model_type 'nope'"));
  // A text_config without model_type names the field.
  EditedFixture untyped("gemma3-mm-bf16-untied",
                        [](nlohmann::json& c) { c["text_config"].erase("model_type"); });
  CHECK_THAT(input_error_of([&] { (void)open_unchecked(untyped.path()); }),
             Catch::Matchers::Contains("text_config has no \"model_type\""));
}

TEST_CASE("save_pretrained fixtures hold what their names say", "[families][saved]") {
  // The variants are the point: the stored dtype, the shards and the head as named.
  for (const auto& fx : kFixtures) {
    const std::string name = fx.name;
    INFO("fixture saved/" << name);
    const fs::path dir = saved_dir(name);
    const bool sharded = fs::exists(dir / "model.safetensors.index.json");
    CHECK(sharded == (name.find("sharded") != std::string::npos));
    CHECK(sharded != fs::exists(dir / "model.safetensors"));
    test::StderrCapture quiet;
    const OpenedModel opened = open_fixture(dir, false);
    // opened.weights is the checkpoint under its stored names.
    const bool legacy = name.find("legacy") != std::string::npos,
               untied = name.find("untied") != std::string::npos;
    REQUIRE((untied || name.find("tied") != std::string::npos));
    CHECK(opened.weights->info(legacy ? "language_model.lm_head.weight" : "lm_head.weight").has_value() ==
          untied);
    const std::string embed = !fx.multimodal ? "model.embed_tokens.weight"
                              : legacy       ? "language_model.model.embed_tokens.weight"
                                             : "model.language_model.embed_tokens.weight";
    const auto info = opened.weights->info(embed);
    REQUIRE(info.has_value());
    const DType want = name.find("f32") != std::string::npos    ? DType::F32
                       : name.find("fp16") != std::string::npos ? DType::F16
                                                                : DType::BF16;
    CHECK(info->dtype == want);
  }
}

}  // namespace zoo::ptest::saved_checkpoints
