// OutputRequest::sample on the CPU decoder backend: the token a session picks is the one the host
// reference (zoo::sample_logits) picks from the logits the same session would have returned, and
// generate() through it equals generate() through the logits.
#include "qwen3/fixture_test_util.hpp"

#include "zoo/generation.hpp"
#include "zoo/request.hpp"

namespace zoo::ptest {
namespace {

// Drops OutputRequest::sample: the session returns logits and generate() samples on the host.
class LogitsOnly : public Session {
 public:
  explicit LogitsOnly(Session& inner) : inner_(inner) {}
  ForwardResult forward(const ForwardStep& step, DiagnosticHook* hook) override {
    ForwardStep plain = step;
    plain.outputs.sample.reset();
    return inner_.forward(plain, hook);
  }
  std::int64_t position() const override { return inner_.position(); }
  void reset() override { inner_.reset(); }

 private:
  Session& inner_;
};

}  // namespace

TEST_CASE("qwen3 on CPU: sampled tokens equal the host reference on the same logits", "[qwen3][sampling]") {
  auto opened = open_fixture(fixture_dir("qwen3-tiny"));
  const Prompt prompt = opened.model->prepare(load_request(fixture_dir("qwen3-tiny") / "request.json"));
  auto with_logits = opened.model->new_session();
  const ForwardResult full = with_logits->forward(prompt.step());
  const auto row = full.logits.span<float>();
  auto session = opened.model->new_session();
  int distinct = 0;
  std::int64_t previous = -1;
  for (const SampleRequest& base : {SampleRequest{}, SampleRequest{.temperature = 1.0f},
                                    SampleRequest{.temperature = 2.0f, .top_k = 5},
                                    SampleRequest{.temperature = 0.8f, .top_k = 0, .top_p = 0.9f},
                                    SampleRequest{.temperature = 1.5f, .top_k = 40, .top_p = 0.5f}}) {
    for (double u : {0.0, 0.1, 0.5, 0.77, 0.999}) {
      SampleRequest r = base;
      r.u = u;
      session->reset();
      OutputRequest outputs;
      outputs.sample = r;
      const ForwardResult got = session->forward(prompt.step(outputs));
      REQUIRE(got.sampled.has_value());
      CHECK(got.logits.empty());  // the row stayed where it was computed
      const SampledToken want = sample_logits(row, r);
      CHECK(got.sampled->id == want.id);
      CHECK(got.sampled->logit == want.logit);
      CHECK(got.sampled->valid());
      distinct += got.sampled->id != previous;
      previous = got.sampled->id;
    }
  }
  CHECK(distinct > 5);  // the draws do move the pick
}

TEST_CASE("qwen3 on CPU: generate samples in the session, to the ids of the logits path", "[qwen3][sampling]") {
  auto opened = open_fixture(fixture_dir("qwen3-tiny"));
  const Prompt prompt = opened.model->prepare(load_request(fixture_dir("qwen3-tiny") / "request.json"));
  for (const SamplingOptions& o : {SamplingOptions{}, SamplingOptions{.temperature = 1.2f, .top_k = 20, .top_p = 0.95f, .seed = 9}}) {
    GenerationOptions options;
    options.max_new_tokens = 12;
    options.sampling = o;
    auto a = opened.model->new_session();
    auto b = opened.model->new_session();
    LogitsOnly host(*b);
    CHECK(generate(*a, prompt, options) == generate(host, prompt, options));
  }
}

}  // namespace zoo::ptest

namespace zoo::ptest {

// The request is checked where every backend checks a step (check_step), not per backend.
TEST_CASE("qwen3 on CPU: an invalid sampling request is an input error", "[qwen3][sampling]") {
  auto opened = open_fixture(fixture_dir("qwen3-tiny"));
  const Prompt prompt = opened.model->prepare(load_request(fixture_dir("qwen3-tiny") / "request.json"));
  for (const SampleRequest& bad : {SampleRequest{.temperature = -1.0f}, SampleRequest{.top_k = -2},
                                   SampleRequest{.top_p = 1.5f}, SampleRequest{.temperature = 1.0f, .u = 1.0}}) {
    auto session = opened.model->new_session();
    OutputRequest outputs;
    outputs.sample = bad;
    CHECK_THAT(input_error_of([&] { session->forward(prompt.step(outputs)); }),
               Catch::Matchers::Contains("invalid sampling request"));
  }
}

}  // namespace zoo::ptest
