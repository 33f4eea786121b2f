// Where the Higgs codec's hyperparameters come from (plugins/higgs_audio/src/codec_config.hpp):
// codec_config.json beside the checkpoint in transformers' to_dict() form, checked field by field
// against the tensors; without it the published release's values only when the tensors are exactly
// that release's, else a refusal naming the value. The higgs-tiny-codec-heads fixture
// (tools/fixtures/make_codec_encode_fixtures.py) has HuBERT 32 wide in 2 heads of 16: no shape
// records that, and a width rule ran it as 4 heads of 8.
#include "qwen3/fixture_test_util.hpp"

#include <fmt/format.h>

#include <functional>
#include <map>

#include "codec.hpp"
#include "codec_config.hpp"
#include "codec_encoder.hpp"
#include "higgs/codec_test_util.hpp"
#include "higgs_config.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/trace.hpp"

namespace zoo::ptest {
namespace {

using Catch::Matchers::Contains;

fs::path heads_fixture() {
  return fixture_dir("higgs-tiny-codec-heads");
}

struct CaseResult {
  std::int64_t equal = 0, total = 0;
  double hidden_error = 0.0;  // the largest relative L2 over HuBERT's hidden states
  double stage_error = 0.0;   // the largest over every other float stage the goldens hold
};

// Encodes case `c` ("a.", "b." or "c.") of the fixture's goldens and compares every code and every
// stage the goldens hold.
CaseResult encode_case(const higgs::CodecEncoder& encoder, const TraceFile& golden, const std::string& c) {
  const std::vector<float> input = to_f32(golden.get(c + "input").view());
  TraceRecorder taps{PointSelection({"*"})};
  const higgs::EncodeResult r = encoder.encode(input.data(), static_cast<std::int64_t>(input.size()), &taps);
  CaseResult out;
  const HostTensor want_codes = golden.get(c + "codes");
  REQUIRE(want_codes.shape() == Shape{r.frames, r.num_quantizers});
  const auto* want = want_codes.view().as<std::int64_t>();
  for (std::int64_t i = 0; i < r.frames * r.num_quantizers; ++i) {
    out.equal += want[i] == r.codes[static_cast<std::size_t>(i)] ? 1 : 0;
    ++out.total;
  }
  for (const auto& name : golden.names()) {
    if (!name.starts_with(c) || name == c + "input" || name == c + "codes" || name == c + "gap") continue;
    const std::string tap = name.substr(c.size());
    const HostTensor* got = taps.find(tap);
    INFO("stage " << name);
    REQUIRE(got != nullptr);
    const double err = rel_l2(to_f32(golden.get(name).view()), to_f32(got->view()));
    double& worst = tap.starts_with("hubert.hidden.") ? out.hidden_error : out.stage_error;
    worst = std::max(worst, err);
  }
  return out;
}

std::unique_ptr<higgs::CodecEncoder> load(std::unique_ptr<higgs::CodecEncoder> encoder) {
  encoder->load();
  return encoder;
}

TEST_CASE("a HuBERT of 2 heads of 16 encodes exactly transformers' codes with its codec_config.json",
          "[higgs][codec][encode][codec_config]") {
  auto encoder = loaded_encoder(heads_fixture());
  const auto& g = encoder->geometry();
  INFO(g.summary());
  CHECK(g.semantic == 32);
  CHECK(g.heads == 2);
  CHECK_THAT(g.config_source, Contains("codec_config.json"));
  const TraceFile golden(heads_fixture() / "golden-encode.safetensors");
  std::int64_t equal = 0, total = 0;
  for (const std::string c : {"a.", "b.", "c."}) {
    const CaseResult r = encode_case(*encoder, golden, c);
    std::printf(
        "heads fixture %s codes equal %lld of %lld, HuBERT hidden rel L2 <= %.2e, other stages <= %.2e\n",
        c.c_str(), static_cast<long long>(r.equal), static_cast<long long>(r.total), r.hidden_error,
        r.stage_error);
    CHECK(r.hidden_error <= 5e-6);
    CHECK(r.stage_error <= 5e-5);  // the DAC encoder's float32 sums reach ~2e-5 (test_codec_encode.cpp)
    equal += r.equal;
    total += r.total;
  }
  CHECK(total == 4 * (8 + 5 + 50));  // 0.3 s, 0.2 s and 2 s at 25 frames per second
  CHECK(equal == total);
}

TEST_CASE("the same codec run with 4 heads of 8 (the old width rule) is not transformers'",
          "[higgs][codec][encode][codec_config]") {
  // What the fixture guards against: the head count changes the result, so taking it from
  // anywhere but the config can be caught.
  const auto weights = open_checkpoint(heads_fixture());
  higgs::CodecConfig config =
      higgs::parse_codec_config(load_json_object(heads_fixture() / "codec_config.json"), "test config");
  config.semantic.num_attention_heads = 4;
  const auto encoder = load(std::make_unique<higgs::CodecEncoder>(weights, higgs::kCodecPrefix, config));
  REQUIRE(encoder->geometry().heads == 4);
  const TraceFile golden(heads_fixture() / "golden-encode.safetensors");
  std::int64_t equal = 0, total = 0;
  for (const std::string c : {"a.", "b.", "c."}) {
    const CaseResult r = encode_case(*encoder, golden, c);
    std::printf("4 heads of 8, case %s: codes equal %lld of %lld, HuBERT hidden rel L2 %.2e\n", c.c_str(),
                static_cast<long long>(r.equal), static_cast<long long>(r.total), r.hidden_error);
    CHECK(r.hidden_error > 1e-2);
    equal += r.equal;
    total += r.total;
  }
  // The fixture's acoustic branch is scaled down so its codes follow HuBERT: transformers itself
  // with 4 heads of 8 keeps 193 of the 252 codes.
  CHECK(equal <= total * 9 / 10);
}

// A copy of fixture `name`'s checkpoint in `dir`, with codec_config.json edited by `edit`, or
// without one when `edit` is empty.
fs::path copy_fixture(const TempDir& dir, const std::string& name,
                      const std::function<void(nlohmann::json&)>& edit) {
  const fs::path src = fixture_dir(name);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(src / f, dir / f);
  if (edit) {
    nlohmann::json config = load_json_object(src / "codec_config.json");
    edit(config);
    dir.write("codec_config.json", config.dump());
  }
  return dir.path();
}

std::string encoder_error(const fs::path& checkpoint) {
  const auto weights = open_checkpoint(checkpoint);
  return input_error_of([&] { (void)higgs::CodecEncoder(weights, higgs::kCodecPrefix); });
}

std::string decoder_error(const fs::path& checkpoint) {
  const auto weights = open_checkpoint(checkpoint);
  return input_error_of([&] { (void)higgs::Codec(weights, higgs::kCodecPrefix); });
}

TEST_CASE("without codec_config.json a codec that is not the release's is refused, naming the value",
          "[higgs][codec][codec_config]") {
  TempDir dir;
  const fs::path ck = copy_fixture(dir, "higgs-tiny-codec-heads", {});
  const std::string enc = encoder_error(ck);
  CHECK_THAT(enc, Contains("num_attention_heads is in no tensor shape") &&
                      Contains("place codec_config.json") &&
                      Contains("'acoustic_model_config.encoder_hidden_size' is 64, but the tensors hold 1"));
  CHECK(enc.find('\n') == std::string::npos);
  CHECK_THAT(decoder_error(ck),
             Contains("sample_rate is in no tensor shape") && Contains("place codec_config.json"));
}

TEST_CASE("a codec_config.json that contradicts the tensors is refused, naming the field",
          "[higgs][codec][codec_config]") {
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases{
      {[](nlohmann::json& c) { c["semantic_model_config"]["hidden_size"] = 64; },
       "'semantic_model_config.hidden_size' is 64, but the tensors hold 32"},
      {[](nlohmann::json& c) { c["semantic_model_config"]["num_hidden_layers"] = 3; },
       "'semantic_model_config.num_hidden_layers' is 3, but the tensors hold 2"},
      {[](nlohmann::json& c) { c["semantic_model_config"]["conv_kernel"][1] = 4; },
       "'semantic_model_config.conv_kernel' is [10, 4, 3, 3, 3, 2, 2]"},
      {[](nlohmann::json& c) {
         c["semantic_model_config"]["conv_stride"] = {5, 2};
       },
       "'semantic_model_config.conv_stride' is 2, but the tensors hold 7 (entries"},
      {[](nlohmann::json& c) { c["semantic_model_config"]["num_conv_pos_embedding_groups"] = 4; },
       "'semantic_model_config.num_conv_pos_embedding_groups' is 4, but the tensors hold 2"},
      {[](nlohmann::json& c) { c["semantic_model_config"]["feat_extract_norm"] = "layer"; },
       "'semantic_model_config.feat_extract_norm' is \"layer\", but the tensors hold \"group\""},
      {[](nlohmann::json& c) {
         c["acoustic_model_config"]["downsampling_ratios"] = {8, 5, 4, 3, 2};
       },
       "'acoustic_model_config.downsampling_ratios' is [8, 5, 4, 3, 2], but the tensors hold [8, 5, 4, 2, "
       "3]"},
      {[](nlohmann::json& c) {
         c["block_dilations"] = {1, 1, 1};
       },
       "'block_dilations' is 3, but the tensors hold 2"},
      {[](nlohmann::json& c) { c["codebook_size"] = 64; }, "'codebook_size' is 64, but the tensors hold 32"},
      {[](nlohmann::json& c) { c["target_bandwidths"] = {1.0}; }, "'target_bandwidths' is"},
  };
  for (const auto& [edit, want] : cases) {
    TempDir dir;
    const std::string error = encoder_error(copy_fixture(dir, "higgs-tiny-codec-heads", edit));
    INFO(error);
    CHECK_THAT(error, Contains(want) && Contains("codec_config.json"));
  }
  TempDir dir;
  const fs::path ck = copy_fixture(dir, "higgs-tiny-codec-heads", [](nlohmann::json& c) {
    c["acoustic_model_config"]["upsampling_ratios"] = {8, 5, 4, 2};
  });
  CHECK_THAT(decoder_error(ck),
             Contains("'acoustic_model_config.upsampling_ratios' is [8, 5, 4, 2], but the tensors hold "
                      "[8, 5, 4, 2, 3]"));
}

TEST_CASE("codec_config.json fields Zoo does not implement or know are refused by name",
          "[higgs][codec][codec_config]") {
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases{
      {[](nlohmann::json& c) { c["semantic_model_config"]["do_stable_layer_norm"] = true; },
       "field 'semantic_model_config.do_stable_layer_norm' is true: Zoo implements HuBERT's post-norm "
       "encoder only"},
      {[](nlohmann::json& c) { c["semantic_model_config"]["hidden_act"] = "relu"; },
       "field 'semantic_model_config.hidden_act' is \"relu\""},
      {[](nlohmann::json& c) { c["semantic_model_config"]["rotary"] = 1; },
       "field 'semantic_model_config.rotary' is unknown to Zoo"},
      {[](nlohmann::json& c) { c["semantic_model_config"]["num_attention_heads"] = 3; },
       "field 'semantic_model_config.num_attention_heads' is 3, which does not divide hidden_size 32"},
      {[](nlohmann::json& c) { c.erase("sample_rate"); }, "field 'sample_rate' is missing"},
      {[](nlohmann::json& c) { c["model_type"] = "dac"; }, "field 'model_type' is \"dac\""},
  };
  for (const auto& [edit, want] : cases) {
    TempDir dir;
    const std::string error = encoder_error(copy_fixture(dir, "higgs-tiny-codec-heads", edit));
    INFO(error);
    CHECK_THAT(error, Contains(want) && Contains("codec_config.json"));
  }
}

TEST_CASE("the config's values are used: layer_norm_eps, rates and dilations reach the encoder",
          "[higgs][codec][encode][codec_config]") {
  TempDir dir;
  const fs::path ck = copy_fixture(dir, "higgs-tiny-codec-heads", [](nlohmann::json& c) {
    c["semantic_model_config"]["layer_norm_eps"] = 1e-3;
    c["block_dilations"] = {1, 3};
    c["sample_rate"] = 48000;
    c["target_bandwidths"] = {4 * 50 * 5 / 1000.0 + 1e-6};  // still 4 quantizers at 50 frames/s
  });
  const auto weights = open_checkpoint(ck);
  const higgs::CodecEncoder encoder(weights, higgs::kCodecPrefix);
  const auto& g = encoder.geometry();
  CHECK(g.layer_norm_eps == 1e-3f);
  CHECK(g.semantic_blocks[0].unit_dilations == std::vector<std::int64_t>{1, 3});
  CHECK(g.sample_rate == 48000);
  CHECK(g.semantic_rate == 16000);
  CHECK(g.semantic_downsample == 1);  // int(960 / 3 / 320)
}


TEST_CASE("without a config the release's values apply only when the tensors are exactly the release's",
          "[higgs][codec][codec_config]") {
  const fs::path list = fs::path(ZOO_SOURCE_DIR) / "configs" / "shapes" / "higgs-v3-4b-codec-tensors.json";
  auto release = std::make_shared<ShapesOnlySource>(list);
  const higgs::CodecEncoder encoder(release, higgs::kCodecPrefix);
  const auto& g = encoder.geometry();
  CHECK(g.heads == 12);
  CHECK(g.semantic == 768);
  CHECK(g.semantic_stride() == 320);
  CHECK(g.features[0].stride == 5);
  CHECK(g.downsample() == 2);
  CHECK(g.sample_rate == 24000);
  CHECK(g.layer_norm_eps == 1e-5f);
  CHECK_THAT(g.config_source, Contains("published release"));
  CHECK(higgs::Codec(release, higgs::kCodecPrefix).geometry().sample_rate == 24000);

  // One shape off the release (a HuBERT FFN of 2048): its heads are nobody's to guess.
  auto other = std::make_shared<ShapesOnlySource>(list);
  const std::string p = std::string(higgs::kCodecPrefix) + "semantic_model.encoder.layers.";
  for (int l = 0; l < 12; ++l) {
    other->set_shape(fmt::format("{}{}.feed_forward.intermediate_dense.weight", p, l), {2048, 768});
    other->set_shape(fmt::format("{}{}.feed_forward.intermediate_dense.bias", p, l), {2048});
    other->set_shape(fmt::format("{}{}.feed_forward.output_dense.weight", p, l), {768, 2048});
  }
  CHECK_THAT(input_error_of([&] { (void)higgs::CodecEncoder(other, higgs::kCodecPrefix); }),
             Contains("num_attention_heads is in no tensor shape") &&
                 Contains("'semantic_model_config.intermediate_size' is 3072, but the tensors hold 2048"));
  // The decoder reads none of HuBERT: its release check passes.
  CHECK(higgs::Codec(other, higgs::kCodecPrefix).geometry().sample_rate == 24000);
}

TEST_CASE("codec config numbers follow transformers' properties", "[higgs][codec_config]") {
  const higgs::CodecConfig& r = higgs::release_codec_config();
  CHECK(r.hop_length() == 960);
  CHECK(r.frame_rate() == 25);
  CHECK(r.num_quantizers() == 8);  // int(1000 * 2 // (25 * 10))
  CHECK(r.encode_quantizers() == 8);
  CHECK(r.semantic_downsample_factor() == 2);  // int(960 / 1.5 / 320)
  // transformers' default config (5 bandwidths up to 4 kbps, hop 320: 75 frames/s): 5 quantizers.
  higgs::CodecConfig d = r;
  d.acoustic.downsampling_ratios = {8, 5, 4, 2};
  d.target_bandwidths = {0.5, 1, 1.5, 2, 4};
  CHECK(d.frame_rate() == 75);
  CHECK(d.num_quantizers() == 5);
  CHECK(d.semantic_downsample_factor() == 0);
}

}  // namespace
}  // namespace zoo::ptest
