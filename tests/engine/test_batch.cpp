// The batch runtime on the CPU: a Runner's batched forward and the engine's schedule against each
// sequence run alone through a Session (zoo::generate), on every family's fixture. The rule
// (DESIGN.md): ids equal; where they differ, the alone run's top-2 margin at the first difference
// is below 1e-5 (float32), reported, and the comparison stops there.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>

#include "engine/batch_test_util.hpp"
#include "qwen3/fixture_test_util.hpp"
#include "scoped_env.hpp"
#include "test_skip.hpp"
#include "zoo/batch.hpp"
#include "zoo/engine/engine.hpp"
#include "zoo/generation.hpp"
#include "zoo/sampling.hpp"
#if defined(ZOO_WITH_CUDA)
#include "cuda/cuda_model_util.hpp"
#include "zoo/kernels/cuda/attention.hpp"
#include "zoo/kernels/cuda/common.hpp"
#endif

namespace zoo::ptest {
namespace {

// Every decoder family's fixture, sliding windows (mistral-sw 6, gemma2 5, gemma3 6) and experts
// included.
const char* const kFixtures[] = {"qwen3-tiny",  "qwen2-tiny",  "llama-tiny", "mistral-sw-tiny", "gemma-tiny",
                                 "gemma2-tiny", "gemma3-tiny", "phi3-tiny",  "olmo2-tiny",      "qwen3-moe-tiny",
                                 "qwen2-moe-tiny"};

TEST_CASE(
    "engine: every sequence of a batch equals its run alone, on every family (greedy, page boundaries, "
    "chunked prefill mixed with decodes, sequences joining and leaving)") {
  // Prompt lengths around page boundaries; different lengths of output, so sequences leave at
  // different steps and the waiting ones join (at most 4 running); a token budget of 24 rows
  // cuts the longer prompts into chunks that share steps with other sequences' decodes.
  const std::int64_t lengths[] = {15, 16, 17, 31, 32, 33, 1, 5, 47};
  for (const char* name : kFixtures) {
    INFO("fixture " << name);
    OpenedModel opened = open_fixture(fixture_dir(name));
    Model& model = *opened.model;
    const std::int64_t vocab = model.info().vocab_size;
    std::vector<engine::GenerationRequest> requests;
    std::vector<AloneRun> alone;
    for (std::size_t i = 0; i < std::size(lengths); ++i) {
      const int new_tokens = 4 + static_cast<int>(i % 4) * 5;
      auto prompt = prompt_ids(lengths[i], vocab, i);
      alone.push_back(greedy_alone(model, prompt, new_tokens));
      requests.push_back(greedy_request(std::move(prompt), new_tokens));
    }
    auto runner = model.new_runner({});
    engine::EngineStats stats;
    const auto done =
        run_engine(*runner, std::move(requests), {.max_running = 4, .max_batched_tokens = 24}, &stats);
    for (std::size_t i = 0; i < done.size(); ++i)
      check_same_ids(alone[i], done[i].ids,
                     fmt::format("{} sequence {} ({} prompt tokens)", name, i, lengths[i]));
    // It was a batch: more rows per step than one sequence's decode, and mixed prefill and decode.
    CHECK(stats.peak_running == 4);
    CHECK(stats.rows > stats.steps * 2);
    // Every page is back in the pool once every sequence is done.
    for (const auto& group : runner->pool().groups) CHECK(group.used == 0);
  }
}

TEST_CASE("engine: seeded sampling gives each sequence the ids of its run alone, whatever the batch") {
  for (const char* name : {"qwen3-tiny", "gemma2-tiny"}) {
    INFO("fixture " << name);
    OpenedModel opened = open_fixture(fixture_dir(name));
    Model& model = *opened.model;
    const std::int64_t vocab = model.info().vocab_size;
    std::vector<engine::GenerationRequest> requests;
    std::vector<std::vector<std::int64_t>> alone;
    for (int i = 0; i < 6; ++i) {
      engine::GenerationRequest request = greedy_request(prompt_ids(3 + 7 * i, vocab, 100 + i), 12);
      request.sampling = {.temperature = 0.7f + 0.1f * static_cast<float>(i % 3),
                          .top_k = i % 2 ? 20 : 0,
                          .top_p = i % 3 ? 0.9f : 1.0f,
                          .seed = 1000u + static_cast<unsigned>(i),
                          .min_p = i == 4 ? 0.05f : 0.0f};
      GenerationOptions options;
      options.max_new_tokens = request.max_new_tokens;
      options.sampling = request.sampling;
      auto session = model.new_session();
      Prompt prompt;
      prompt.ids = request.prompt;
      alone.push_back(generate(*session, prompt, options));
      requests.push_back(std::move(request));
    }
    auto runner = model.new_runner({});
    const auto done = run_engine(*runner, std::move(requests), {.max_running = 6, .max_batched_tokens = 16});
    for (std::size_t i = 0; i < done.size(); ++i) {
      INFO("sequence " << i);
      CHECK(done[i].ids == alone[i]);
    }
  }
}

TEST_CASE(
    "engine: a pool too small for every sequence preempts and recomputes, and the ids stay those alone") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  Model& model = *opened.model;
  std::vector<engine::GenerationRequest> requests;
  std::vector<AloneRun> alone;
  for (int i = 0; i < 6; ++i) {
    auto prompt = prompt_ids(20 + i, model.info().vocab_size, 200 + i);
    alone.push_back(greedy_alone(model, prompt, 30));
    requests.push_back(greedy_request(std::move(prompt), 30));
  }
  // 4 pages of 16 tokens per sequence at the end; 10 pages for 6 sequences.
  auto runner = model.new_runner({.kv_pages = 10});
  engine::EngineStats stats;
  const auto done =
      run_engine(*runner, std::move(requests), {.max_running = 6, .max_batched_tokens = 64}, &stats);
  CHECK(stats.preemptions > 0);
  CHECK(stats.peak_pages_used == 10);
  for (std::size_t i = 0; i < done.size(); ++i)
    check_same_ids(alone[i], done[i].ids, fmt::format("sequence {}", i));
}

TEST_CASE(
    "runner: a sliding-window group's pool holds its sequences' windows, not their contexts, and the bytes "
    "it leaves "
    "go to full attention") {
  OpenedModel opened = open_fixture(fixture_dir("gemma2-tiny"));  // layers: window 5, full, window 5
  Model& model = *opened.model;
  const std::int64_t context = 256, sequences = 4;
  // Each sequence keeps ceil(4 / 16) + 2 = 3 pages of its window, and one step may cover the whole
  // context (16 pages): 4 * 3 + 16.
  const std::int64_t window_pool = sequences * 3 + context / kKvPageTokens;
  auto given = model.new_runner({.kv_pages = 64, .max_sequences = sequences, .max_context = context});
  const KvPoolStats pool = given->pool();
  REQUIRE(pool.groups.size() == 2);
  for (const auto& g : pool.groups) CHECK(g.capacity == (g.window == 0 ? 64 : window_pool));
  CHECK(pool.capacity() == 64);
  // Sized by bytes: the same bytes as 64 pages of every layer; the full-attention layer (one of
  // three) gets what the two window layers leave: 64 + 2 * (64 - 28).
  const auto kv_bytes = 64 * pool.page_bytes;
  auto by_bytes =
      model.new_runner({.kv_bytes = kv_bytes, .max_sequences = sequences, .max_context = context});
  for (const auto& g : by_bytes->pool().groups)
    CHECK(g.capacity == (g.window == 0 ? 64 + 2 * (64 - window_pool) : window_pool));
  CHECK(by_bytes->pool().bytes() <= static_cast<double>(kv_bytes));
  CHECK(by_bytes->pool().bytes() > 0.99 * static_cast<double>(kv_bytes));

  // Through the engine: four prompts of many windows whose pages together (4 x 10) exceed the window
  // pool (28) but not the full one: they run at once only because pages behind the window go back.
  std::vector<engine::GenerationRequest> requests;
  std::vector<AloneRun> alone;
  for (int i = 0; i < 4; ++i) {
    auto prompt = prompt_ids(120 + 7 * i, model.info().vocab_size, 300 + i);
    alone.push_back(greedy_alone(model, prompt, 12));
    requests.push_back(greedy_request(std::move(prompt), 12));
  }
  engine::EngineStats stats;
  const auto done =
      run_engine(*given, std::move(requests), {.max_running = 4, .max_batched_tokens = 48}, &stats);
  CHECK(stats.preemptions == 0);
  CHECK(stats.peak_running == 4);
  for (std::size_t i = 0; i < done.size(); ++i)
    check_same_ids(alone[i], done[i].ids, fmt::format("sequence {}", i));
  for (const auto& group : given->pool().groups) CHECK(group.used == 0);
}

TEST_CASE("engine: each step's tokens are reported as they come, and a cancelled request leaves with its pages") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  Model& model = *opened.model;
  const std::int64_t vocab = model.info().vocab_size;
  auto runner = model.new_runner({});
  engine::Engine engine(*runner, {.max_running = 2, .max_batched_tokens = 64});
  const auto a = engine.add(greedy_request(prompt_ids(20, vocab, 1), 6));
  const auto b = engine.add(greedy_request(prompt_ids(9, vocab, 2), 30));
  const auto c = engine.add(greedy_request(prompt_ids(5, vocab, 3), 4));  // waits: two run at once
  std::map<std::int64_t, std::vector<std::int64_t>> streamed;
  std::map<std::int64_t, engine::Completion> done;
  for (int step = 0; step < 3; ++step) {
    for (auto& completion : engine.step()) done.emplace(completion.request, std::move(completion));
    for (const auto& event : engine.last_tokens()) streamed[event.request].push_back(event.token.id);
  }
  CHECK(streamed[a].size() == 3);
  CHECK(streamed[b].size() == 3);
  CHECK(streamed.count(c) == 0);
  // Cancel one running and the waiting one: b's pages go back at once, c never runs.
  const auto used_before = runner->pool().groups.front().used;
  CHECK(engine.cancel(b));
  CHECK(engine.cancel(c));
  CHECK_FALSE(engine.cancel(c));
  CHECK_FALSE(engine.cancel(12345));
  CHECK(runner->pool().groups.front().used < used_before);
  CHECK(engine.running() == 1);
  CHECK(engine.waiting() == 0);
  while (!engine.idle()) {
    for (auto& completion : engine.step()) done.emplace(completion.request, std::move(completion));
    for (const auto& event : engine.last_tokens()) streamed[event.request].push_back(event.token.id);
  }
  REQUIRE(done.count(a) == 1);
  CHECK(done.count(b) == 0);
  CHECK(done.at(a).ids == streamed[a]);  // the stream and the completion agree
  CHECK_FALSE(engine.cancel(a));         // finished already
  CHECK(runner->pool().groups.front().used == 0);
}

TEST_CASE("engine: the prefix cache reuses whole pages of a finished prompt, gives the same ids, and makes room "
          "when pages run short") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  Model& model = *opened.model;
  const std::int64_t vocab = model.info().vocab_size;
  const auto shared = prompt_ids(40, vocab, 7);  // two whole pages and 8 tokens
  const auto with_tail = [&](std::uint64_t salt, std::int64_t length) {
    auto ids = shared;
    const auto tail = prompt_ids(length, vocab, salt);
    ids.insert(ids.end(), tail.begin(), tail.end());
    return ids;
  };
  // Requests one after another (each finishes before the next comes), as chat turns do.
  std::int64_t held = 0;  // pages in use once the last request is done, the engine still alive
  const auto run = [&](Runner& runner, engine::EngineOptions options, engine::EngineStats* stats) {
    engine::Engine engine(runner, options);
    std::vector<engine::Completion> out;
    for (int i = 0; i < 5; ++i) {
      engine.add(greedy_request(i == 4 ? shared : with_tail(20 + static_cast<std::uint64_t>(i), 3 + i), 5));
      while (!engine.idle())
        for (auto& completion : engine.step()) out.push_back(std::move(completion));
    }
    if (stats) *stats = engine.stats();
    held = runner.pool().groups.front().used;
    return out;
  };
  auto plain_runner = model.new_runner({});
  const auto plain = run(*plain_runner, {}, nullptr);
  engine::EngineStats stats;
  auto runner = model.new_runner({.max_sequences = 8});
  const auto cached = run(*runner, {.max_running = 2, .prefix_cache_entries = 4}, &stats);
  REQUIRE(cached.size() == plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    INFO("request " << i);
    CHECK(cached[i].ids == plain[i].ids);  // float32: the forked pages hold the same rows
    CHECK(cached[i].cached_tokens == (i == 0 ? 0 : 32));
  }
  CHECK(stats.prefix_queries == 5);
  CHECK(stats.prefix_hits == 4);
  CHECK(stats.prefix_hit_tokens == 4 * 32);
  CHECK(stats.prompt_tokens < 5 * 40);
  CHECK(held > 0);                                  // the cached sequences hold their pages
  CHECK(runner->pool().groups.front().used == 0);  // until the engine goes

  // A pool of 12 pages: four cached sequences of 3-4 pages cannot all stay; admission and decode
  // evict the least recently used ones instead of failing or preempting.
  engine::EngineStats small_stats;
  auto small = model.new_runner({.kv_pages = 12, .max_sequences = 8});
  const auto squeezed = run(*small, {.max_running = 2, .prefix_cache_entries = 4}, &small_stats);
  for (std::size_t i = 0; i < plain.size(); ++i) CHECK(squeezed[i].ids == plain[i].ids);
  CHECK(small_stats.prefix_evictions > 0);
  CHECK(small_stats.preemptions == 0);
}

TEST_CASE("engine: n choices of one prompt compute it once, the others fork its pages while it runs, and keep "
          "the ids of their runs alone") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  Model& model = *opened.model;
  const auto prompt = prompt_ids(50, model.info().vocab_size, 77);  // 3 whole pages and 2 tokens
  std::vector<engine::GenerationRequest> requests;
  std::vector<std::vector<std::int64_t>> alone;
  for (int i = 0; i < 4; ++i) {
    engine::GenerationRequest request = greedy_request(prompt, 10);
    request.sampling = {.temperature = 0.9f, .seed = 40u + static_cast<unsigned>(i)};
    GenerationOptions options;
    options.max_new_tokens = request.max_new_tokens;
    options.sampling = request.sampling;
    Prompt p;
    p.ids = prompt;
    alone.push_back(generate(*model.new_session(), p, options));
    requests.push_back(std::move(request));
  }
  for (const std::int64_t cache : {0, 4}) {
    INFO("prefix cache entries " << cache);
    auto runner = model.new_runner({.max_sequences = 8});
    engine::EngineStats stats;
    const auto done = run_engine(*runner, requests, {.max_running = 4, .max_batched_tokens = 256,
                                                     .prefix_cache_entries = cache}, &stats);
    for (std::size_t i = 0; i < done.size(); ++i) {
      INFO("choice " << i);
      CHECK(done[i].ids == alone[i]);
      CHECK(done[i].cached_tokens == (cache && i > 0 ? 48 : 0));
    }
    // Shared: 4 prompt pages (3 shared + the leader's own partial one) plus each choice's own
    // pages for 2 + 10 tokens; unshared: 4 pages per choice.
    CHECK(stats.prompt_tokens == (cache ? 50 + 3 * 2 : 4 * 50));
    CHECK(stats.prefix_hits == (cache ? 3 : 0));
    if (cache) CHECK(stats.peak_pages_used < 4 * 4);
  }
}

TEST_CASE("engine: requests that can never run are refused when added, naming the numbers") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  auto runner = opened.model->new_runner({.kv_pages = 4, .max_context = 100});
  engine::Engine eng(*runner);
  CHECK_THAT(input_error_of([&] { eng.add(greedy_request(std::vector<std::int64_t>(90, 1), 20)); }),
             Catch::Contains("90 tokens plus max_new_tokens 20 exceed the context limit of 100"));
  CHECK_THAT(input_error_of([&] { eng.add(greedy_request(std::vector<std::int64_t>(60, 1), 20)); }),
             Catch::Contains("need 5 KV pages, the pool holds 4"));
  CHECK_THAT(input_error_of([&] { eng.add(greedy_request({}, 20)); }),
             Catch::Contains("at least one prompt token"));
  CHECK(eng.idle());
}

// ---- The Runner directly ----

ForwardStep step_of(const std::vector<std::int64_t>& ids, OutputRequest outputs = {}) {
  return ForwardStep{ids, {}, {}, outputs};
}

#if defined(ZOO_WITH_CUDA)
// Two CUDA runners fed the same steps (build them with ZOO_RUNNER_GRAPHS=0: the same kernels on
// both): `picked` is asked for picks, `logits` returns each slice's logits row for the host reference.
struct TwinRunners {
  std::unique_ptr<Runner> picked, logits;
  std::vector<SequenceId> a, b;
  TwinRunners(Model& model, std::size_t sequences)
      : picked(model.new_runner({.kv_pages = 64, .max_sequences = 16})),
        logits(model.new_runner({.kv_pages = 64, .max_sequences = 16})) {
    for (std::size_t i = 0; i < sequences; ++i) {
      a.push_back(picked->open_sequence());
      b.push_back(logits->open_sequence());
    }
  }
  // Slice i feeds next[i]; `picked` is asked outputs[i]. The results of both runners.
  std::pair<std::vector<ForwardResult>, std::vector<ForwardResult>> step(
      const std::vector<std::vector<std::int64_t>>& next, const std::vector<OutputRequest>& outputs) {
    std::vector<ForwardStep> with, plain;
    ForwardBatch x, y;
    for (std::size_t i = 0; i < next.size(); ++i) {
      with.push_back(step_of(next[i], outputs[i]));
      plain.push_back(step_of(next[i]));
    }
    for (std::size_t i = 0; i < next.size(); ++i) {
      x.slices.push_back({a[i], picked->tokens(a[i]), &with[i]});
      y.slices.push_back({b[i], logits->tokens(b[i]), &plain[i]});
    }
    picked->submit(x);
    logits->submit(y);
    auto got = picked->wait();
    return {std::move(got), logits->wait()};
  }
  // Sequence i becomes a fork of itself (on both runners).
  void refork(std::size_t i) {
    const SequenceId fa = picked->fork_sequence(a[i], -1), fb = logits->fork_sequence(b[i], -1);
    picked->close_sequence(a[i]);
    logits->close_sequence(b[i]);
    a[i] = fa;
    b[i] = fb;
  }
};
#endif

TEST_CASE("runner: one forward pass runs every slice's rows through each linear at once") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  Model& model = *opened.model;
  auto runner = model.new_runner({});
  const SequenceId a = runner->open_sequence(), b = runner->open_sequence(), c = runner->open_sequence();
  const auto ids_a = prompt_ids(1, 100, 1), ids_b = prompt_ids(5, 100, 2), ids_c = prompt_ids(17, 100, 3);
  const ForwardStep sa = step_of(ids_a), sb = step_of(ids_b), sc = step_of(ids_c);
  runner->submit({{{a, 0, &sa}, {b, 0, &sb}, {c, 0, &sc}}});
  const auto results = runner->wait();
  REQUIRE(results.size() == 3);
  const nlohmann::json stats = runner->stats();
  // q, k, v, o, gate, up, down per layer, each over all 23 rows.
  CHECK(stats["linear_calls"] == 7 * model.info().num_layers);
  CHECK(stats["linear_rows_min"] == 23);
  CHECK(stats["linear_rows_max"] == 23);
  CHECK(runner->tokens(a) == 1);
  CHECK(runner->tokens(c) == 17);
  // Each slice's logits are its own last row: equal (to float32 rounding of a differently blocked
  // GEMM) to the sequence's run alone.
  for (const auto& [ids, result] :
       {std::pair{&ids_a, &results[0]}, {&ids_b, &results[1]}, {&ids_c, &results[2]}}) {
    auto session = model.new_session();
    const ForwardResult alone = session->forward(step_of(*ids));
    REQUIRE(result->logits.shape() == alone.logits.shape());
    const auto x = result->logits.span<float>(), y = alone.logits.span<float>();
    float worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
    CHECK(worst < 1e-4f);
  }
}

TEST_CASE("runner: checks a batch whole before touching any sequence") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  auto runner = opened.model->new_runner({.kv_pages = 3});
  const SequenceId a = runner->open_sequence(), b = runner->open_sequence();
  const auto prompt = prompt_ids(40, 100, 7);
  const ForwardStep pa = step_of(prompt);
  runner->submit({{{a, 0, &pa}}});
  const ForwardResult first = std::move(runner->wait().front());
  CHECK(runner->pool().groups.front().used == 3);
  // b needs a page and none is free: refused whole, a untouched.
  REQUIRE(!first.logits.empty());
  const std::vector<std::int64_t> one{5}, next{9};
  const ForwardStep sb = step_of(one), sa = step_of(next);
  CHECK_THROWS_AS(runner->submit({{{a, 40, &sa}, {b, 0, &sb}}}), KvPoolExhausted);
  CHECK(runner->tokens(a) == 40);
  CHECK(runner->tokens(b) == 0);
  // A stale start, a sequence twice, an id outside the vocabulary: InputErrors, nothing changed.
  CHECK_THAT(input_error_of([&] { runner->submit({{{a, 39, &sa}}}); }), Catch::Contains("holds 40 tokens"));
  CHECK_THAT(input_error_of([&] {
               runner->submit({{{a, 40, &sa}, {a, 40, &sa}}});
             }),
             Catch::Contains("twice"));
  const std::vector<std::int64_t> bad{1 << 20};
  const ForwardStep sbad = step_of(bad);
  CHECK_THAT(input_error_of([&] {
               runner->submit({{{a, 40, &sa}, {b, 0, &sbad}}});
             }),
             Catch::Contains("outside the vocabulary"));
  CHECK(runner->tokens(a) == 40);
  // a goes on as if nothing happened: its next logits equal an undisturbed run's.
  runner->submit({{{a, 40, &sa}}});
  const ForwardResult after = std::move(runner->wait().front());
  auto session = opened.model->new_session();
  session->forward(pa);
  const ForwardResult clean = session->forward(sa);
  CHECK(after.logits.span<float>()[0] == clean.logits.span<float>()[0]);
  CHECK(std::equal(after.logits.span<float>().begin(), after.logits.span<float>().end(),
                   clean.logits.span<float>().begin()));
}

TEST_CASE("runner: a forked sequence shares its prefix's pages and copies the last one on its first write") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  Model& model = *opened.model;
  auto runner = model.new_runner({});
  const auto prompt = prompt_ids(20, 100, 11);
  const SequenceId a = runner->open_sequence();
  const ForwardStep pa = step_of(prompt);
  runner->submit({{{a, 0, &pa}}});
  runner->wait();
  CHECK(runner->pool().groups.front().used == 2);
  const SequenceId b = runner->fork_sequence(a);
  CHECK(runner->pool().groups.front().used == 2);
  CHECK(runner->tokens(b) == 20);
  const std::vector<std::int64_t> ta{3}, tb{4};
  const ForwardStep sa = step_of(ta), sb = step_of(tb);
  runner->submit({{{a, 20, &sa}, {b, 20, &sb}}});
  const auto results = runner->wait();
  CHECK(runner->pool().groups.front().used == 3);  // page 1 was shared and partly full: b copied it
  // Each equals its own history run alone.
  for (const auto& [next, result] : {std::pair{&ta, &results[0]}, {&tb, &results[1]}}) {
    auto session = model.new_session();
    session->forward(pa);
    const ForwardResult alone = session->forward(step_of(*next));
    CHECK(std::equal(result->logits.span<float>().begin(), result->logits.span<float>().end(),
                     alone.logits.span<float>().begin()));
  }
  runner->close_sequence(a);
  runner->close_sequence(b);
  CHECK(runner->pool().groups.front().used == 0);
}

TEST_CASE("runner: chunked prefill equals one-shot prefill, sliding windows included") {
  for (const char* name : {"qwen3-tiny", "mistral-sw-tiny", "gemma2-tiny"}) {
    INFO("fixture " << name);
    OpenedModel opened = open_fixture(fixture_dir(name));
    const auto prompt = prompt_ids(45, opened.model->info().vocab_size, 21);
    auto session = opened.model->new_session();
    const ForwardResult whole = session->forward(step_of(prompt));
    auto runner = opened.model->new_runner({});
    const SequenceId s = runner->open_sequence();
    ForwardResult last;
    for (std::int64_t at = 0; at < 45; at += 7) {
      const std::vector<std::int64_t> chunk(prompt.begin() + at,
                                            prompt.begin() + std::min<std::int64_t>(at + 7, 45));
      const ForwardStep step = step_of(chunk);
      runner->submit({{{s, at, &step}}});
      last = std::move(runner->wait().front());
    }
    const std::span<const float> x = last.logits.span<float>(), y = whole.logits.span<float>();
    REQUIRE(x.size() == y.size());
    float worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
    CHECK(worst < 1e-4f);
    // The windowed groups gave back the pages behind their windows.
    for (const auto& group : runner->pool().groups)
      if (group.window > 0) CHECK(group.used <= (group.window + 15) / 16 + 1);
  }
}

TEST_CASE("runner: logprobs of the sampled token and the top-n are the raw logits' log-softmax") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  auto runner = opened.model->new_runner({});
  const SequenceId s = runner->open_sequence();
  const auto prompt = prompt_ids(9, 100, 31);
  const ForwardStep sampled = step_of(prompt, OutputRequest{.sample = SampleRequest{}, .top_logprobs = 5});
  runner->submit({{{s, 0, &sampled}}});
  const ForwardResult result = std::move(runner->wait().front());
  REQUIRE(result.sampled);
  auto session = opened.model->new_session();
  const ForwardResult logits = session->forward(step_of(prompt));
  const auto row = logits.logits.span<float>();
  double sum = 0;
  const float top = *std::max_element(row.begin(), row.end());
  for (float x : row) sum += std::exp(static_cast<double>(x) - top);
  const double log_z = top + std::log(sum);
  CHECK(result.sampled->logprob == Approx(row[result.sampled->id] - log_z).margin(1e-5));
  REQUIRE(result.sampled->top.size() == 5);
  CHECK(result.sampled->top[0].first == result.sampled->id);  // greedy: the likeliest
  for (std::size_t i = 1; i < 5; ++i)
    CHECK(result.sampled->top[i].second <= result.sampled->top[i - 1].second);
}

// Scores of given ids against the reference rule (fill_logprobs) on logits rows: row r of `logits`
// scores ids[r].
void check_scores(const std::vector<SampledToken>& scores, std::span<const float> logits, std::int64_t vocab,
                  std::span<const std::int64_t> ids, int top, double margin) {
  REQUIRE(scores.size() == ids.size());
  for (std::size_t r = 0; r < ids.size(); ++r) {
    INFO("scored row " << r);
    const auto row = logits.subspan(r * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab));
    SampledToken want{.id = ids[r]};
    fill_logprobs(row, want, top);
    CHECK(scores[r].id == ids[r]);
    CHECK(scores[r].logit == Approx(row[static_cast<std::size_t>(ids[r])]).margin(margin));
    CHECK(scores[r].logprob == Approx(want.logprob).margin(margin));
    REQUIRE(scores[r].top.size() == want.top.size());
    for (std::size_t k = 0; k < want.top.size(); ++k) {
      CHECK(scores[r].top[k].first == want.top[k].first);
      CHECK(scores[r].top[k].second == Approx(want.top[k].second).margin(margin));
    }
  }
}

TEST_CASE("runner: scored ids get their rows' log-softmax and top-n, and the last row still samples") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  const std::int64_t vocab = opened.model->info().vocab_size;
  auto runner = opened.model->new_runner({});
  const SequenceId s = runner->open_sequence();
  const auto prompt = prompt_ids(11, vocab, 41);
  const std::span<const std::int64_t> next = std::span<const std::int64_t>(prompt).subspan(1);
  OutputRequest scored{.logits = true, .all_positions = true, .sample = SampleRequest{}};
  scored.score_ids = next;
  scored.score_top = 3;
  const ForwardStep step = step_of(prompt, scored);
  runner->submit({{{s, 0, &step}}});
  const ForwardResult result = std::move(runner->wait().front());
  CHECK(result.logits.empty());  // scored rows come back as scores only
  auto session = opened.model->new_session();
  const ForwardResult all = session->forward(step_of(prompt, {.logits = true, .all_positions = true}));
  check_scores(result.scores, all.logits.span<float>(), vocab, next, 3, 1e-5);
  REQUIRE(result.sampled);
  CHECK(result.sampled->id == sample_logits(all.logits.span<float>().last(static_cast<std::size_t>(vocab)), {}).id);

  // Refused: more ids than rows, scoring without every position's logits, ids outside the vocabulary.
  const SequenceId t = runner->open_sequence();
  const std::vector<std::int64_t> two = {1, 2}, three = {1, 2, 3}, bad = {vocab};
  const auto refused = [&](OutputRequest outputs, std::span<const std::int64_t> ids) {
    outputs.score_ids = ids;
    const ForwardStep x = step_of(two, outputs);
    return input_error_of([&] { runner->submit({{{t, 0, &x}}}); });
  };
  CHECK_THAT(refused({.logits = true, .all_positions = true}, three), Catch::Contains("scoring 3 ids"));
  CHECK_THAT(refused({.logits = true, .all_positions = false}, two), Catch::Contains("logits at all positions"));
  CHECK_THAT(refused({.logits = true, .all_positions = true}, bad), Catch::Contains("outside the vocabulary"));
  CHECK(runner->tokens(t) == 0);
}

TEST_CASE("engine: prompt logprobs score every prompt token after the first across chunks and preemption, and "
          "with no new tokens the prompt is only scored") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  Model& model = *opened.model;
  const std::int64_t vocab = model.info().vocab_size;
  const auto prompt = prompt_ids(37, vocab, 43);
  auto session = model.new_session();
  const ForwardResult all = session->forward(step_of(prompt, {.logits = true, .all_positions = true}));
  const std::span<const std::int64_t> next = std::span<const std::int64_t>(prompt).subspan(1);
  const AloneRun alone = greedy_alone(model, prompt, 6);

  auto scoring = [&](int new_tokens) {
    auto request = greedy_request(prompt, new_tokens);
    request.prompt_logprobs = 2;
    return request;
  };
  // Chunks of 8 rows: the scored ids of each chunk start after its first position. A pool of 4
  // pages for three sequences of 3 pages: the newest are preempted, recomputed and scored again.
  auto runner = model.new_runner({.kv_pages = 4, .max_sequences = 4});
  engine::EngineStats stats;
  const auto done = run_engine(*runner, {scoring(6), scoring(0), greedy_request(prompt, 6)},
                               {.max_running = 3, .max_batched_tokens = 8}, &stats);
  CHECK(stats.preemptions > 0);
  check_scores(done[0].prompt_scores, all.logits.span<float>(), vocab, next, 2, 1e-5);
  check_same_ids(alone, done[0].ids, "scored and generated");
  check_scores(done[1].prompt_scores, all.logits.span<float>(), vocab, next, 2, 1e-5);
  CHECK(done[1].ids.empty());
  CHECK(done[1].finish == engine::FinishReason::length);
  CHECK(done[2].prompt_scores.empty());
  CHECK(done[2].ids == done[0].ids);
  engine::Engine eng(*runner);
  CHECK_THAT(input_error_of([&] { eng.add(greedy_request(prompt, 0)); }), Catch::Contains("0 only when scoring"));
}

// ---- CUDA: the same rule in bf16 ----

TEST_CASE("CUDA runner: every sequence of a batch equals its run alone on every family (paged decode and prefill "
          "attention, chunked prefill, sequences joining and leaving)",
          "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto& lengths = kCudaBatchLengths;
  for (const char* name : {"qwen3-tiny-hd64", "llama-tiny-hd128", "qwen2-tiny", "mistral-sw-tiny", "gemma-tiny",
                           "gemma2-tiny", "gemma3-tiny", "phi3-tiny", "olmo2-tiny", "qwen3-moe-tiny"}) {
    INFO("fixture " << name);
    const auto loaded = cuda_test::load_cuda_fixture(fixture_dir(name));
    Model& model = *loaded->model;
    const std::int64_t vocab = model.info().vocab_size;
    std::vector<engine::GenerationRequest> requests;
    std::vector<AloneRun> alone;
    for (std::size_t i = 0; i < std::size(lengths); ++i) {
      const int new_tokens = 4 + static_cast<int>(i % 4) * 5;
      auto prompt = prompt_ids(lengths[i], vocab, i);
      alone.push_back(greedy_alone(model, prompt, new_tokens));
      requests.push_back(greedy_request(std::move(prompt), new_tokens));
    }
    auto runner = model.new_runner({.kv_pages = 256, .max_sequences = 8});
    engine::EngineStats stats;
    const auto done = run_engine(*runner, std::move(requests), {.max_running = 5, .max_batched_tokens = 40}, &stats);
    for (std::size_t i = 0; i < done.size(); ++i)
      check_same_ids(alone[i], done[i].ids, fmt::format("{} sequence {} ({} prompt tokens)", name, i, lengths[i]),
                     kCudaTieMargin);
    CHECK(stats.peak_running == 5);
    CHECK(stats.rows > stats.steps * 2);
    for (const auto& group : runner->pool().groups) CHECK(group.used == 0);
  }
#endif
}

TEST_CASE("CUDA runner: decode steps replayed as graphs (padding rows included) equal eager steps", "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto loaded = cuda_test::load_cuda_fixture(fixture_dir("gemma2-tiny"));  // windows: pages given back
  Model& model = *loaded->model;
  // 11 sequences (bucket 16: five padding rows), then fewer as they finish (buckets 8, 4, 2, 1).
  const auto requests = [&] {
    std::vector<engine::GenerationRequest> out;
    for (int i = 0; i < 11; ++i) out.push_back(greedy_request(prompt_ids(3 + 5 * i, 256, 300 + i), 6 + 4 * i));
    return out;
  };
  std::vector<engine::Completion> eager, graphs;
  {
    const zoo::test::ScopedEnv off("ZOO_RUNNER_GRAPHS", "0");
    auto runner = model.new_runner({.kv_pages = 128, .max_sequences = 16});
    eager = run_engine(*runner, requests(), {.max_running = 16, .max_batched_tokens = 512});
  }
  auto runner = model.new_runner({.kv_pages = 128, .max_sequences = 16});
  graphs = run_engine(*runner, requests(), {.max_running = 16, .max_batched_tokens = 512});
  // The same rows, the same kernels but for the GEMMs' m (the bucket): ids equal, or a near tie.
  std::vector<AloneRun> alone;
  for (int i = 0; i < 11; ++i) alone.push_back(greedy_alone(model, prompt_ids(3 + 5 * i, 256, 300 + i), 6 + 4 * i));
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    check_same_ids(alone[i], eager[i].ids, fmt::format("eager sequence {}", i), kCudaTieMargin);
    check_same_ids(alone[i], graphs[i].ids, fmt::format("graph sequence {}", i), kCudaTieMargin);
  }
#endif
}

TEST_CASE("engine: penalties over each sequence's own tokens give the ids of zoo::generate's host-side penalties, "
          "through batching, preemption and the prefix cache") {
  OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
  Model& model = *opened.model;
  const std::int64_t vocab = model.info().vocab_size;
  // Random weights repeat tokens, so every penalty moves picks; a shared prompt start makes the
  // prefix cache fork pages (and tokens) of earlier sequences.
  const std::vector<SamplingOptions> kinds = {
      {.repetition_penalty = 1.3f},
      {.temperature = 0.9f, .seed = 7, .frequency_penalty = 0.8f},
      {.temperature = 0.8f, .top_k = 20, .seed = 8, .presence_penalty = 1.5f},
      {.temperature = 1.0f, .top_p = 0.9f, .seed = 9, .repetition_penalty = 0.7f, .frequency_penalty = -0.5f,
       .presence_penalty = 0.5f},
      {.frequency_penalty = 2.0f, .presence_penalty = -1.0f},
      {.temperature = 0.8f, .seed = 10, .presence_penalty = 0.5f, .logit_bias = {{5, 4.0f}, {42, 2.5f}, {300, -100.0f}}},
  };
  const auto shared = prompt_ids(32, vocab, 900);
  std::vector<engine::GenerationRequest> requests;
  std::vector<std::vector<std::int64_t>> alone;
  int moved = 0;
  for (std::size_t i = 0; i < 2 * kinds.size(); ++i) {
    auto prompt = shared;
    const auto own = prompt_ids(3 + static_cast<std::int64_t>(i), vocab, 950 + i);
    prompt.insert(prompt.end(), own.begin(), own.end());
    engine::GenerationRequest request = greedy_request(prompt, 24);
    request.sampling = kinds[i % kinds.size()];
    GenerationOptions options;
    options.max_new_tokens = request.max_new_tokens;
    options.sampling = request.sampling;
    Prompt p;
    p.ids = prompt;
    alone.push_back(generate(*model.new_session(), p, options));
    GenerationOptions plain = options;
    plain.sampling.repetition_penalty = 1.0f;
    plain.sampling.frequency_penalty = plain.sampling.presence_penalty = 0.0f;
    plain.sampling.logit_bias.clear();
    moved += generate(*model.new_session(), p, plain) != alone.back();
    requests.push_back(std::move(request));
  }
  CHECK(moved == static_cast<int>(requests.size()));  // each penalty changed its sequence
  // A pool of 9 pages for 5 running sequences of up to 68 tokens (sharing their first 2 pages):
  // some are preempted and recomputed.
  auto runner = model.new_runner({.kv_pages = 9, .max_sequences = 16});
  engine::EngineStats stats;
  const auto done = run_engine(*runner, std::move(requests),
                               {.max_running = 5, .max_batched_tokens = 40, .prefix_cache_entries = 4}, &stats);
  for (std::size_t i = 0; i < done.size(); ++i) {
    INFO("sequence " << i);
    CHECK(done[i].ids == alone[i]);
  }
  CHECK(stats.preemptions > 0);
  CHECK(stats.prefix_hits > 0);
}

TEST_CASE("CUDA runner: every sampler mode, min-p and logprobs of a mixed batch pick on the device as the host "
          "reference does from the same logits",
          "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto loaded = cuda_test::load_cuda_fixture(fixture_dir("qwen3-tiny-hd64"));
  Model& model = *loaded->model;
  const std::int64_t vocab = model.info().vocab_size;
  // Greedy, select (top-k), sort (no top-k), min-p with each: one batch, every mode at once.
  const std::vector<SampleRequest> kinds = {
      {}, {.temperature = 0.8f, .top_k = 20}, {.temperature = 1.0f}, {.temperature = 0.9f, .top_p = 0.8f},
      {.temperature = 1.0f, .min_p = 0.1f}, {.temperature = 0.7f, .top_k = 40, .top_p = 0.9f, .min_p = 0.05f}};
  const std::size_t N = kinds.size();
  const zoo::test::ScopedEnv off("ZOO_RUNNER_GRAPHS", "0");
  TwinRunners twin(model, N);
  std::vector<std::vector<std::int64_t>> next;
  for (std::size_t i = 0; i < N; ++i) next.push_back(prompt_ids(5 + 3 * static_cast<std::int64_t>(i), vocab, 60 + i));
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  int moved = 0;
  for (int step = 0; step < 4; ++step) {
    std::vector<SampleRequest> asked(N);
    std::vector<OutputRequest> outputs(N);
    for (std::size_t i = 0; i < N; ++i) {
      asked[i] = kinds[(i + static_cast<std::size_t>(step)) % N];
      asked[i].u = uni(rng);
      outputs[i] = OutputRequest{.sample = asked[i], .top_logprobs = static_cast<int>(i % 3) * 4 - 1};
    }
    const auto [got, rows] = twin.step(next, outputs);
    for (std::size_t i = 0; i < N; ++i) {
      INFO("step " << step << " sequence " << i << " T " << asked[i].temperature << " top_k " << asked[i].top_k
                   << " top_p " << asked[i].top_p << " min_p " << asked[i].min_p << " u " << asked[i].u);
      REQUIRE(got[i].sampled);
      const auto row = rows[i].logits.span<float>().last(static_cast<std::size_t>(vocab));
      SampledToken want = sample_logits(row, asked[i]);
      CHECK(got[i].sampled->id == want.id);
      moved += want.id != sample_logits(row, SampleRequest{}).id;
      const int top = outputs[i].top_logprobs;
      if (top >= 0) {
        fill_logprobs(row, want, top);
        CHECK(got[i].sampled->logprob == Approx(want.logprob).margin(1e-5));
        REQUIRE(got[i].sampled->top.size() == want.top.size());
        for (std::size_t r = 0; r < want.top.size(); ++r) {
          CHECK(got[i].sampled->top[r].first == want.top[r].first);
          CHECK(got[i].sampled->top[r].second == Approx(want.top[r].second).margin(1e-5));
        }
      } else {
        CHECK(got[i].sampled->top.empty());
      }
      next[i] = {want.id};
    }
  }
  CHECK(moved > 0);  // sampling left the argmax somewhere
#endif
}

#if defined(ZOO_WITH_CUDA)
const std::vector<std::pair<std::int64_t, float>> kBias = {{3, 5.0f}, {17, -2.0f}, {100, 7.5f}};
#endif

TEST_CASE(
    "CUDA runner: decode steps of one sampler mode replay as graphs and pick as the host reference does",
    "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto loaded = cuda_test::load_cuda_fixture(fixture_dir("qwen3-tiny-hd64"));
  Model& model = *loaded->model;
  const std::int64_t vocab = model.info().vocab_size;
  // Four sequences: the graph's bucket holds them exactly, so its GEMMs see the rows the eager
  // logits runner does; only the decode attention's split (sized for the graph's kv bucket) differs.
  constexpr std::size_t N = 4;
  constexpr int kSteps = 7;  // a prefill, then six decode steps
  const std::vector<SampleRequest> modes = {{},
                                            {.temperature = 0.8f, .top_k = 20},
                                            {.temperature = 1.0f, .top_p = 0.9f},
                                            {.temperature = 0.7f, .min_p = 0.05f}};
  for (const SampleRequest& mode : modes) {
    INFO("temperature " << mode.temperature << " top_k " << mode.top_k << " top_p " << mode.top_p << " min_p "
                        << mode.min_p);
    TwinRunners twin(model, N);
    std::vector<std::vector<std::int64_t>> next;
    for (std::size_t i = 0; i < N; ++i)
      next.push_back(prompt_ids(6 + 5 * static_cast<std::int64_t>(i), vocab, 70 + i));
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    int differing = 0, moved = 0;
    for (int step = 0; step < kSteps; ++step) {
      std::vector<SampleRequest> asked(N, mode);
      std::vector<OutputRequest> outputs(N);
      for (std::size_t i = 0; i < N; ++i) {
        asked[i].u = uni(rng);
        outputs[i] = OutputRequest{.sample = asked[i], .top_logprobs = 3};
      }
      const auto [got, rows] = twin.step(next, outputs);
      for (std::size_t i = 0; i < N; ++i) {
        REQUIRE(got[i].sampled);
        CHECK(got[i].sampled->top.size() == 3);
        const auto row = rows[i].logits.span<float>().last(static_cast<std::size_t>(vocab));
        const SampledToken want = sample_logits(row, asked[i]);
        // Logits a rounding apart may move a draw across a boundary of the distribution: rare.
        if (got[i].sampled->id != want.id) {
          WARN("step " << step << " sequence " << i << ": picked " << got[i].sampled->id
                       << ", host reference " << want.id);
          ++differing;
        }
        moved += want.id != sample_logits(row, SampleRequest{}).id;
        next[i] = {want.id};  // both runners go on with the reference's pick
      }
    }
    CHECK(differing <= 1);
    if (mode.temperature > 0) CHECK(moved > 0);
    CHECK(twin.picked->stats()["graph_steps"].get<std::int64_t>() == kSteps - 1);
  }
#endif
}

TEST_CASE(
    "CUDA runner: a lone prefill over consecutive pages reads them as one contiguous cache (cuDNN for long "
    "prompts), as the paged kernel does, and pages given back come out in order again",
    "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const zoo::test::ScopedEnv every_length("ZOO_CUDNN_MIN_TOKENS", "1");
  const auto loaded = cuda_test::load_cuda_fixture(fixture_dir("qwen3-tiny-hd64"));  // no window, no soft-cap
  Model& model = *loaded->model;
  const std::int64_t vocab = model.info().vocab_size;
  auto runner = model.new_runner({.kv_pages = 64, .max_sequences = 3});
  const auto prompt = prompt_ids(100, vocab, 7);
  const auto engine = [&] { return runner->stats()["prefill_attention"].get<std::string>(); };
  const auto prefill_alone = [&](SequenceId id) {
    const ForwardStep step = step_of(prompt);
    runner->submit({{SequenceSlice{id, 0, &step}}});
    return std::move(runner->wait().front().logits);
  };
  const SequenceId a = runner->open_sequence();
  const HostTensor lone = prefill_alone(a);
  const std::string lone_engine = engine();
  CHECK((lone_engine == "cudnn" || lone_engine == "zoo"));
  if (kernels::cuda::PrefillAttention::cudnn_unavailable_reason().empty()) CHECK(lone_engine == "cudnn");
  // The same prompt beside a decode of `a`: one paged launch for both.
  const SequenceId b = runner->open_sequence();
  const std::vector<std::int64_t> one = {5};
  const ForwardStep decode = step_of(one), chunk = step_of(prompt);
  runner->submit({{SequenceSlice{a, runner->tokens(a), &decode}, SequenceSlice{b, 0, &chunk}}});
  const HostTensor paged = std::move(runner->wait()[1].logits);
  CHECK(engine() == "paged");
  const auto x = lone.span<float>(), y = paged.span<float>();
  REQUIRE(x.size() == y.size());
  double dot = 0, xx = 0, yy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    dot += double{x[i]} * y[i];
    xx += double{x[i]} * x[i];
    yy += double{y[i]} * y[i];
  }
  CHECK(dot / std::sqrt(xx * yy) >= 0.9999);
  CHECK(std::max_element(x.begin(), x.end()) - x.begin() == std::max_element(y.begin(), y.end()) - y.begin());
  // Both closed: their pages come back last first, so the next sequence takes a run of them again.
  runner->close_sequence(a);
  runner->close_sequence(b);
  const HostTensor again = prefill_alone(runner->open_sequence());
  CHECK(engine() == lone_engine);
  CHECK(std::equal(x.begin(), x.end(), again.span<float>().begin()));  // the same kernels on the same values
#endif
}

TEST_CASE(
    "CUDA runner: one sequence's runner (a Session's) stores pages as the sequence grows, a sliding "
    "window's no more than its window, with the ids of a pool stored up front",
    "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  // gemma2-tiny (window 5 on every other layer) with an 8k context: the weights as they are.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zoo-test-gemma2-8k";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(fixture_dir("gemma2-tiny") / "model.safetensors", dir / "model.safetensors");
  {
    auto config = nlohmann::json::parse(std::ifstream(fixture_dir("gemma2-tiny") / "config.json"));
    config["max_position_embeddings"] = 8192;
    std::ofstream(dir / "config.json") << config.dump(2);
  }
  const auto loaded = cuda_test::load_cuda_fixture(dir, 8192);
  Model& model = *loaded->model;
  const std::int64_t vocab = model.info().vocab_size;
  const auto prompt = prompt_ids(20, vocab, 41);
  constexpr int kNew = 4100;  // past the 256 pages (4,096 tokens) a growing storage starts with
  // Greedy ids through a runner of `sequences` (one sequence runs), its stored pages at the end and its pool.
  const auto run = [&](std::int64_t sequences) {
    auto runner = model.new_runner({.kv_pages = 640, .max_sequences = sequences});
    const SequenceId id = runner->open_sequence();
    std::vector<std::int64_t> ids, next = prompt;
    for (int i = 0; i < kNew; ++i) {
      const ForwardStep step = step_of(next, OutputRequest{.sample = SampleRequest{}});
      runner->submit({{SequenceSlice{id, runner->tokens(id), &step}}});
      const auto result = runner->wait();
      REQUIRE(result.front().sampled);
      ids.push_back(result.front().sampled->id);
      next = {ids.back()};
    }
    return std::tuple(ids, runner->stats()["stored_pages"].get<std::vector<std::int64_t>>(), runner->pool());
  };
  const auto [grown, stored, pool] = run(1);
  const auto [whole, all, whole_pool] = run(2);
  CHECK(grown == whole);  // the same kernels over the same values, wherever the pages live
  REQUIRE(pool.groups.size() == 2);
  REQUIRE(stored.size() == 2);
  REQUIRE(all.size() == 2);
  for (std::size_t g = 0; g < stored.size(); ++g) {
    INFO("group " << g << " window " << pool.groups[g].window << " stored " << stored[g] << " capacity "
                  << pool.groups[g].capacity);
    CHECK(all[g] == whole_pool.groups[g].capacity);
    // 4,119 tokens held: 258 pages, stored by doubling from 256; a window of 5 holds at most 3.
    CHECK(stored[g] == (pool.groups[g].window == 0 ? 512 : 256));
  }
  std::filesystem::remove_all(dir);
#endif
}

TEST_CASE("CUDA runner: penalized picks equal the host reference on the same logits, with the sequences' "
          "tokens kept on the device through forks",
          "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto loaded = cuda_test::load_cuda_fixture(fixture_dir("qwen3-tiny-hd64"));
  Model& model = *loaded->model;
  const std::int64_t vocab = model.info().vocab_size;
  const std::vector<SampleRequest> kinds = {
      {.repetition_penalty = 1.5f},
      {.temperature = 0.8f, .top_k = 20, .frequency_penalty = 1.0f},
      {.temperature = 1.0f, .presence_penalty = 2.0f},
      {.temperature = 0.9f, .top_p = 0.8f, .repetition_penalty = 0.8f, .frequency_penalty = -0.5f,
       .presence_penalty = 0.7f},
      {},  // unpenalized in the same step
      {.frequency_penalty = 1.5f, .presence_penalty = -1.0f},
      {.temperature = 0.9f, .repetition_penalty = 1.2f, .logit_bias = kBias}};
  const std::size_t N = kinds.size();
  const zoo::test::ScopedEnv off("ZOO_RUNNER_GRAPHS", "0");
  TwinRunners twin(model, N);
  std::vector<std::vector<std::int64_t>> next, held(N);
  for (std::size_t i = 0; i < N; ++i) next.push_back(prompt_ids(9 + 3 * static_cast<std::int64_t>(i), vocab, 70 + i));
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  int moved = 0;
  for (int step = 0; step < 8; ++step) {
    if (step == 4)  // forks (the device copy of their tokens follows) replace two sequences
      for (const std::size_t i : {std::size_t{1}, std::size_t{3}}) twin.refork(i);
    std::vector<SampleRequest> asked(N);
    std::vector<OutputRequest> outputs(N);
    for (std::size_t i = 0; i < N; ++i) {
      asked[i] = kinds[(i + static_cast<std::size_t>(step)) % N];
      asked[i].u = uni(rng);
      asked[i].output_start = 9 + 3 * static_cast<std::int64_t>(i);  // the prompt's length
      outputs[i] = OutputRequest{.sample = asked[i], .top_logprobs = i % 2 ? 3 : -1};
      held[i].insert(held[i].end(), next[i].begin(), next[i].end());
    }
    const auto [got, rows] = twin.step(next, outputs);
    for (std::size_t i = 0; i < N; ++i) {
      INFO("step " << step << " sequence " << i);
      REQUIRE(got[i].sampled);
      const auto raw = rows[i].logits.span<float>().last(static_cast<std::size_t>(vocab));
      std::vector<float> row(raw.begin(), raw.end());
      const std::vector<std::int32_t> tokens(held[i].begin(), held[i].end());
      apply_penalties(row, tokens, asked[i]);
      SampledToken want = sample_logits(row, asked[i]);
      CHECK(got[i].sampled->id == want.id);
      CHECK(got[i].sampled->logit == raw[static_cast<std::size_t>(want.id)]);  // the raw logit, as the host reports
      if (i % 2) {
        fill_logprobs(raw, want, 3);
        CHECK(got[i].sampled->logprob == Approx(want.logprob).margin(1e-5));
      }
      moved += asked[i].penalized() && want.id != sample_logits(raw, asked[i]).id;
      next[i] = {want.id};
    }
  }
  CHECK(moved > 0);
#endif
}

TEST_CASE("CUDA runner: scored ids get the log-softmax and top-n of the same step's logits rows", "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto loaded = cuda_test::load_cuda_fixture(fixture_dir("qwen3-tiny-hd64"));
  Model& model = *loaded->model;
  const std::int64_t vocab = model.info().vocab_size;
  // Two runners fed the same steps: one scores, one returns every row's logits. Two sequences per
  // step (a decode beside them), the prompt in two chunks, so scored rows sit at offsets.
  auto scoring = model.new_runner({.kv_pages = 64, .max_sequences = 4});
  auto logits = model.new_runner({.kv_pages = 64, .max_sequences = 4});
  const auto prompt = prompt_ids(29, vocab, 71), other = prompt_ids(6, vocab, 72);
  const SequenceId a = scoring->open_sequence(), b = logits->open_sequence();
  const SequenceId a2 = scoring->open_sequence(), b2 = logits->open_sequence();
  const std::span<const std::int64_t> ids(prompt);
  for (const auto& [from, count] : {std::pair<std::size_t, std::size_t>{0, 17}, {17, 12}}) {
    const auto chunk = std::vector<std::int64_t>(prompt.begin() + static_cast<std::ptrdiff_t>(from),
                                                 prompt.begin() + static_cast<std::ptrdiff_t>(from + count));
    const std::size_t scored_rows = std::min(count, prompt.size() - 1 - from);
    OutputRequest scored{.logits = true, .all_positions = true, .sample = SampleRequest{}, .top_logprobs = 1};
    scored.score_ids = ids.subspan(from + 1, scored_rows);
    scored.score_top = from == 0 ? 5 : 20;
    const ForwardStep x = step_of(chunk, scored), y = step_of(chunk, {.logits = true, .all_positions = true});
    const std::vector<std::int64_t> side = from == 0 ? other : std::vector<std::int64_t>{other.back()};
    const ForwardStep x2 = step_of(side, {.sample = SampleRequest{}}), y2 = step_of(side);
    scoring->submit({{{a, static_cast<std::int64_t>(from), &x}, {a2, scoring->tokens(a2), &x2}}});
    logits->submit({{{b, static_cast<std::int64_t>(from), &y}, {b2, logits->tokens(b2), &y2}}});
    const auto got = scoring->wait(), want = logits->wait();
    INFO("chunk from " << from);
    CHECK(got[0].logits.empty());
    check_scores(got[0].scores, want[0].logits.span<float>(), vocab, scored.score_ids, scored.score_top, 1e-5);
    REQUIRE(got[0].sampled);
    const auto last = want[0].logits.span<float>().last(static_cast<std::size_t>(vocab));
    CHECK(got[0].sampled->id == sample_logits(last, {}).id);
    SampledToken chosen = sample_logits(last, {});
    fill_logprobs(last, chosen, 1);
    CHECK(got[0].sampled->logprob == Approx(chosen.logprob).margin(1e-5));
    REQUIRE(got[1].sampled);
    CHECK(got[1].sampled->id == sample_logits(want[1].logits.span<float>(), {}).id);
  }
#endif
}

TEST_CASE("runner: a KV memory fraction sizes a device's pool, and the CPU refuses it", "[cuda]") {
  {
    OpenedModel opened = open_fixture(fixture_dir("qwen3-tiny"));
    CHECK_THAT(input_error_of([&] { opened.model->new_runner({.kv_memory_fraction = 0.5}); }),
               Catch::Contains("KV memory fraction") && Catch::Contains("CPU"));
  }
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA (the CPU refusal ran)");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device (the CPU refusal ran)");
  const auto loaded = cuda_test::load_cuda_fixture(fixture_dir("qwen3-tiny-hd64"));
  Model& model = *loaded->model;
  // Too small a share for one sequence: an error naming the fraction. A share of what is in use
  // now plus the 2 GiB activation reserve plus ~2 GB: a pool of about 2 GB (other tests on the
  // device move it a little).
  CHECK_THAT(input_error_of([&] { model.new_runner({.max_context = 64, .kv_memory_fraction = 1e-6}); }),
             Catch::Contains("memory fraction of 1e-06"));
  std::size_t free = 0, total = 0;
  ZOO_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const double want = 2e9;
  const double fraction = (static_cast<double>(total - free) + 2.0 * (1 << 30) + want) / static_cast<double>(total);
  auto runner = model.new_runner({.max_context = 64, .kv_memory_fraction = fraction});
  const KvPoolStats pool = runner->pool();
  const double bytes = static_cast<double>(pool.groups.front().capacity * pool.page_bytes);
  INFO("fraction " << fraction << ", pool " << bytes / 1e9 << " GB");
  CHECK(bytes > 0.5 * want);
  CHECK(bytes < 2.0 * want);
#endif
}

TEST_CASE("CUDA runner: a forked sequence and a pool too small preempt and copy correctly", "[cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto loaded = cuda_test::load_cuda_fixture(fixture_dir("qwen3-tiny-hd64"));
  Model& model = *loaded->model;
  // Copy-on-write of a shared page: each fork's next logits equal its history run alone.
  auto runner = model.new_runner({.kv_pages = 64, .max_sequences = 4});
  const auto prompt = prompt_ids(20, 200, 11);
  const SequenceId a = runner->open_sequence();
  const ForwardStep pa = step_of(prompt);
  runner->submit({{{a, 0, &pa}}});
  runner->wait();
  const SequenceId b = runner->fork_sequence(a);
  const std::vector<std::int64_t> ta{3}, tb{4};
  const ForwardStep sa = step_of(ta), sb = step_of(tb);
  runner->submit({{{a, 20, &sa}, {b, 20, &sb}}});
  const auto results = runner->wait();
  CHECK(runner->pool().groups.front().used == 3);
  for (const auto& [next, result] : {std::pair{&ta, &results[0]}, {&tb, &results[1]}}) {
    auto session = model.new_session();
    session->forward(pa);
    const ForwardResult alone = session->forward(step_of(*next));
    const auto x = result->logits.span<float>(), y = alone.logits.span<float>();
    REQUIRE(x.size() == y.size());
    float worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
    CHECK(worst < 0.05f);  // bf16: the same math, other kernels (paged vs contiguous, batch of 2 vs 1)
  }
  // Preemption under a small pool, greedy ids as alone.
  std::vector<engine::GenerationRequest> requests;
  std::vector<AloneRun> alone;
  for (int i = 0; i < 6; ++i) {
    auto p = prompt_ids(20 + i, model.info().vocab_size, 200 + i);
    alone.push_back(greedy_alone(model, p, 30));
    requests.push_back(greedy_request(std::move(p), 30));
  }
  auto small = model.new_runner({.kv_pages = 10, .max_sequences = 6});
  engine::EngineStats stats;
  const auto done = run_engine(*small, std::move(requests), {.max_running = 6, .max_batched_tokens = 64}, &stats);
  CHECK(stats.preemptions > 0);
  for (std::size_t i = 0; i < done.size(); ++i)
    check_same_ids(alone[i], done[i].ids, fmt::format("sequence {}", i), kCudaTieMargin);
#endif
}

}  // namespace
}  // namespace zoo::ptest
