// The CUDA batch runner with row tables (zoo/row_tables.hpp): summed table rows at slice positions,
// the head table over the slices' output rows, its picks per slice (each with its own request and
// uniforms) and embedding overrides, against each sequence run alone through a CUDA session of the
// same model; and the decode step of such sequences (one table row each, picks from the head table)
// replayed as a CUDA graph against the same step run eagerly.
//
// The batched path and a session differ in GEMM shapes (cuBLASLt at m = the step's rows against a
// GEMV at m = 1) and attention kernels, so their head outputs agree to bf16 noise, not bitwise:
// picks are compared exactly against the rule applied to the same runner's head output (a twin
// runner fed the same steps, the same kernels), and against the session's picks up to decisions
// that noise can flip (a near tie, a uniform next to a CDF boundary), which are counted.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "cuda/cuda_model_util.hpp"
#include "scoped_env.hpp"
#include "test_skip.hpp"
#include "zoo/kernels/cuda/common.hpp"
#include "zoo/row_tables.hpp"

namespace zoo {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSegments = 4, kWidth = 64;  // the table: K = 4 segments of V = 64 rows

// A fixture model with random row tables added before load(): "rows" [K * V, hidden], and "wide"
// [kWideRows, hidden], wider than the device picks a segment of.
constexpr std::int64_t kWideRows = 4096;
struct TableModel {
  PluginRegistry registry;
  std::shared_ptr<Model> model;
  std::vector<float> rows, wide_rows;
  int table = -1, wide = -1;
  std::int64_t hidden = 0, vocab = 0;
};

std::unique_ptr<TableModel> load_with_table(const char* fixture) {
  auto m = std::make_unique<TableModel>();
  const fs::path dir = fs::path(ZOO_SOURCE_DIR) / "tests" / "fixtures" / fixture;
  m->registry.discover({fs::path(ZOO_BINARY_DIR) / "lib" / "zoo" / "plugins"});
  const ModelArgs args = cuda_test::cuda_bf16_args(dir);
  const auto& plugin = m->registry.resolve_config(args.config, (dir / "config.json").string());
  m->model = m->registry.create_model(plugin.name, args);
  m->hidden = m->model->info().hidden_size;
  m->vocab = m->model->info().vocab_size;
  std::mt19937 rng(4242);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  m->rows.resize(static_cast<std::size_t>(kSegments * kWidth * m->hidden));
  for (float& x : m->rows) x = dist(rng);
  m->wide_rows.resize(static_cast<std::size_t>(kWideRows * m->hidden));
  for (float& x : m->wide_rows) x = dist(rng);
  auto& tables = m->model->need_extension<RowTables>();
  m->table = tables.add_row_table("rows", TensorView{m->rows.data(), DType::F32, {kSegments * kWidth, m->hidden}, Device{}});
  m->wide = tables.add_row_table("wide", TensorView{m->wide_rows.data(), DType::F32, {kWideRows, m->hidden}, Device{}});
  m->model->load();
  return m;
}

// The rule SegmentSampleRule::threshold_top_k_index_cdf (zoo/model.hpp) on one segment, and how
// far its decision is from flipping: greedy, the gap to the runner-up value; else the distance of
// u from the nearest boundary of the picked id's CDF interval.
struct RefPick {
  std::int64_t id = -1;
  double margin = 0;
};
RefPick reference_pick(std::span<const float> x, float temperature, int top_k, float top_p, double u) {
  const auto width = static_cast<int>(x.size());
  int best = 0;
  for (int i = 1; i < width; ++i)
    if (x[static_cast<std::size_t>(i)] > x[static_cast<std::size_t>(best)]) best = i;
  if (temperature == 0.0f) {
    double second = -INFINITY;
    for (int i = 0; i < width; ++i)
      if (i != best) second = std::max(second, static_cast<double>(x[static_cast<std::size_t>(i)]));
    return {best, static_cast<double>(x[static_cast<std::size_t>(best)]) - second};
  }
  const int k = top_k <= 0 || top_k >= width ? width : top_k;
  std::vector<float> sorted(x.begin(), x.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const float kth = sorted[static_cast<std::size_t>(k - 1)];
  // Survivors ranked by value descending, ties to the lower index.
  std::vector<int> order;
  for (int i = 0; i < width; ++i)
    if (x[static_cast<std::size_t>(i)] >= kth && !std::isinf(x[static_cast<std::size_t>(i)])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return x[static_cast<std::size_t>(a)] > x[static_cast<std::size_t>(b)]; });
  const double t = temperature, top = static_cast<double>(x[static_cast<std::size_t>(best)]) / t;
  std::vector<double> mass(static_cast<std::size_t>(width), 0.0);
  std::vector<int> rank(static_cast<std::size_t>(width), -1);
  for (std::size_t r = 0; r < order.size(); ++r) {
    rank[static_cast<std::size_t>(order[r])] = static_cast<int>(r);
    mass[r] = std::exp(static_cast<double>(x[static_cast<std::size_t>(order[r])]) / t - top);
  }
  double sum = 0;
  for (int i = 0; i < width; ++i)
    if (rank[static_cast<std::size_t>(i)] >= 0) sum += mass[static_cast<std::size_t>(rank[static_cast<std::size_t>(i)])];
  auto kept = static_cast<int>(order.size());
  if (top_p < 1.0f) {
    double cum = 0;
    int r = 0;
    while (r < kept && (r == 0 || cum / sum <= top_p)) cum += mass[static_cast<std::size_t>(r++)];
    kept = r;
    sum = cum;
  }
  double cum = 0;
  int last = best;
  for (int i = 0; i < width; ++i) {
    const int r = rank[static_cast<std::size_t>(i)];
    if (r < 0 || r >= kept) continue;
    const double p = mass[static_cast<std::size_t>(r)] / sum;
    if (p <= 0) continue;
    last = i;
    if (u < cum + p) return {i, std::min(u - cum, cum + p - u)};
    cum += p;
  }
  return {last, 0.0};
}

// What one sequence asks of a step.
struct SeqStep {
  std::vector<std::int64_t> ids, table_positions, table_ids, override_positions;
  std::vector<float> override_rows;
  bool all_positions = false;
  bool pick = false;  // head_sample: the picks instead of the head output
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  std::vector<double> u;
};

// The ForwardStep of `s` (its spans point into `s`, `with_pick` chooses whether picks are asked).
ForwardStep forward_step(const SeqStep& s, int table, bool with_pick) {
  ForwardStep step{s.ids, s.override_positions, s.override_rows,
                   OutputRequest{.logits = false, .all_positions = s.all_positions, .head_table = table},
                   TableRows{s.table_positions.empty() ? -1 : table, s.table_positions, s.table_ids, kSegments}};
  if (with_pick && s.pick)
    step.outputs.head_sample = HeadSampleRequest{.segments = kSegments, .temperature = s.temperature,
                                                 .top_k = s.top_k, .top_p = s.top_p, .u = s.u};
  return step;
}

// `n` tokens with `table` positions among them (each fed K random ids, one per segment: id c * V + code).
SeqStep make_step(std::mt19937& rng, std::int64_t vocab, std::int64_t n, const std::vector<std::int64_t>& table_positions) {
  SeqStep s;
  std::uniform_int_distribution<std::int64_t> token(0, vocab - 1), code(0, kWidth - 1);
  for (std::int64_t t = 0; t < n; ++t) s.ids.push_back(token(rng));
  s.table_positions = table_positions;
  for (std::size_t i = 0; i < table_positions.size(); ++i) {
    s.ids[static_cast<std::size_t>(table_positions[i])] = 0;  // replaced by the table rows
    for (std::int64_t c = 0; c < kSegments; ++c) s.table_ids.push_back(c * kWidth + code(rng));
  }
  return s;
}

void ask_pick(SeqStep& s, std::mt19937& rng, float temperature, int top_k, float top_p) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  s.pick = true;
  s.temperature = temperature;
  s.top_k = top_k;
  s.top_p = top_p;
  s.u.clear();
  for (std::int64_t c = 0; c < kSegments; ++c) s.u.push_back(unit(rng));
}

const HostTensor& head_of(const ForwardResult& r) {
  const HostTensor* head = r.find_extra("rows");
  REQUIRE(head != nullptr);
  return *head;
}

struct Agreement {
  double worst_cosine = 1.0, worst_rel = 0.0;
  int picks = 0, equal = 0, fragile = 0;
};

// Head outputs of the runner against the session's: cosine and max abs difference over the scale.
void compare_heads(const HostTensor& got, const HostTensor& want, Agreement& a) {
  REQUIRE(got.shape() == want.shape());
  double dot = 0, gg = 0, ww = 0, max_diff = 0, scale = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.as<float>()[i], w = want.as<float>()[i];
    dot += g * w;
    gg += g * g;
    ww += w * w;
    max_diff = std::max(max_diff, std::abs(g - w));
    scale = std::max(scale, std::abs(w));
  }
  const double cosine = dot / std::sqrt(gg * ww);
  CHECK(cosine >= 0.9999);
  CHECK(max_diff <= 0.02 * scale);
  a.worst_cosine = std::min(a.worst_cosine, cosine);
  a.worst_rel = std::max(a.worst_rel, max_diff / scale);
}

// Picks `got` of the last row of `head` (the same kernels' output, so exactly the rule's picks),
// and against `other` (another path's picks, whose head output is `other_head`): equal, or a
// decision within noise of flipping.
void compare_picks(const SeqStep& s, const std::vector<SampledToken>& got, const HostTensor& head,
                   const std::vector<SampledToken>& other, const HostTensor& other_head, Agreement& a) {
  REQUIRE(got.size() == static_cast<std::size_t>(kSegments));
  REQUIRE(other.size() == static_cast<std::size_t>(kSegments));
  const std::int64_t rows = head.shape()[0], last = (rows - 1) * kSegments * kWidth;
  for (std::int64_t c = 0; c < kSegments; ++c) {
    const double u = s.u.empty() ? 0.0 : s.u[static_cast<std::size_t>(c)];
    const std::span<const float> mine(head.as<float>() + last + c * kWidth, static_cast<std::size_t>(kWidth));
    const RefPick ref = reference_pick(mine, s.temperature, s.top_k, s.top_p, u);
    INFO("segment " << c << " temperature " << s.temperature << " u " << u);
    CHECK(got[static_cast<std::size_t>(c)].id == ref.id);
    CHECK(got[static_cast<std::size_t>(c)].logit == mine[static_cast<std::size_t>(ref.id)]);
    CHECK(got[static_cast<std::size_t>(c)].bad_index == -1);
    CHECK_FALSE(got[static_cast<std::size_t>(c)].all_masked);
    ++a.picks;
    if (got[static_cast<std::size_t>(c)].id == other[static_cast<std::size_t>(c)].id) {
      ++a.equal;
      continue;
    }
    const std::int64_t other_rows = other_head.shape()[0];
    const std::span<const float> theirs(other_head.as<float>() + (other_rows - 1) * kSegments * kWidth + c * kWidth,
                                        static_cast<std::size_t>(kWidth));
    const RefPick their_ref = reference_pick(theirs, s.temperature, s.top_k, s.top_p, u);
    INFO("ids " << got[static_cast<std::size_t>(c)].id << " and " << other[static_cast<std::size_t>(c)].id
                << ", margins " << ref.margin << " and " << their_ref.margin);
    // Greedy: a near tie of the two values; sampled: u next to a boundary.
    CHECK(std::min(ref.margin, their_ref.margin) < (s.temperature == 0.0f ? 0.05 : 0.01));
    ++a.fragile;
  }
}

// Max abs difference and cosine of two float tensors of one shape.
std::pair<double, double> difference(const HostTensor& got, const HostTensor& want) {
  REQUIRE(got.shape() == want.shape());
  double dot = 0, gg = 0, ww = 0, worst = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.as<float>()[i], w = want.as<float>()[i];
    dot += g * w;
    gg += g * g;
    ww += w * w;
    worst = std::max(worst, std::abs(g - w));
  }
  return {worst, dot / std::sqrt(gg * ww)};
}

}  // namespace

TEST_CASE("CUDA runner: row tables, a head table and its per-slice picks, and overrides equal each sequence alone "
          "in a session",
          "[cuda][runner][row_table]") {
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto m = load_with_table("qwen3-tiny-hd64");
  Model& model = *m->model;
  // Eager steps on both runners (graphs replay at the bucket's m; the graph case is below): the
  // twin runners run the same kernels, so `picker`'s picks are exactly the rule's on `plain`'s
  // head output.
  const test::ScopedEnv eager("ZOO_RUNNER_GRAPHS", "0");
  auto picker = model.new_runner({.kv_pages = 64, .max_sequences = 8});
  auto plain = model.new_runner({.kv_pages = 64, .max_sequences = 8});
  constexpr std::size_t kSeqs = 4;
  std::vector<SequenceId> a, b;
  std::vector<std::unique_ptr<Session>> alone_pick, alone_plain;
  for (std::size_t i = 0; i < kSeqs; ++i) {
    a.push_back(picker->open_sequence());
    b.push_back(plain->open_sequence());
    alone_pick.push_back(model.new_session());
    alone_plain.push_back(model.new_session());
  }
  std::mt19937 rng(77);
  Agreement agree;
  int steps_with_overrides = 0;
  for (int step = 0; step < 6; ++step) {
    INFO("step " << step);
    // Sequence 0: prefill chunks of table positions mixed with tokens (every row's head output on
    // step 0, then picks from the last row); 1..3: a prompt, then one-token decodes whose one
    // position is a table row, asking greedy picks, sampled picks (top-k; top-p) or the head output.
    std::vector<SeqStep> s(kSeqs);
    if (step == 0) {
      s[0] = make_step(rng, m->vocab, 12, {3, 4, 7, 11});
      s[0].all_positions = true;
      s[1] = make_step(rng, m->vocab, 5, {});
      s[2] = make_step(rng, m->vocab, 9, {8});
      s[3] = make_step(rng, m->vocab, 3, {});
      // Overrides at two positions of sequence 3 (float32 host rows), one of sequence 2's prompt
      // at a table position: the table row wins, as on the CPU.
      std::normal_distribution<float> normal(0.0f, 0.3f);
      s[3].override_positions = {0, 2};
      s[2].override_positions = {8};
      for (std::size_t i : {std::size_t{2}, std::size_t{3}}) {
        s[i].override_rows.resize(s[i].override_positions.size() * static_cast<std::size_t>(m->hidden));
        for (float& x : s[i].override_rows) x = normal(rng);
      }
      ++steps_with_overrides;
    } else {
      s[0] = make_step(rng, m->vocab, 6, step % 2 ? std::vector<std::int64_t>{0, 2, 5} : std::vector<std::int64_t>{1, 5});
      ask_pick(s[0], rng, 0.8f, 20, 0.9f);
      for (std::size_t i = 1; i < kSeqs; ++i) s[i] = make_step(rng, m->vocab, 1, {0});
      ask_pick(s[1], rng, 0.0f, 0, 1.0f);
      ask_pick(s[2], rng, 0.8f, 20, 1.0f);
      if (step % 2 == 0) ask_pick(s[3], rng, 1.1f, 0, 0.7f);  // else its head output comes back
    }
    std::vector<ForwardStep> with(kSeqs), without(kSeqs);
    ForwardBatch x, y;
    for (std::size_t i = 0; i < kSeqs; ++i) {
      with[i] = forward_step(s[i], m->table, true);
      without[i] = forward_step(s[i], m->table, false);
      x.slices.push_back({a[i], picker->tokens(a[i]), &with[i]});
      y.slices.push_back({b[i], plain->tokens(b[i]), &without[i]});
    }
    picker->submit(x);
    const auto got = picker->wait();
    plain->submit(y);
    const auto heads = plain->wait();
    REQUIRE(got.size() == kSeqs);
    for (std::size_t i = 0; i < kSeqs; ++i) {
      INFO("sequence " << i);
      const ForwardResult alone = alone_plain[i]->forward(without[i]);
      const ForwardResult alone_picked = alone_pick[i]->forward(with[i]);
      const HostTensor& head = head_of(heads[i]);
      CHECK(head.shape() == Shape{s[i].all_positions ? static_cast<std::int64_t>(s[i].ids.size()) : 1,
                                  kSegments * kWidth});
      compare_heads(head, head_of(alone), agree);
      CHECK(got[i].logits.empty());
      if (!s[i].pick) {
        CHECK(got[i].head_sampled.empty());
        compare_heads(head_of(got[i]), head, agree);  // the same kernels
        continue;
      }
      CHECK(got[i].find_extra("rows") == nullptr);  // picks instead of the head output
      REQUIRE(alone_picked.head_sampled.size() == static_cast<std::size_t>(kSegments));
      compare_picks(s[i], got[i].head_sampled, head, alone_picked.head_sampled, head_of(alone), agree);
    }
  }
  WARN(fmt::format("runner vs session: worst head cosine {:.7f}, worst max|diff|/scale {:.5f}; picks {} of {} equal, "
                   "{} near-boundary flips",
                   agree.worst_cosine, agree.worst_rel, agree.equal, agree.picks, agree.fragile));
  CHECK(agree.picks >= 40);
  CHECK(agree.fragile <= agree.picks / 10);
  CHECK(steps_with_overrides == 1);
}

TEST_CASE("CUDA runner: the table-row decode step (one table row each, picks from the head table) replays as a graph "
          "that equals the eager step",
          "[cuda][runner][row_table]") {
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto m = load_with_table("qwen3-tiny-hd64");
  Model& model = *m->model;
  std::unique_ptr<Runner> eager, plain;
  {
    const test::ScopedEnv off("ZOO_RUNNER_GRAPHS", "0");
    eager = model.new_runner({.kv_pages = 128, .max_sequences = 16});
    plain = model.new_runner({.kv_pages = 128, .max_sequences = 16});  // the eager head outputs
  }
  auto graphs = model.new_runner({.kv_pages = 128, .max_sequences = 16});
  // 11 sequences (bucket 16: five padding rows), then 5 (bucket 8), then 2.
  constexpr std::size_t kSeqs = 11;
  std::vector<SequenceId> e, p, g;
  std::mt19937 rng(99);
  {
    std::vector<SeqStep> prompts;
    for (std::size_t i = 0; i < kSeqs; ++i) prompts.push_back(make_step(rng, m->vocab, 3 + static_cast<std::int64_t>(i), {}));
    std::vector<ForwardStep> steps;
    for (const auto& s : prompts) steps.push_back(forward_step(s, m->table, false));
    ForwardBatch xe, xp, xg;
    for (std::size_t i = 0; i < kSeqs; ++i) {
      e.push_back(eager->open_sequence());
      p.push_back(plain->open_sequence());
      g.push_back(graphs->open_sequence());
      xe.slices.push_back({e[i], 0, &steps[i]});
      xp.slices.push_back({p[i], 0, &steps[i]});
      xg.slices.push_back({g[i], 0, &steps[i]});
    }
    for (const auto& [runner, batch] : {std::pair{eager.get(), &xe}, {plain.get(), &xp}, {graphs.get(), &xg}}) {
      runner->submit(*batch);
      runner->wait();
    }
  }
  Agreement agree;
  for (int step = 0; step < 12; ++step) {
    const std::size_t live = step < 6 ? kSeqs : step < 10 ? 5 : 2;
    INFO("step " << step << ", " << live << " sequences");
    std::vector<SeqStep> s(live);
    for (std::size_t i = 0; i < live; ++i) {
      s[i] = make_step(rng, m->vocab, 1, {0});
      // Each slice its own request: greedy, top-k, top-p, both; the uniforms change every step.
      switch (i % 4) {
        case 0: ask_pick(s[i], rng, 0.0f, 0, 1.0f); break;
        case 1: ask_pick(s[i], rng, 0.8f, 20, 1.0f); break;
        case 2: ask_pick(s[i], rng, 1.0f, 0, 0.8f); break;
        default: ask_pick(s[i], rng, 0.7f, 10, 0.9f); break;
      }
    }
    std::vector<ForwardStep> with(live), without(live);
    ForwardBatch xe, xp, xg;
    for (std::size_t i = 0; i < live; ++i) {
      with[i] = forward_step(s[i], m->table, true);
      without[i] = forward_step(s[i], m->table, false);
      xe.slices.push_back({e[i], eager->tokens(e[i]), &with[i]});
      xp.slices.push_back({p[i], plain->tokens(p[i]), &without[i]});
      xg.slices.push_back({g[i], graphs->tokens(g[i]), &with[i]});
    }
    eager->submit(xe);
    const auto by_eager = eager->wait();
    plain->submit(xp);
    const auto heads = plain->wait();
    graphs->submit(xg);
    const auto by_graph = graphs->wait();
    // A graph step runs the bucket's rows (padding included); an eager one the real rows.
    CHECK(eager->stats()["rows"] == static_cast<std::int64_t>(live));
    CHECK(graphs->stats()["rows"] == (live == kSeqs ? 16 : live == 5 ? 8 : 2));
    for (std::size_t i = 0; i < live; ++i) {
      INFO("sequence " << i);
      REQUIRE(by_graph[i].head_sampled.size() == static_cast<std::size_t>(kSegments));
      CHECK(by_graph[i].extra.empty());
      const HostTensor& head = head_of(heads[i]);
      // Eager picks are exactly the rule's on the same kernels' head output; the graph's equal them
      // (or, where its GEMM at the bucket's m rounds differently, flip only at a boundary).
      compare_picks(s[i], by_eager[i].head_sampled, head, by_graph[i].head_sampled, head, agree);
    }
  }
  WARN(fmt::format("graph vs eager: picks {} of {} equal, {} near-boundary flips", agree.equal, agree.picks,
                   agree.fragile));
  CHECK(agree.fragile <= agree.picks / 20);
}

TEST_CASE("CUDA runner: slices summing rows of different tables, a head the device cannot pick (its output comes "
          "back) and text slices beside them equal each sequence alone",
          "[cuda][runner][row_table]") {
  if (!kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device");
  const auto m = load_with_table("qwen3-tiny-hd64");
  Model& model = *m->model;
  auto runner = model.new_runner({.kv_pages = 32, .max_sequences = 4});
  std::vector<std::unique_ptr<Session>> alone;
  std::vector<SequenceId> seq;
  for (int i = 0; i < 3; ++i) {
    seq.push_back(runner->open_sequence());
    alone.push_back(model.new_session());
  }
  // Runs the batch and each step alone; checks the text logits and the head outputs agree.
  const auto run = [&](const std::vector<ForwardStep>& steps) {
    ForwardBatch batch;
    for (std::size_t i = 0; i < steps.size(); ++i) batch.slices.push_back({seq[i], runner->tokens(seq[i]), &steps[i]});
    runner->submit(batch);
    auto results = runner->wait();
    std::vector<ForwardResult> singles;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      INFO("slice " << i);
      singles.push_back(alone[i]->forward(steps[i]));
      const ForwardResult& got = results[i];
      const ForwardResult& want = singles.back();
      CHECK(got.logits.empty() == want.logits.empty());
      if (!want.logits.empty()) {
        const auto [worst, cosine] = difference(got.logits, want.logits);
        CHECK(worst < 0.08);  // the batched path against a session (tests/engine/test_batch.cpp)
        CHECK(cosine >= 0.9999);
      }
      REQUIRE(got.extra.size() == want.extra.size());
      for (std::size_t k = 0; k < want.extra.size(); ++k) {
        CHECK(got.extra[k].first == want.extra[k].first);
        CHECK(difference(got.extra[k].second, want.extra[k].second).second >= 0.9999);
      }
      CHECK(got.head_sampled.size() == want.head_sampled.size());
      CHECK(got.sampled.has_value() == want.sampled.has_value());
    }
    return std::pair{std::move(results), std::move(singles)};
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::int64_t> wide_id(0, kWideRows - 1);
  // Slice 0 sums 4 rows of "rows" at two positions, slice 1 sums 3 rows of "wide" at three (one
  // launch per table: the ids of a table are padded to its most rows per position), slice 2 is text.
  SeqStep s0 = make_step(rng, m->vocab, 6, {1, 4});
  SeqStep s1 = make_step(rng, m->vocab, 5, {});
  s1.table_positions = {0, 2, 3};
  for (int i = 0; i < 9; ++i) s1.table_ids.push_back(wide_id(rng));
  const std::vector<std::int64_t> text{3, 1, 4, 1};
  std::vector<ForwardStep> steps(3);
  steps[0] = ForwardStep{s0.ids, {}, {}, OutputRequest{.logits = true, .all_positions = true},
                         TableRows{m->table, s0.table_positions, s0.table_ids, kSegments}};
  steps[1] = ForwardStep{s1.ids, {}, {}, OutputRequest{.logits = true}, TableRows{m->wide, s1.table_positions, s1.table_ids, 3}};
  steps[2] = ForwardStep{text, {}, {}, OutputRequest{.logits = true}};
  run(steps);

  // The head "wide" in one segment of 4096 rows: wider than the device picks, so its output comes
  // back for the host to sample, as from a session; a text slice picks greedily beside it.
  const std::vector<std::int64_t> one_token{0}, at_zero{0}, two_wide{wide_id(rng), wide_id(rng)};
  std::vector<ForwardStep> next(3);
  next[0] = ForwardStep{one_token, {}, {}, OutputRequest{.logits = false, .head_table = m->wide},
                        TableRows{m->wide, at_zero, two_wide, 2}};
  next[0].outputs.head_sample = HeadSampleRequest{.segments = 1, .temperature = 0.0f};
  const std::vector<std::int64_t> text_next{7};
  next[1] = ForwardStep{text_next, {}, {}, OutputRequest{.logits = true, .sample = SampleRequest{}}};
  next[2] = ForwardStep{text_next, {}, {}, OutputRequest{.logits = false, .head_table = m->wide}};
  const auto [results, singles] = run(next);
  REQUIRE(results[0].find_extra("wide") != nullptr);
  CHECK(results[0].find_extra("wide")->shape() == Shape{1, kWideRows});
  CHECK(results[0].head_sampled.empty());
  REQUIRE(results[1].sampled.has_value());
  CHECK(results[2].find_extra("wide") != nullptr);

  // A segment count the head's rows do not split into is refused before anything changes.
  const std::int64_t held = runner->tokens(seq[0]);
  ForwardStep bad = next[0];
  bad.outputs.head_sample = HeadSampleRequest{.segments = 3, .temperature = 0.0f};
  CHECK_THROWS_AS(runner->submit({{{seq[0], held, &bad}}}), InputError);
  CHECK(runner->tokens(seq[0]) == held);
}

}  // namespace zoo
