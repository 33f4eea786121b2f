// The higgs_audio plugin end to end: the one-step gate against transformers' golden on both Higgs
// fixtures, and request errors.
#include "qwen3/fixture_test_util.hpp"

#include <nlohmann/json.hpp>

#include "zoo/compare.hpp"
#include "zoo/request.hpp"
#include "zoo/trace.hpp"

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;

void check_one_step_gate(const std::string& name) {
  INFO("fixture " << name);
  const fs::path dir = fixture_dir(name);
  OpenedModel opened = open_fixture(dir);
  REQUIRE(opened.model->info().plugin == "higgs_audio");
  const Prompt prompt = opened.model->prepare(load_request(dir / "request.json"));
  const TraceFile golden(dir / "golden.safetensors");
  const auto T = static_cast<std::int64_t>(golden.ids("input_ids").size());
  REQUIRE(static_cast<std::int64_t>(prompt.ids.size()) == T);

  TraceRecorder recorder(PointSelection({"*"}));
  auto session = opened.model->new_session();
  const ForwardResult out = session->forward(prompt.step(), &recorder);

  auto metrics = [&](const std::string& tensor) {
    INFO("tensor " << tensor);
    const HostTensor* actual = recorder.find(tensor);
    REQUIRE(actual != nullptr);
    const HostTensor expected = golden.get(tensor);
    TensorMetrics m = compare_tensors(tensor, expected.view(), actual->view());
    REQUIRE(m.shape_match);
    return m;
  };

  // The semantic gate: the same next audio frame, same hidden-state direction.
  const TensorMetrics argmax = metrics("audio_argmax");
  CHECK(argmax.integer);
  CHECK(argmax.mismatches == 0);
  const TensorMetrics logits = metrics("audio_logits");
  CHECK(logits.cosine >= 0.99999);
  CHECK(logits.argmax_matches == logits.rows);
  CHECK(metrics("final_norm").cosine >= 0.9998);
  // The audio-slot embeddings are where Higgs differs from a text model.
  CHECK(metrics("embed").cosine >= 0.99999);

  // Every other golden tap is recorded too, at the golden's shape (the body is the qwen3 plugin's).
  for (const auto& tensor : golden.names()) {
    if (tensor == "input_ids") continue;
    INFO("tensor " << tensor);
    CHECK(metrics(tensor).cosine >= 0.9998);
  }

  // The step returns the audio logits [K, V] as extra "audio_logits", never as text logits.
  CHECK(out.logits.empty());
  const HostTensor* traced = recorder.find("audio_logits");
  const HostTensor* audio = out.find_extra("audio_logits");
  REQUIRE(audio != nullptr);
  REQUIRE(audio->shape() == traced->shape());
  CHECK(max_abs_diff(*audio, *traced) == 0.0);
  CHECK_FALSE(opened.model->text_generation_unsupported().empty());
}

// Writes a copy of the fixture's request with `edit` applied, and returns the message of the
// InputError that preparing it throws.
std::string request_error(const OpenedModel& opened, const TempDir& tmp, const std::string& file,
                          const std::function<void(json&)>& edit) {
  json request = json::parse(read_text(opened.spec.checkpoint / "request.json"));
  edit(request);
  const fs::path path = tmp.write(file, request.dump());
  const std::string message = input_error_of([&] { opened.model->prepare(load_request(path)); });
  CHECK_THAT(message, StartsWith(path.string()));
  return message;
}

}  // namespace

TEST_CASE("higgs one-step gate: higgs-tiny", "[higgs]") { check_one_step_gate("higgs-tiny"); }
TEST_CASE("higgs one-step gate: higgs-tiny-k3", "[higgs]") { check_one_step_gate("higgs-tiny-k3"); }
TEST_CASE("higgs one-step gate: higgs-tiny-hd128", "[higgs]") { check_one_step_gate("higgs-tiny-hd128"); }

TEST_CASE("higgs through configs/higgs-tiny.yaml picks the plugin and aliases the body", "[higgs]") {
  auto opened = open_model(load_model_spec(fs::path(ZOO_SOURCE_DIR) / "configs" / "higgs-tiny.yaml"), registry());
  REQUIRE(opened.plan.ok());
  const auto& entries = opened.plan.entries;
  auto stored = [&](const std::string& name) {
    for (const auto& e : entries)
      if (e.requirement.name == name) return e.stored_name;
    return std::string("<not required>");
  };
  CHECK(stored("model.norm.weight") == "body.norm.weight");
  CHECK(stored("model.embed_tokens.weight") == "tied.embedding.text_embedding.weight");
  CHECK(stored("model.layers.1.mlp.down_proj.weight") == "body.layers.1.mlp.down_proj.weight");
  CHECK(stored("tied.embedding.modality_embeddings.0.embedding.weight") ==
        "tied.embedding.modality_embeddings.0.embedding.weight");
  // The codec decoys are left alone, and nothing else is.
  REQUIRE_FALSE(opened.plan.unused.empty());
  for (const auto& name : opened.plan.unused) CHECK_THAT(name, StartsWith("tied.embedding.modality_embeddings.0.model."));
}

TEST_CASE("higgs request errors name the request file and the field", "[higgs]") {
  OpenedModel opened = open_fixture(fixture_dir("higgs-tiny"));
  const TempDir tmp;
  const json original = json::parse(read_text(fixture_dir("higgs-tiny") / "request.json"));
  const auto K = static_cast<std::int64_t>(original.at("audio_codes").at(0).size());
  const auto config = load_hf_config(fixture_dir("higgs-tiny"));
  const auto V = config.at("audio_encoder_config").at("vocab_size").get<std::int64_t>();
  const auto audio_id = config.at("audio_token_id").get<std::int64_t>();

  // The unedited request is fine.
  CHECK_NOTHROW(opened.model->prepare(load_request(tmp.write("ok.json", original.dump()))));

  SECTION("more audio slots than audio_codes rows") {
    const auto m = request_error(opened, tmp, "more_slots.json", [](json& r) { r["audio_codes"].erase(r["audio_codes"].size() - 1); });
    CHECK_THAT(m, Contains("audio_codes") && Contains("slot"));
  }
  SECTION("an extra audio slot") {
    const auto m = request_error(opened, tmp, "extra_slot.json", [&](json& r) { r["input_ids"].push_back(audio_id); });
    CHECK_THAT(m, Contains("audio_codes") && Contains("slot"));
  }
  SECTION("fewer audio slots than audio_codes rows") {
    const auto m = request_error(opened, tmp, "fewer_slots.json", [](json& r) { r["audio_codes"].push_back(r["audio_codes"][0]); });
    CHECK_THAT(m, Contains("audio_codes") && Contains("slot"));
  }
  SECTION("audio_codes without any slot") {
    const auto m = request_error(opened, tmp, "no_slots.json", [](json& r) {
      json ids = json::array();
      for (const auto& id : r["input_ids"])
        if (id.get<std::int64_t>() >= 0) ids.push_back(id);
      r["input_ids"] = ids;
    });
    CHECK_THAT(m, Contains("audio_codes"));
  }
  SECTION("a row of the wrong length") {
    const auto m = request_error(opened, tmp, "short_row.json", [](json& r) { r["audio_codes"][2].erase(0); });
    CHECK_THAT(m, Contains("audio_codes[2]") && Contains(std::to_string(K)));
    const auto m2 = request_error(opened, tmp, "long_row.json", [](json& r) { r["audio_codes"][3].push_back(1); });
    CHECK_THAT(m2, Contains("audio_codes[3]"));
  }
  SECTION("a row that is not an array") {
    const auto m = request_error(opened, tmp, "scalar_row.json", [](json& r) { r["audio_codes"][1] = 7; });
    CHECK_THAT(m, Contains("audio_codes[1]"));
  }
  SECTION("a code out of range") {
    const auto m = request_error(opened, tmp, "big_code.json", [&](json& r) { r["audio_codes"][4][1] = V; });
    CHECK_THAT(m, Contains("audio_codes[4][1]") && Contains(std::to_string(V)));
    const auto m2 = request_error(opened, tmp, "negative_code.json", [](json& r) { r["audio_codes"][0][0] = -1; });
    CHECK_THAT(m2, Contains("audio_codes[0][0]"));
  }
  SECTION("a code that is not an integer") {
    const auto m = request_error(opened, tmp, "string_code.json", [](json& r) { r["audio_codes"][0][2] = "3"; });
    CHECK_THAT(m, Contains("audio_codes[0][2]"));
    const auto m2 = request_error(opened, tmp, "float_code.json", [](json& r) { r["audio_codes"][0][2] = 3.5; });
    CHECK_THAT(m2, Contains("audio_codes[0][2]"));
  }
  SECTION("audio_codes is not an array") {
    const auto m = request_error(opened, tmp, "object_codes.json", [](json& r) { r["audio_codes"] = json{{"a", 1}}; });
    CHECK_THAT(m, Contains("audio_codes"));
  }
  SECTION("an unknown field") {
    const auto m = request_error(opened, tmp, "unknown.json", [](json& r) { r["speaker"] = "alice"; });
    CHECK_THAT(m, Contains("speaker"));
  }
}

// A text-only request has no slots and no audio_codes; it still runs and yields audio logits.
TEST_CASE("higgs text-only request runs", "[higgs]") {
  OpenedModel opened = open_fixture(fixture_dir("higgs-tiny"));
  const TempDir tmp;
  const Prompt prompt = opened.model->prepare(load_request(tmp.write("text.json", R"({"input_ids": [1, 2, 3]})")));
  CHECK(prompt.override_positions.empty());
  CHECK(prompt.table_positions.empty());
  auto session = opened.model->new_session();
  const ForwardResult out = session->forward(prompt.step());
  const auto config = load_hf_config(fixture_dir("higgs-tiny"));
  CHECK(out.logits.empty());
  REQUIRE(out.find_extra("audio_logits") != nullptr);
  CHECK(out.find_extra("audio_logits")->shape() == Shape{config.at("audio_encoder_config").at("num_codebooks").get<std::int64_t>(),
                                    config.at("audio_encoder_config").at("vocab_size").get<std::int64_t>()});
}

// No text logits: a request to sample a text token is refused by name, not answered with nothing.
TEST_CASE("higgs refuses OutputRequest::sample", "[higgs]") {
  OpenedModel opened = open_fixture(fixture_dir("higgs-tiny"));
  const TempDir tmp;
  const Prompt prompt = opened.model->prepare(load_request(tmp.write("text.json", R"({"input_ids": [1, 2, 3]})")));
  OutputRequest outputs;
  outputs.sample = SampleRequest{};
  CHECK_THROWS_WITH(opened.model->new_session()->forward(prompt.step(outputs)),
                    Catch::Contains("higgs_audio: cannot sample or score text tokens") && Catch::Contains("zoo tts"));
}

}  // namespace zoo::ptest
