#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "zoo/error.hpp"
#include "zoo/generation.hpp"
#include "zoo/sampling.hpp"

using namespace zoo;

namespace {

constexpr std::int64_t kVocab = 16;

// The rule the fake model follows: the favourite next token depends on the last token and its
// position, so a wrong position or a wrong fed-back token changes the output.
std::int64_t favourite(std::int64_t last, std::int64_t position) { return (3 * last + position + 1) % kVocab; }

// A Session whose logits peak at favourite(last id, its position), recording every call.
class FakeSession : public Session {
 public:
  struct Call {
    std::vector<std::int64_t> ids;
    std::int64_t position_before;
    OutputRequest outputs;
  };
  std::vector<Call> calls;
  int resets = 0;

  ForwardResult forward(const ForwardStep& step, DiagnosticHook* /*hook*/ = nullptr) override {
    calls.push_back({{step.ids.begin(), step.ids.end()}, position_, step.outputs});
    position_ += static_cast<std::int64_t>(step.ids.size());
    const std::int64_t peak = favourite(step.ids.back(), position_ - 1);
    std::vector<float> logits(kVocab);
    for (std::int64_t j = 0; j < kVocab; ++j) logits[j] = -static_cast<float>(std::abs(j - peak));
    ForwardResult result;
    result.logits = HostTensor::from_f32({1, kVocab}, logits);
    return result;
  }
  std::int64_t position() const override { return position_; }
  void reset() override {
    ++resets;
    position_ = 0;
  }

 private:
  std::int64_t position_ = 0;
};

std::vector<std::int64_t> expected_greedy(const std::vector<std::int64_t>& prompt, int n) {
  std::vector<std::int64_t> out;
  std::int64_t last = prompt.back(), pos = static_cast<std::int64_t>(prompt.size()) - 1;
  for (int i = 0; i < n; ++i) {
    last = favourite(last, pos++);
    out.push_back(last);
  }
  return out;
}

std::vector<std::int64_t> draws(SamplingOptions options, const std::vector<float>& logits, int n) {
  Sampler sampler(options);
  std::vector<std::int64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(sampler.next(logits));
  return out;
}

}  // namespace

TEST_CASE("generate: greedy follows the model and keeps KV positions straight", "[generation]") {
  FakeSession session;
  session.forward(ForwardStep{std::vector<std::int64_t>{9, 9}, {}, {}, {}});  // stale state to reset
  session.calls.clear();
  Prompt prompt;
  prompt.ids = {4, 7, 1};
  std::vector<std::int64_t> streamed;
  GenerationOptions options;
  options.max_new_tokens = 6;
  const auto out = generate(session, prompt, options, [&](std::int64_t t) { streamed.push_back(t); });

  CHECK(out == expected_greedy(prompt.ids, 6));
  CHECK(streamed == out);
  CHECK(session.resets == 1);
  // Prefill once, then one step per new token except the last (no wasted forward).
  REQUIRE(session.calls.size() == 6);
  CHECK(session.calls[0].ids == prompt.ids);
  CHECK(session.calls[0].position_before == 0);
  for (std::size_t i = 1; i < session.calls.size(); ++i) {
    CHECK(session.calls[i].ids == std::vector<std::int64_t>{out[i - 1]});
    CHECK(session.calls[i].position_before == 3 + static_cast<std::int64_t>(i) - 1);
  }
  for (const auto& call : session.calls) {
    CHECK(call.outputs.logits);
    CHECK_FALSE(call.outputs.all_positions);
  }
  CHECK(session.position() == 3 + 6 - 1);
}

TEST_CASE("generate: stops after emitting eos, and on max_new_tokens", "[generation]") {
  Prompt prompt;
  prompt.ids = {2};
  const auto full = expected_greedy(prompt.ids, 8);
  GenerationOptions options;
  options.max_new_tokens = 8;
  REQUIRE(std::find(full.begin(), full.begin() + 3, full[3]) == full.begin() + 3);  // first hit is index 3
  // Any of several eos ids stops; ids the model never emits change nothing.
  for (const auto& eos : {std::vector<std::int64_t>{full[3]}, std::vector<std::int64_t>{100000, full[3], -5}}) {
    options.eos_token_ids = eos;
    FakeSession session;
    const auto out = generate(session, prompt, options);
    CHECK(out == std::vector<std::int64_t>(full.begin(), full.begin() + 4));
    CHECK(session.calls.size() == 4);
  }
  options.eos_token_ids = {100000};
  FakeSession never;
  CHECK(generate(never, prompt, options) == full);

  options.eos_token_ids.clear();
  options.max_new_tokens = 0;
  FakeSession idle;
  CHECK(generate(idle, prompt, options).empty());
  CHECK(idle.calls.empty());
  CHECK_THROWS(generate(idle, Prompt{}, GenerationOptions{}));
}

TEST_CASE("Sampler: greedy ties go to the lower index and NaN never wins", "[generation]") {
  Sampler greedy(SamplingOptions{});
  CHECK(greedy.next(std::vector<float>{1, 5, 5, 2}) == 1);
  CHECK(greedy.next(std::vector<float>{NAN, 0, 3, 3}) == 2);
  CHECK(greedy.next(std::vector<float>{-INFINITY, -INFINITY}) == 0);
  CHECK_THROWS(greedy.next(std::vector<float>{}));
}

TEST_CASE("Sampler: seeded draws are reproducible and differ across seeds", "[generation]") {
  std::vector<float> logits(32);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  const SamplingOptions a{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 42};
  SamplingOptions b = a;
  b.seed = 43;
  const auto first = draws(a, logits, 200);
  CHECK(first == draws(a, logits, 200));
  CHECK(first != draws(b, logits, 200));
  std::map<std::int64_t, int> distinct;
  for (auto t : first) distinct[t]++;
  CHECK(distinct.size() > 5);  // actually sampling, not greedy
}

TEST_CASE("Sampler: top-k = 1 and a tiny top-p equal greedy", "[generation]") {
  std::vector<float> logits = {0.5f, 2.0f, 1.9f, -1.0f, 2.0f};  // tie: greedy picks 1
  Sampler greedy(SamplingOptions{});
  const auto want = greedy.next(logits);
  REQUIRE(want == 1);
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    CHECK(Sampler({.temperature = 1.5f, .top_k = 1, .top_p = 1.0f, .seed = seed}).next(logits) == want);
    CHECK(Sampler({.temperature = 1.5f, .top_k = 0, .top_p = 1e-6f, .seed = seed}).next(logits) == want);
    CHECK(Sampler({.temperature = 1.5f, .top_k = 0, .top_p = 0.0f, .seed = seed}).next(logits) == want);
  }
}

TEST_CASE("Sampler: frequencies follow softmax(logits / T) within the filters", "[generation]") {
  const int n = 40000;
  SECTION("plain softmax") {
    // p = [1, 3] / 4 at T = 1.
    const auto got = draws({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 7}, {0.0f, std::log(3.0f)}, n);
    const double ones = static_cast<double>(std::count(got.begin(), got.end(), 1)) / n;
    CHECK_THAT(ones, Catch::WithinAbs(0.75, 0.01));
  }
  SECTION("temperature 2 flattens: p = [1, sqrt 3] / (1 + sqrt 3)") {
    const auto got = draws({.temperature = 2.0f, .top_k = 0, .top_p = 1.0f, .seed = 8}, {0.0f, std::log(3.0f)}, n);
    const double ones = static_cast<double>(std::count(got.begin(), got.end(), 1)) / n;
    CHECK_THAT(ones, Catch::WithinAbs(std::sqrt(3.0) / (1 + std::sqrt(3.0)), 0.01));
  }
  SECTION("top-k keeps the k best and renormalizes") {
    const std::vector<float> logits = {std::log(1.0f), std::log(4.0f), std::log(2.0f), std::log(3.0f)};
    const auto got = draws({.temperature = 1.0f, .top_k = 2, .top_p = 1.0f, .seed = 9}, logits, n);
    CHECK(std::count(got.begin(), got.end(), 0) == 0);
    CHECK(std::count(got.begin(), got.end(), 2) == 0);
    CHECK_THAT(static_cast<double>(std::count(got.begin(), got.end(), 1)) / n, Catch::WithinAbs(4.0 / 7.0, 0.01));
  }
  SECTION("top-p keeps the smallest set reaching p") {
    // Sorted probabilities 0.4, 0.3, 0.2, 0.1: p = 0.6 needs {1, 3} (0.7 >= 0.6).
    const std::vector<float> logits = {std::log(0.1f), std::log(0.4f), std::log(0.2f), std::log(0.3f)};
    const auto got = draws({.temperature = 1.0f, .top_k = 0, .top_p = 0.6f, .seed = 10}, logits, n);
    CHECK(std::count(got.begin(), got.end(), 0) == 0);
    CHECK(std::count(got.begin(), got.end(), 2) == 0);
    CHECK_THAT(static_cast<double>(std::count(got.begin(), got.end(), 1)) / n, Catch::WithinAbs(4.0 / 7.0, 0.01));
  }
}

TEST_CASE("Sampler: invalid options are input errors", "[generation]") {
  CHECK_THROWS_AS(Sampler({.temperature = -1.0f}), InputError);
  CHECK_THROWS_AS(Sampler({.temperature = NAN}), InputError);
  CHECK_THROWS_AS(Sampler({.temperature = 1.0f, .top_k = -3}), InputError);
  CHECK_THROWS_AS(Sampler({.temperature = 1.0f, .top_k = 0, .top_p = 1.5f}), InputError);
}

TEST_CASE("generate: sampling through generate is reproducible per seed", "[generation]") {
  Prompt prompt;
  prompt.ids = {1, 2, 3};
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.sampling = {.temperature = 3.0f, .top_k = 0, .top_p = 1.0f, .seed = 1234};
  FakeSession s1, s2;
  const auto a = generate(s1, prompt, options);
  CHECK(a == generate(s2, prompt, options));
  CHECK(a.size() == 12);
  CHECK(a != expected_greedy(prompt.ids, 12));  // T = 3 over a 16-token vocab does wander
}

// Issue 8: flags silently ignored, and all-NaN logits sampled as token 0.
TEST_CASE("Sampler: top-k or top-p under greedy decoding is an error, not ignored", "[generation]") {
  CHECK_THROWS_WITH(Sampler({.temperature = 0.0f, .top_k = 5}), Catch::Contains("--top-k 5") &&
                                                                    Catch::Contains("no effect under greedy"));
  CHECK_THROWS_WITH(Sampler({.temperature = 0.0f, .top_k = 0, .top_p = 0.9f}), Catch::Contains("--top-p"));
  CHECK_THROWS_AS(Sampler({.temperature = 0.0f, .top_k = 5}), InputError);
  CHECK_NOTHROW(Sampler({.temperature = 0.0f, .top_k = 0, .top_p = 1.0f}));
  CHECK_NOTHROW(Sampler({.temperature = 0.7f, .top_k = 5, .top_p = 0.9f}));
}

namespace {

// A session whose logits at decode step `bad_step` (0: the prefill) are `bad`.
class PoisonedSession : public Session {
 public:
  PoisonedSession(int bad_step, std::vector<float> bad) : bad_step_(bad_step), bad_(std::move(bad)) {}
  ForwardResult forward(const ForwardStep& step, DiagnosticHook* = nullptr) override {
    position_ += static_cast<std::int64_t>(step.ids.size());
    std::vector<float> logits = {0, 1, 0, 0};
    if (steps_++ == bad_step_) logits = bad_;
    ForwardResult result;
    result.logits = HostTensor::from_f32({1, static_cast<std::int64_t>(logits.size())}, logits);
    return result;
  }
  std::int64_t position() const override { return position_; }
  void reset() override { position_ = 0; }

 private:
  int bad_step_;
  std::vector<float> bad_;
  int steps_ = 0;
  std::int64_t position_ = 0;
};

}  // namespace

TEST_CASE("generate: non-finite logits are an error, never a token", "[generation]") {
  Prompt prompt;
  prompt.ids = {1, 2};
  GenerationOptions options;
  options.max_new_tokens = 4;
  for (const auto& bad : std::vector<std::vector<float>>{
           {NAN, NAN, NAN, NAN}, {0, NAN, 0, 0}, {0, INFINITY, 0, 0}, {-INFINITY, -INFINITY, -INFINITY, -INFINITY}}) {
    for (int step : {0, 2}) {
      PoisonedSession session(step, bad);
      std::vector<std::int64_t> seen;
      CHECK_THROWS_AS(generate(session, prompt, options, [&](std::int64_t id) { seen.push_back(id); }), ValidationError);
      CHECK(seen.size() == static_cast<std::size_t>(step));  // nothing emitted from the broken step
    }
  }
  // A masked token (-inf) among finite ones is fine.
  PoisonedSession masked(0, {-INFINITY, 0, 2, -INFINITY});
  CHECK(generate(masked, prompt, options).front() == 2);
}

// ---- sampling where the logits are (OutputRequest::sample) ----------------------------------

namespace {

// A FakeSession that honours OutputRequest::sample with the reference rule (like a backend whose
// device picks the token), recording what it was asked.
class SamplingSession : public FakeSession {
 public:
  std::vector<SampleRequest> requests;
  ForwardResult forward(const ForwardStep& step, DiagnosticHook* hook = nullptr) override {
    ForwardResult result = FakeSession::forward(step, hook);
    if (step.outputs.sample) {
      requests.push_back(*step.outputs.sample);
      result.sampled = sample_logits(result.logits.span<float>(), *step.outputs.sample);
      result.logits = HostTensor();
    }
    return result;
  }
};

}  // namespace

TEST_CASE("sample_logits: the Sampler's picks, and the row's check", "[generation]") {
  std::vector<float> logits(40);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(3 * i)) * 2.0f;
  logits[5] = logits[9];  // a tie
  for (const SamplingOptions& o : {SamplingOptions{.temperature = 0.7f, .top_k = 0, .top_p = 1.0f, .seed = 3},
                                   SamplingOptions{.temperature = 1.3f, .top_k = 7, .top_p = 1.0f, .seed = 4},
                                   SamplingOptions{.temperature = 1.0f, .top_k = 0, .top_p = 0.6f, .seed = 5},
                                   SamplingOptions{.temperature = 0.5f, .top_k = 12, .top_p = 0.8f, .seed = 6},
                                   SamplingOptions{}}) {
    Sampler a(o), b(o);
    for (int i = 0; i < 100; ++i) {
      const SampleRequest r = b.request();
      CHECK(r.temperature == o.temperature);
      CHECK((r.u >= 0.0 && r.u < 1.0));
      const SampledToken t = sample_logits(logits, r);
      CHECK(t.id == a.next(logits));
      CHECK(t.logit == logits[static_cast<std::size_t>(t.id)]);
      CHECK(t.valid());
    }
  }
  // u picks along the kept candidates in rank order: 0 the best, just under 1 the last kept.
  const std::vector<float> row = {0.0f, 3.0f, 1.0f, 2.0f};
  CHECK(sample_logits(row, {.temperature = 1.0f, .top_k = 3, .top_p = 1.0f, .u = 0.0}).id == 1);
  CHECK(sample_logits(row, {.temperature = 1.0f, .top_k = 3, .top_p = 1.0f, .u = 0.999999}).id == 2);
  CHECK(sample_logits(row, {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .u = 0.999999}).id == 0);

  const SampledToken nan = sample_logits(std::vector<float>{0, INFINITY, NAN, 1}, {});
  CHECK(nan.bad_index == 1);
  CHECK(nan.bad_value == INFINITY);
  CHECK_FALSE(nan.valid());
  const SampledToken masked = sample_logits(std::vector<float>{-INFINITY, -INFINITY}, {.temperature = 1.0f, .u = 0.5});
  CHECK(masked.all_masked);
  CHECK(masked.id == 0);
  CHECK_FALSE(masked.valid());
  CHECK(sample_logits(std::vector<float>{-INFINITY, 2}, {}).valid());
}

// Without top-k the pick ranks lazily (a heap, only as far as the nucleus or the draw reaches):
// the draws must be those of the rule written out plainly, a full sort by (scaled logit desc,
// index asc) and the walk along it.
TEST_CASE("sample_logits without top-k: picks equal the fully sorted rule", "[generation]") {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> row(5000);
  for (auto& x : row) x = std::round(normal(rng) * 4.0f) / 4.0f;  // many ties
  for (std::size_t i = 0; i < row.size(); i += 7) row[i] = -INFINITY;
  for (const float temperature : {0.4f, 1.0f}) {
    for (const float top_p : {1.0f, 0.9f, 0.3f}) {
      std::vector<std::pair<double, std::size_t>> ranked;
      for (std::size_t i = 0; i < row.size(); ++i) ranked.emplace_back(static_cast<double>(row[i] / temperature), i);
      std::sort(ranked.begin(), ranked.end(),
                [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
      std::vector<double> weight;
      double total = 0;
      for (const auto& [key, i] : ranked) total += weight.emplace_back(std::exp(key - ranked.front().first));
      std::size_t keep = ranked.size();
      if (top_p < 1.0f) {
        double mass = 0;
        for (keep = 0; keep < ranked.size();) {
          mass += weight[keep++];
          if (mass >= top_p * total) break;
        }
        total = mass;
      }
      for (const double u : {0.0, 0.05, 0.31, 0.5, 0.77, 0.93, 0.999}) {
        INFO("T " << temperature << " top-p " << top_p << " u " << u);
        std::size_t want = ranked[keep - 1].second;
        double cumulative = 0;
        for (std::size_t j = 0; j < keep; ++j) {
          cumulative += weight[j];
          if (u * total < cumulative) {
            want = ranked[j].second;
            break;
          }
        }
        const SampledToken got = sample_logits(row, {.temperature = temperature, .top_k = 0, .top_p = top_p, .u = u});
        CHECK(got.id == static_cast<std::int64_t>(want));
      }
    }
  }
}

TEST_CASE("generate: a session that samples gets the Sampler's draws and gives the same ids", "[generation]") {
  Prompt prompt;
  prompt.ids = {3, 1, 4};
  for (const SamplingOptions& o : {SamplingOptions{}, SamplingOptions{.temperature = 2.5f, .top_k = 0, .top_p = 1.0f, .seed = 11},
                                   SamplingOptions{.temperature = 3.0f, .top_k = 5, .top_p = 0.9f, .seed = 12}}) {
    GenerationOptions options;
    options.max_new_tokens = 10;
    options.sampling = o;
    FakeSession host;
    SamplingSession device;
    const auto want = generate(host, prompt, options);
    CHECK(generate(device, prompt, options) == want);
    // One request per new token, carrying the Sampler's stream of draws.
    REQUIRE(device.requests.size() == want.size());
    Sampler reference(o);
    for (const auto& r : device.requests) {
      const SampleRequest expected = reference.request();
      CHECK(r.u == expected.u);
      CHECK(r.top_k == o.top_k);
      CHECK(r.top_p == o.top_p);
    }
    for (const auto& call : host.calls) CHECK(call.outputs.sample.has_value());
  }
}

TEST_CASE("generate: a sampled token from broken logits is an error, never a token", "[generation]") {
  class Broken : public Session {
   public:
    explicit Broken(SampledToken t) : t_(t) {}
    ForwardResult forward(const ForwardStep& step, DiagnosticHook* = nullptr) override {
      position_ += static_cast<std::int64_t>(step.ids.size());
      ForwardResult r;
      r.sampled = t_;
      return r;
    }
    std::int64_t position() const override { return position_; }
    void reset() override { position_ = 0; }

   private:
    SampledToken t_;
    std::int64_t position_ = 0;
  };
  Prompt prompt;
  prompt.ids = {1};
  GenerationOptions options;
  Broken nan({.id = 0, .logit = 0, .bad_index = 7, .bad_value = NAN});
  CHECK_THROWS_WITH(generate(nan, prompt, options), Catch::Contains("nan at id 7"));
  Broken masked({.id = 0, .all_masked = true});
  CHECK_THROWS_AS(generate(masked, prompt, options), ValidationError);
  Broken fine({.id = 2});
  options.max_new_tokens = 2;
  CHECK(generate(fine, prompt, options) == std::vector<std::int64_t>{2, 2});
}

TEST_CASE("generate: Pick::Host asks for logits only and picks the same ids with the same draws", "[generation]") {
  Prompt prompt;
  prompt.ids = {2, 7};
  for (const SamplingOptions& o : {SamplingOptions{}, SamplingOptions{.temperature = 2.0f, .top_k = 0, .top_p = 1.0f, .seed = 21},
                                   SamplingOptions{.temperature = 1.5f, .top_k = 4, .top_p = 0.8f, .seed = 22}}) {
    GenerationOptions on_device;
    on_device.max_new_tokens = 12;
    on_device.sampling = o;
    GenerationOptions on_host = on_device;
    on_host.pick = GenerationOptions::Pick::Host;
    SamplingSession device, host;
    const auto want = generate(device, prompt, on_device);
    CHECK(generate(host, prompt, on_host) == want);
    // The host pick never asks the session to sample: it is the path an A/B compares against.
    CHECK(host.requests.empty());
    REQUIRE(host.calls.size() == want.size());
    for (const auto& call : host.calls) CHECK((call.outputs.logits && !call.outputs.sample));
  }
}

TEST_CASE("generate: a feed replaces the fed-back token, and Pick::None picks nothing and needs a feed", "[generation]") {
  Prompt prompt;
  prompt.ids = {5, 6, 7};
  std::int64_t next = 1;
  GenerationOptions options;
  options.max_new_tokens = 5;
  options.feed = [&next](std::int64_t) { return next = (next * 3 + 1) % kVocab; };
  FakeSession fed;
  const auto picked = generate(fed, prompt, options);
  CHECK(picked.size() == 5);
  // What went in after the prompt is the feed's sequence 4, 13, 8, 9, not the picks.
  REQUIRE(fed.calls.size() == 5);
  CHECK(fed.calls[1].ids == std::vector<std::int64_t>{4});
  CHECK(fed.calls[4].ids == std::vector<std::int64_t>{9});
  CHECK(picked[1] == favourite(4, 3));

  next = 1;
  options.pick = GenerationOptions::Pick::None;
  FakeSession none;
  const auto out = generate(none, prompt, options);
  CHECK(out == std::vector<std::int64_t>{4, 13, 8, 9, 12});
  REQUIRE(none.calls.size() == 5);
  for (const auto& call : none.calls) CHECK(!call.outputs.sample);
  CHECK(none.calls[4].ids == std::vector<std::int64_t>{9});

  options.feed = nullptr;
  FakeSession nothing;
  CHECK_THROWS_WITH(generate(nothing, prompt, options), Catch::Contains("needs a feed"));
}

TEST_CASE("apply_penalties: repetition over every token, then frequency per output occurrence, then presence",
          "[generation]") {
  // Tokens 0 1 | 0 2 2 (output from position 2): 0, 1, 2 in the sequence; 0 once and 2 twice in the output.
  const std::vector<std::int32_t> tokens = {0, 1, 0, 2, 2};
  std::vector<float> row = {2.0f, -2.0f, 1.0f, 0.5f, -1.0f};
  apply_penalties(row, tokens,
                  {.repetition_penalty = 2.0f, .frequency_penalty = 0.5f, .presence_penalty = 0.25f, .output_start = 2});
  CHECK(row == std::vector<float>{2.0f / 2 - 0.5f - 0.25f, -2.0f * 2, 1.0f / 2 - 0.5f - 0.5f - 0.25f, 0.5f, -1.0f});
  // Each alone; a prompt-only token is untouched by frequency and presence.
  std::vector<float> only = {1.0f, 1.0f, 1.0f};
  apply_penalties(only, std::vector<std::int32_t>{1, 2, 2}, {.frequency_penalty = 1.0f, .output_start = 1});
  CHECK(only == std::vector<float>{1.0f, 1.0f, -1.0f});
  only = {1.0f, 1.0f, 1.0f};
  apply_penalties(only, std::vector<std::int32_t>{1, 2, 2}, {.presence_penalty = 1.0f, .output_start = 2});
  CHECK(only == std::vector<float>{1.0f, 1.0f, 0.0f});
  only = {-3.0f, 0.0f, 3.0f};
  apply_penalties(only, std::vector<std::int32_t>{0, 1, 2}, {.repetition_penalty = 1.5f});
  CHECK(only == std::vector<float>{-4.5f, 0.0f, 2.0f});
  CHECK_THROWS(apply_penalties(only, std::vector<std::int32_t>{3}, {.repetition_penalty = 1.5f}));
}

TEST_CASE("sampling_distribution is the distribution sample_logits draws from", "[generation]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(300);
  for (float& x : row) x = normal(rng);
  row[7] = row[8];  // a tie
  for (const SampleRequest& r : {SampleRequest{.temperature = 0.7f}, SampleRequest{.temperature = 1.0f, .top_k = 20},
                                 SampleRequest{.temperature = 1.3f, .top_p = 0.8f},
                                 SampleRequest{.temperature = 0.9f, .min_p = 0.05f},
                                 SampleRequest{.temperature = 1.0f, .top_k = 50, .top_p = 0.9f, .min_p = 0.02f}}) {
    INFO("T " << r.temperature << " top_k " << r.top_k << " top_p " << r.top_p << " min_p " << r.min_p);
    const auto p = sampling_distribution(row, r);
    CHECK(std::accumulate(p.begin(), p.end(), 0.0) == Approx(1.0).margin(1e-12));
    // Walking the kept ids in sample_logits' rank order, a draw just inside each one's interval picks it.
    std::vector<std::int64_t> kept;
    for (std::size_t i = 0; i < p.size(); ++i)
      if (p[i] > 0) kept.push_back(static_cast<std::int64_t>(i));
    std::stable_sort(kept.begin(), kept.end(), [&](auto a, auto b) {
      return row[static_cast<std::size_t>(a)] > row[static_cast<std::size_t>(b)];
    });
    double below = 0;
    for (const std::int64_t id : kept) {
      const double mass = p[static_cast<std::size_t>(id)];
      SampleRequest draw = r;
      draw.u = below + mass / 2;
      CHECK(sample_logits(row, draw).id == id);
      below += mass;
    }
  }
  const auto greedy = sampling_distribution(row, SampleRequest{});
  CHECK(greedy[static_cast<std::size_t>(sample_logits(row, SampleRequest{}).id)] == 1.0);
}

TEST_CASE("Sampler: penalties outside their ranges are input errors naming the flag", "[generation]") {
  CHECK_THROWS_WITH(Sampler({.repetition_penalty = 0.0f}), Catch::Contains("--repetition-penalty"));
  CHECK_THROWS_WITH(Sampler({.repetition_penalty = NAN}), Catch::Contains("--repetition-penalty"));
  CHECK_THROWS_WITH(Sampler({.frequency_penalty = 2.5f}), Catch::Contains("--frequency-penalty"));
  CHECK_THROWS_WITH(Sampler({.presence_penalty = -3.0f}), Catch::Contains("--presence-penalty"));
  Sampler ok({.repetition_penalty = 1.1f, .frequency_penalty = -2.0f, .presence_penalty = 2.0f});
  const SampleRequest r = ok.request(7);
  CHECK(r.penalized());
  CHECK(r.output_start == 7);
  CHECK(r.repetition_penalty == 1.1f);
}

TEST_CASE("apply_penalties: logit_bias is added first, then the penalties see the biased logits", "[generation]") {
  const std::vector<std::pair<std::int64_t, float>> bias = {{0, 3.0f}, {2, -1.5f}};
  std::vector<float> row = {-1.0f, 1.0f, 0.5f};
  apply_penalties(row, std::vector<std::int32_t>{0, 2}, {.repetition_penalty = 2.0f, .output_start = 2, .logit_bias = bias});
  CHECK(row == std::vector<float>{(-1.0f + 3.0f) / 2, 1.0f, (0.5f - 1.5f) * 2});
  row = {-1.0f, 1.0f, 0.5f};
  apply_penalties(row, std::vector<std::int32_t>{}, {.logit_bias = bias});
  CHECK(row == std::vector<float>{2.0f, 1.0f, -1.0f});
  const std::vector<std::pair<std::int64_t, float>> outside = {{3, 1.0f}};
  CHECK_THROWS(apply_penalties(row, std::vector<std::int32_t>{}, {.logit_bias = outside}));
  // The Sampler checks what a request gives.
  CHECK_THROWS_WITH(Sampler({.logit_bias = {{2, 1.0f}, {1, 1.0f}}}), Catch::Contains("logit_bias"));
  CHECK_THROWS_WITH(Sampler({.logit_bias = {{1, 1.0f}, {1, 2.0f}}}), Catch::Contains("logit_bias"));
  CHECK_THROWS_WITH(Sampler({.logit_bias = {{1, 101.0f}}}), Catch::Contains("[-100, 100]"));
  Sampler ok({.logit_bias = {{1, 5.0f}}});
  CHECK(ok.request().penalized());
  CHECK(ok.request().logit_bias.size() == 1);
}
