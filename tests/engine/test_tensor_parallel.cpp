// Tensor parallelism on the CPU (model.tensor_parallel: ranks as threads over an in-process
// communicator) against one rank, on fixtures of five families whose heads, intermediate size and
// vocabulary divide: every tap of a prompt equal within float32 rounding (the sharded values
// gathered), greedy generation equal to transformers' golden ids, and the engine's batches equal
// to each sequence run alone on one rank under the batch rule. What cannot be split is refused by
// name, and a bad batch leaves the group usable. On CUDA ([cuda]) the same against one rank in bf16.
#include <set>

#include "engine/batch_test_util.hpp"
#include "test_skip.hpp"
#if defined(ZOO_WITH_CUDA)
#include "cuda/cuda_model_util.hpp"
#include "zoo/kernels/cuda/common.hpp"
#endif
#include "qwen3/decoder_golden_checks.hpp"
#include "zoo/error.hpp"
#include "zoo/request.hpp"
#include "zoo/tensor_parallel.hpp"
#include "zoo/trace.hpp"

namespace zoo::ptest {
namespace {

struct Split {
  const char* fixture;
  std::vector<int> ranks;
};

// qwen3 (per-head q/k norm, tied head), llama (untied head), qwen2 (q/k/v biases; 4 ranks
// replicate its 2 kv heads), gemma2 (sandwich norms, soft-caps, a sliding window; 1 kv head
// replicated), gemma3 (local and global RoPE), olmo2 (q/k norm over the whole projection, summed
// over the ranks), phi3 (fused qkv and gate_up sliced, then sharded), mistral's sliding window.
const Split kSplits[] = {{"qwen3-tiny", {2, 4}}, {"llama-tiny", {2, 4}},  {"qwen2-tiny", {2, 4}},
                         {"gemma2-tiny", {2}},   {"gemma3-tiny", {2}},    {"olmo2-tiny", {2}},
                         {"phi3-tiny", {2}},     {"mistral-sw-tiny", {2}}};

// Every tap of the fixture's prompt.
std::map<std::string, HostTensor> trace_prompt(Model& model, const Prompt& prompt) {
  TraceRecorder recorder(PointSelection({"*"}));
  model.new_session()->forward(prompt.step(), &recorder);
  std::map<std::string, HostTensor> taps;
  for (const auto& [name, tensor] : recorder.tensors())
    taps.emplace(name, HostTensor::copy_of(tensor.view()));
  return taps;
}

}  // namespace

TEST_CASE("tensor parallel on the CPU: every tap equals one rank's, and greedy ids equal transformers'",
          "[tensor_parallel]") {
  for (const auto& [name, rank_counts] : kSplits) {
    const fs::path dir = fixture_dir(name);
    OpenedModel one = open_fixture(dir);
    const Prompt prompt = one.model->prepare(load_request(dir / "request.json"));
    const auto reference = trace_prompt(*one.model, prompt);
    for (const int ranks : rank_counts) {
      INFO(name << " over " << ranks << " ranks");
      OpenedModel split = open_fixture(dir, true, ranks);
      REQUIRE(split.model->need_extension<TensorParallel>().ranks() == ranks);
      const auto taps = trace_prompt(*split.model, prompt);
      std::set<std::string> names, reference_names;
      for (const auto& [tap, tensor] : taps) names.insert(tap);
      for (const auto& [tap, tensor] : reference) reference_names.insert(tap);
      CHECK(names == reference_names);
      double worst = 0;
      std::string worst_tap;
      for (const auto& [tap, tensor] : reference) {
        INFO("tap " << tap);
        const auto it = taps.find(tap);
        if (it == taps.end()) continue;
        REQUIRE(it->second.shape() == tensor.shape());
        const double relative = max_abs_diff(it->second, tensor) / std::max(1.0, max_abs(tensor));
        if (relative > worst) worst = relative, worst_tap = tap;
      }
      INFO("worst tap " << worst_tap << ": max |diff| / max(1, max |one rank|) = " << worst);
      CHECK(worst <= 1e-5);
      CHECK(worst > 0);  // the sums really were split: not one rank's run under another name
      check_generation_matches_golden(*split.model, prompt, dir);
    }
  }
}

TEST_CASE("tensor parallel on the CPU: the engine's batches equal each sequence alone on one rank",
          "[tensor_parallel]") {
  const std::int64_t lengths[] = {15, 16, 17, 33, 1, 5};
  for (const char* name : {"qwen3-tiny", "gemma2-tiny", "olmo2-tiny"}) {
    INFO("fixture " << name);
    OpenedModel one = open_fixture(fixture_dir(name));
    OpenedModel split = open_fixture(fixture_dir(name), true, 2);
    const std::int64_t vocab = one.model->info().vocab_size;
    std::vector<engine::GenerationRequest> requests;
    std::vector<AloneRun> alone;
    for (std::size_t i = 0; i < std::size(lengths); ++i) {
      const int new_tokens = 4 + static_cast<int>(i % 3) * 4;
      auto prompt = prompt_ids(lengths[i], vocab, i);
      alone.push_back(greedy_alone(*one.model, prompt, new_tokens));
      requests.push_back(greedy_request(std::move(prompt), new_tokens));
    }
    auto runner = split.model->new_runner({});
    CHECK(runner->stats()["tensor_parallel"] == 2);
    engine::EngineStats stats;
    const auto done =
        run_engine(*runner, std::move(requests), {.max_running = 3, .max_batched_tokens = 20}, &stats);
    for (std::size_t i = 0; i < done.size(); ++i)
      check_same_ids(alone[i], done[i].ids,
                     fmt::format("{} sequence {} ({} prompt tokens), 2 ranks", name, i, lengths[i]));
    CHECK(stats.peak_running == 3);
    for (const auto& group : runner->pool().groups) CHECK(group.used == 0);
  }
}

TEST_CASE("tensor parallel on the CPU: each rank reads its share of the weights, not a copy of them",
          "[tensor_parallel]") {
  // What a decode step reads per rank (runtime_stats): the split weights once over the ranks, and
  // only the norms whole on each (the embedding table too, of which a step reads one row).
  for (const char* name : {"qwen3-tiny", "llama-tiny"}) {
    OpenedModel one = open_fixture(fixture_dir(name));
    const auto whole = one.model->runtime_stats()["decode_weight_bytes"].get<std::size_t>();
    const auto& info = one.model->info();
    // A bound on the norm weights, float32: two per layer of hidden_size, q/k norms of one head
    // each (head_dim <= hidden_size), the final norm.
    const std::size_t norms =
        static_cast<std::size_t>(info.num_layers * 4 * info.hidden_size + info.hidden_size) * sizeof(float);
    for (const int ranks : {2, 4}) {
      INFO(name << " over " << ranks << " ranks; one rank reads " << whole << " bytes");
      OpenedModel split = open_fixture(fixture_dir(name), true, ranks);
      const auto stats = split.model->runtime_stats();
      REQUIRE(stats["rank_decode_weight_bytes"].size() == static_cast<std::size_t>(ranks));
      std::size_t sum = 0;
      for (const auto& rank : stats["rank_decode_weight_bytes"]) {
        const auto bytes = rank.get<std::size_t>();
        // Both fixtures have 2 kv heads: over 4 ranks k and v are replicated in pairs, so a rank
        // reads more than a quarter, but less than half.
        if (ranks == 2)
          CHECK(bytes <= whole / 2 + norms);
        else
          CHECK(bytes < whole / 2);
        sum += bytes;
      }
      CHECK(sum >= whole);  // nothing left out
      CHECK(stats["decode_weight_bytes"].get<std::size_t>() == sum);
    }
  }
}

TEST_CASE("tensor parallel on the CPU: a bad batch leaves the group usable", "[tensor_parallel]") {
  OpenedModel split = open_fixture(fixture_dir("qwen3-tiny"), true, 2);
  auto runner = split.model->new_runner({});
  const SequenceId sequence = runner->open_sequence();
  const std::vector<std::int64_t> bad = {1, 2, 384};  // 384: past the vocabulary
  const ForwardStep bad_step{bad, {}, {}, OutputRequest{}};
  CHECK_THROWS_AS(runner->submit(ForwardBatch{{SequenceSlice{sequence, 0, &bad_step}}}), InputError);
  CHECK(runner->tokens(sequence) == 0);
  const std::vector<std::int64_t> good = {1, 2, 3};
  const ForwardStep good_step{good, {}, {}, OutputRequest{}};
  runner->submit(ForwardBatch{{SequenceSlice{sequence, 0, &good_step}}});
  const auto results = runner->wait();
  REQUIRE(results.size() == 1);
  CHECK(results[0].logits.shape() == Shape{1, 384});
  CHECK(runner->tokens(sequence) == 3);
}

TEST_CASE("tensor parallel: what does not split is refused by name", "[tensor_parallel]") {
  const auto refused = [](const char* name, int ranks, const char* words) {
    INFO(name << " over " << ranks);
    CHECK_THROWS_WITH(open_fixture(fixture_dir(name), false, ranks), Catch::Contains(words));
  };
  refused("gemma-tiny", 4, "its 2 attention heads do not split over 4 ranks");
  refused("qwen3-tiny", 3, "its 4 attention heads do not split over 3 ranks");
  refused("qwen3-moe-tiny", 2, "mixture-of-experts layers are not split yet");
  // A plugin whose model does not offer the split is refused by the host, not run on one rank.
  refused("higgs-tiny", 2, "(plugin higgs_audio) does not split over ranks");
}

// ---- CUDA: ranks as threads on the devices there are (on one device here), bf16 ----
// Each rank's partial sums are rounded to bf16 before the reduce adds them (one rank rounds the
// whole sum once), so the rule is the batch tests' bf16 one: ids equal, or a first difference at
// an alone margin below kCudaTieMargin (batch_test_util.hpp).

TEST_CASE(
    "tensor parallel on CUDA: ranks give one rank's taps, logits and greedy ids (bf16 rule), alone and "
    "in the engine's batches, a q/k norm over the whole projection included",
    "[tensor_parallel][cuda]") {
#if !defined(ZOO_WITH_CUDA)
  ZOO_SKIP("built without CUDA");
#else
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  // qwen3 (per-head q/k norm), llama (untied head), gemma2 (sandwich norms, soft-caps, a window;
  // its kv head replicated), qwen2 (biases: one rank adds the row-parallel ones; 4 ranks replicate
  // its kv heads), olmo2 (a q/k norm over the whole projection: its sums of squares gathered from
  // the ranks on the device).
  const Split cuda_splits[] = {{"qwen3-tiny-hd64", {2}},
                               {"llama-tiny-hd128", {2}},
                               {"gemma2-tiny", {2}},
                               {"qwen2-tiny", {2, 4}},
                               {"olmo2-tiny", {2}}};
  for (const auto& [name, rank_counts] : cuda_splits) {
    const fs::path dir = fixture_dir(name);
    const auto one = cuda_test::load_cuda_fixture(dir);
    const Prompt prompt = one->model->prepare(load_request(dir / "request.json"));
    const auto reference = trace_prompt(*one->model, prompt);
    const std::int64_t vocab = one->model->info().vocab_size;
    for (const int ranks : rank_counts) {
      INFO(name << " over " << ranks << " ranks");
      const auto split = cuda_test::load_cuda_fixture(dir, 1024, ranks);
      REQUIRE(split->model->need_extension<TensorParallel>().ranks() == ranks);
      // Every tap of the prompt, gathered whole: the same names and shapes, the same values to bf16.
      const auto taps = trace_prompt(*split->model, prompt);
      REQUIRE(taps.size() == reference.size());
      for (const auto& [tap, tensor] : reference) {
        INFO("tap " << tap);
        const auto it = taps.find(tap);
        REQUIRE(it != taps.end());
        REQUIRE(it->second.shape() == tensor.shape());
        CHECK(max_abs_diff(it->second, tensor) <= 0.05 * std::max(1.0, max_abs(tensor)));
      }
      // Greedy ids alone, and through the engine's batches over the group.
      const AloneRun reference_ids = greedy_alone(*one->model, prompt.ids, 12);
      check_same_ids(reference_ids, greedy_alone(*split->model, prompt.ids, 12).ids,
                     fmt::format("{}: a session of {} ranks", name, ranks), kCudaTieMargin);
      std::vector<engine::GenerationRequest> requests;
      std::vector<AloneRun> alone;
      for (std::size_t i = 0; i < 4; ++i) {
        auto ids = prompt_ids(5 + 7 * static_cast<std::int64_t>(i), vocab, 80 + i);
        alone.push_back(greedy_alone(*one->model, ids, 6));
        requests.push_back(greedy_request(std::move(ids), 6));
      }
      auto runner = split->model->new_runner({.kv_pages = 64, .max_sequences = 4});
      CHECK(runner->stats()["tensor_parallel"] == ranks);
      const auto done =
          run_engine(*runner, std::move(requests), {.max_running = 3, .max_batched_tokens = 24});
      for (std::size_t i = 0; i < done.size(); ++i)
        check_same_ids(alone[i], done[i].ids, fmt::format("{} sequence {}, {} ranks", name, i, ranks),
                       kCudaTieMargin);
    }
  }
#endif
}

}  // namespace zoo::ptest
