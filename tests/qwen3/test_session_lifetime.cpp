// A Session keeps the model state it uses alive: destroying the Model (and the opened checkpoint)
// before the session is defined, and the session still computes the same results. Concurrent use
// of one session from two threads is refused with ConcurrentUseError, not raced.
#include <atomic>
#include <chrono>
#include <thread>

#include "fixture_test_util.hpp"
#include "zoo/exclusive_use.hpp"
#include "zoo/request.hpp"

using namespace zoo;
using namespace zoo::ptest;

namespace {

// Opens a fixture, computes the prompt's outputs, and returns a fresh session after destroying
// every other reference to the model and its weights.
struct Orphan {
  std::unique_ptr<Session> session;
  Prompt prompt;
  ForwardResult want;
};

// Every output of `got` equals `want` exactly: text logits, hidden state and any extra head.
void check_same(const ForwardResult& got, const ForwardResult& want) {
  REQUIRE(got.logits.shape() == want.logits.shape());
  if (!want.logits.shape().empty()) CHECK(max_abs_diff(got.logits, want.logits) == 0.0);
  CHECK(max_abs_diff(got.hidden, want.hidden) == 0.0);
  REQUIRE(got.extra.size() == want.extra.size());
  for (const auto& [name, tensor] : want.extra) {
    INFO("extra output " << name);
    const HostTensor* other = got.find_extra(name);
    REQUIRE(other != nullptr);
    CHECK(max_abs_diff(*other, tensor) == 0.0);
  }
}

Orphan orphan_session(const std::string& fixture) {
  Orphan o;
  auto opened = std::make_unique<OpenedModel>(open_fixture(fixture_dir(fixture)));
  o.prompt = opened->model->prepare(load_request(fixture_dir(fixture) / "request.json"));
  o.want = opened->model->new_session()->forward(o.prompt.step({.hidden = true, .logits = true}));
  o.session = opened->model->new_session();
  std::weak_ptr<Model> model = opened->model;
  opened.reset();
  REQUIRE(model.expired());  // the test is only meaningful if the Model object is really gone
  return o;
}

void check_orphan(const std::string& fixture) {
  INFO("fixture " << fixture);
  Orphan o = orphan_session(fixture);
  const auto got = o.session->forward(o.prompt.step({.hidden = true, .logits = true}));
  check_same(got, o.want);
  // Decoding on after the prompt works too.
  const std::int64_t next = 1;
  const auto step = o.session->forward(ForwardStep{std::span(&next, 1), {}, {}, OutputRequest{}});
  CHECK(step.logits.shape() == o.want.logits.shape());
  CHECK(step.extra.size() == o.want.extra.size());
  CHECK(o.session->position() == static_cast<std::int64_t>(o.prompt.ids.size()) + 1);
}

// Blocks the forward pass it is handed to inside its first tap until `release` is set.
class BlockingHook : public DiagnosticHook {
 public:
  std::atomic<bool> inside{false}, release{false};
  bool wants(std::string_view) const override { return true; }
  void record(std::string_view, const TensorView&) override {
    if (inside.exchange(true)) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!release.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  }
};

}  // namespace

TEST_CASE("a qwen3 session outlives its model", "[qwen3][lifetime]") { check_orphan("qwen3-tiny"); }

TEST_CASE("a higgs session outlives its model", "[qwen3][lifetime]") { check_orphan("higgs-tiny"); }

TEST_CASE("one qwen3 session used from two threads at once is refused", "[qwen3][lifetime]") {
  auto opened = open_fixture(fixture_dir("qwen3-tiny"));
  const Prompt prompt = opened.model->prepare(load_request(fixture_dir("qwen3-tiny") / "request.json"));
  auto session = opened.model->new_session();
  BlockingHook hook;
  std::string first_error;  // an exception must not escape the thread; Catch2 v2 asserts only here
  std::thread first([&] {
    try {
      session->forward(prompt.step(), &hook);
    } catch (const std::exception& e) {
      first_error = e.what();
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!hook.inside.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  const bool entered = hook.inside.load();
  std::string error;
  if (entered) {
    try {
      session->forward(prompt.step());
    } catch (const ConcurrentUseError& e) {
      error = e.what();
    }
  }
  hook.release = true;
  first.join();
  REQUIRE(entered);
  CHECK(first_error.empty());
  CHECK(error.find("concurrent use of a qwen3 CPU session") != std::string::npos);
  // The first call completed undisturbed; the session is usable again afterwards.
  CHECK(session->position() == static_cast<std::int64_t>(prompt.ids.size()));
  CHECK_NOTHROW(session->forward(prompt.step()));
}
