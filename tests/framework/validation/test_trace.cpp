#include <catch2/catch.hpp>

#include <vector>

#include "framework/validation_test_util.hpp"
#include "zoo/diagnostic_hook.hpp"
#include "zoo/safetensors.hpp"
#include "zoo/trace.hpp"

using namespace zoo;

TEST_CASE("glob_match: star crosses dots, question mark is one character", "[trace][glob]") {
  CHECK(glob_match("logits", "logits"));
  CHECK_FALSE(glob_match("logits", "logit"));
  CHECK_FALSE(glob_match("logit", "logits"));
  CHECK(glob_match("*", ""));
  CHECK(glob_match("*", "layer.3.attn"));
  CHECK(glob_match("", ""));
  CHECK_FALSE(glob_match("", "x"));
  CHECK(glob_match("layer.*.output", "layer.10.output"));
  CHECK(glob_match("layer.*.output", "layer.1.mlp.output"));  // '*' is not limited to one segment
  CHECK_FALSE(glob_match("layer.*.output", "layer.1.attn"));
  CHECK_FALSE(glob_match("layer.*.output", "layer.1.output_x"));
  CHECK(glob_match("layer.?.attn", "layer.3.attn"));
  CHECK_FALSE(glob_match("layer.?.attn", "layer.12.attn"));
  CHECK_FALSE(glob_match("?", ""));
  CHECK(glob_match("audio_*", "audio_logits"));
  CHECK(glob_match("*logits", "audio_logits"));
  CHECK(glob_match("a*b*c", "aXXbYYbZc"));
  CHECK_FALSE(glob_match("a*b*c", "aXXbYYbZ"));
  CHECK(glob_match("**a", "bba"));
  // Pathological backtracking input finishes (and does not match).
  CHECK_FALSE(glob_match("*a*a*a*a*a*a*a*b", std::string(200, 'a')));
}

TEST_CASE("PointSelection::parse splits on commas and trims", "[trace][glob]") {
  const auto sel = PointSelection::parse(" embed ,layer.*.output,, logits\t,");
  REQUIRE(sel.globs() == std::vector<std::string>{"embed", "layer.*.output", "logits"});
  CHECK(sel.matches("embed"));
  CHECK(sel.matches("layer.7.output"));
  CHECK(sel.matches("logits"));
  CHECK_FALSE(sel.matches("layer.7.attn"));
  CHECK_FALSE(sel.matches(" embed"));
  CHECK(PointSelection::parse("").globs().empty());
  CHECK_FALSE(PointSelection::parse("").matches("embed"));
}

TEST_CASE("default trace points select the documented taps", "[trace]") {
  const auto sel = PointSelection::parse(default_trace_points());
  for (const char* name : {"input_ids", "embed", "layer.0.output", "layer.27.output", "final_norm", "logits"})
    CHECK(sel.matches(name));
  for (const char* name : {"layer.0.attn", "layer.3.q_proj", "audio_logits"}) CHECK_FALSE(sel.matches(name));
  const auto extended = PointSelection::parse(default_trace_points({"audio_logits", "audio_argmax"}));
  CHECK(extended.matches("audio_logits"));
  CHECK(extended.matches("audio_argmax"));
  CHECK(extended.matches("layer.1.output"));
}

TEST_CASE("TraceRecorder keeps owning copies of selected taps in record order", "[trace]") {
  TraceRecorder rec(PointSelection::parse("embed,layer.*.output,input_ids"));
  CHECK(rec.wants("embed"));
  CHECK_FALSE(rec.wants("logits"));

  std::vector<float> values = {1, 2, 3, 4, 5, 6};
  rec.record("layer.0.output", TensorView{values.data(), DType::F32, {2, 3}});
  std::vector<std::int64_t> ids = {7, 8};
  rec.record("input_ids", TensorView{ids.data(), DType::I64, {2}});
  values[0] = -100;  // the recorder must not alias the caller's buffer
  ids[1] = 0;

  REQUIRE(rec.tensors().size() == 2);
  CHECK(rec.tensors()[0].first == "layer.0.output");
  CHECK(rec.tensors()[1].first == "input_ids");
  const HostTensor* out = rec.find("layer.0.output");
  REQUIRE(out);
  CHECK(out->shape() == Shape{2, 3});
  CHECK(out->span<float>()[0] == 1.0f);
  CHECK(rec.find("input_ids")->span<std::int64_t>()[1] == 8);
  CHECK(rec.find("embed") == nullptr);
}

TEST_CASE("TraceRecorder concatenates repeated taps along dim 0", "[trace]") {
  TraceRecorder rec(PointSelection::parse("*"));
  std::vector<float> prefill = {1, 2, 3, 4, 5, 6};  // [3, 2]
  std::vector<float> step = {7, 8};                 // [1, 2]
  rec.record("logits", TensorView{prefill.data(), DType::F32, {3, 2}});
  rec.record("logits", TensorView{step.data(), DType::F32, {1, 2}});
  const HostTensor* out = rec.find("logits");
  REQUIRE(out);
  CHECK(out->shape() == Shape{4, 2});
  const auto got = out->span<float>();
  CHECK(std::vector<float>(got.begin(), got.end()) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(rec.tensors().size() == 1);

  SECTION("trailing dims must agree") {
    std::vector<float> wide = {1, 2, 3};
    CHECK_THROWS_WITH(rec.record("logits", TensorView{wide.data(), DType::F32, {1, 3}}),
                      Catch::Contains("logits") && Catch::Contains("[1, 3]"));
  }
  SECTION("dtype must agree") {
    std::vector<std::uint16_t> half = {0, 0};
    CHECK_THROWS_AS(rec.record("logits", TensorView{half.data(), DType::BF16, {1, 2}}), std::invalid_argument);
  }
  SECTION("rank must agree") {
    CHECK_THROWS_AS(rec.record("logits", TensorView{step.data(), DType::F32, {2}}), std::invalid_argument);
  }
  CHECK(rec.find("logits")->shape() == Shape{4, 2});  // a rejected record leaves the tensor intact
}

TEST_CASE("TraceRecorder rejects device tensors", "[trace]") {
  TraceRecorder rec(PointSelection::parse("*"));
  float x = 1;
  CHECK_THROWS_AS(rec.record("embed", TensorView{&x, DType::F32, {1}, Device{DeviceKind::CUDA, 0}}),
                  std::invalid_argument);
}

TEST_CASE("TraceRecorder::write produces a safetensors trace with metadata", "[trace]") {
  vtest::ScratchDir dir;
  TraceRecorder rec(PointSelection::parse("*"));
  std::vector<std::int64_t> ids = {3, 1, 4};
  std::vector<float> embed = {0.5f, -1.5f, 2.0f, 0.0f, 1.0f, -2.0f};
  rec.record("input_ids", TensorView{ids.data(), DType::I64, {3}});
  rec.record("embed", TensorView{embed.data(), DType::F32, {3, 2}});
  const auto path = dir / "trace.safetensors";
  rec.write(path, {{"request", "r.json"}});

  const auto file = SafetensorsFile::open(path);
  REQUIRE(file->entries().size() == 2);
  CHECK(file->entries()[0].name == "input_ids");  // record order is file order
  CHECK(file->metadata().at("request") == "r.json");
  const auto* e = file->find("embed");
  REQUIRE(e);
  CHECK(e->shape == Shape{3, 2});
  CHECK(to_f32(file->view(*e)) == embed);
  const auto* i = file->find("input_ids");
  REQUIRE(i);
  CHECK(i->dtype == DType::I64);
}
