// Tensor parallelism's building blocks on the CPU (issue 29): the in-process communicator (ranks as
// threads) and one rank's weights (ShardedWeightSource), then the Megatron split they serve: a
// SwiGLU MLP computed as shards plus one all-reduce equals the unsplit computation. Catch2's
// assertions are not thread-safe: rank threads only record, the test thread checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "framework/weights_test_util.hpp"
#include "zoo/checkpoint.hpp"
#include "zoo/communicator.hpp"
#include "zoo/safetensors.hpp"
#include "zoo/sharded_weight_source.hpp"

using namespace zoo;
using Catch::Contains;
using zoo::test::input_error;
using zoo::test::TempDir;

namespace {

// Runs body(rank) on `ranks` threads; rethrows nothing, returns each rank's error text ("" when fine).
std::vector<std::string> on_ranks(int ranks, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::vector<std::jthread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  threads.clear();  // joins
  return errors;
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// y[t, o] = sum_i x[t, i] * w[o, i] (a Linear without bias, float32 in a fixed order).
std::vector<float> linear(const std::vector<float>& x, std::int64_t T, const float* w, std::int64_t out,
                          std::int64_t in) {
  std::vector<float> y(static_cast<std::size_t>(T * out));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t o = 0; o < out; ++o) {
      float s = 0;
      for (std::int64_t i = 0; i < in; ++i) s += x[static_cast<std::size_t>(t * in + i)] * w[o * in + i];
      y[static_cast<std::size_t>(t * out + o)] = s;
    }
  return y;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

TEST_CASE("in-process communicator: all-reduce in rank order, the same bits on every rank",
          "[tensor_parallel]") {
  for (const int ranks : {1, 2, 3, 4}) {
    INFO(ranks << " ranks");
    InProcessGroup group(ranks);
    constexpr int kCalls = 200;
    std::vector<std::vector<std::vector<float>>> got(static_cast<std::size_t>(ranks));
    const auto errors = on_ranks(ranks, [&](int r) {
      Communicator& c = group.rank(r);
      if (c.rank() != r || c.size() != ranks) throw std::logic_error("wrong rank or size");
      for (int call = 0; call < kCalls; ++call) {
        auto values =
            random_values(static_cast<std::size_t>(1 + call % 37), static_cast<unsigned>(call * 16 + r));
        c.all_reduce_sum(values);
        got[static_cast<std::size_t>(r)].push_back(std::move(values));
      }
    });
    for (const auto& e : errors) CHECK(e.empty());
    for (int call = 0; call < kCalls; ++call) {
      // The serial sum in rank order: what every rank must hold, bit for bit.
      std::vector<float> want(static_cast<std::size_t>(1 + call % 37), 0.0f);
      for (int r = 0; r < ranks; ++r) {
        const auto v = random_values(want.size(), static_cast<unsigned>(call * 16 + r));
        for (std::size_t i = 0; i < want.size(); ++i) want[i] += v[i];
      }
      for (int r = 0; r < ranks; ++r)
        REQUIRE(got[static_cast<std::size_t>(r)][static_cast<std::size_t>(call)] == want);
    }
  }
}

TEST_CASE(
    "in-process communicator: all-gather in rank order, and a mismatch or a failed rank stops every rank",
    "[tensor_parallel]") {
  InProcessGroup group(3);
  std::vector<std::vector<float>> out(3, std::vector<float>(6));
  auto errors = on_ranks(3, [&](int r) {
    const std::vector<float> piece{static_cast<float>(r), static_cast<float>(10 + r)};
    group.rank(r).all_gather(piece, out[static_cast<std::size_t>(r)]);
  });
  for (const auto& e : errors) CHECK(e.empty());
  for (const auto& o : out) CHECK(o == std::vector<float>{0, 10, 1, 11, 2, 12});

  // Ranks that pass different counts: every rank throws, naming the counts, none waits for ever.
  InProcessGroup mismatched(2);
  errors = on_ranks(2, [&](int r) {
    std::vector<float> v(static_cast<std::size_t>(4 + r));
    mismatched.rank(r).all_reduce_sum(v);
  });
  for (const auto& e : errors) CHECK_THAT(e, Contains("passed") && Contains("values"));

  // A rank that fails before its call (its thread aborts the group): the others' calls throw.
  InProcessGroup failing(3);
  errors = on_ranks(3, [&](int r) {
    if (r == 1) {
      failing.abort("rank 1: could not read its weights");
      throw std::runtime_error("rank 1 failed");
    }
    std::vector<float> v(8, 1.0f);
    for (int i = 0; i < 10; ++i) failing.rank(r).all_reduce_sum(v);
  });
  CHECK_THAT(errors[0], Contains("could not read its weights"));
  CHECK_THAT(errors[2], Contains("could not read its weights"));
}

TEST_CASE(
    "sharded weights: rows are views into the checkpoint, columns this rank's copy, kv heads replicated",
    "[tensor_parallel][weights]") {
  TempDir dir;
  // q [4 heads x 2, 3], k [2 kv heads x 2, 3], o [3, 8]; values = row * 100 + column.
  const auto table = [](std::int64_t rows, std::int64_t cols) {
    std::vector<float> v(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        v[static_cast<std::size_t>(r * cols + c)] = static_cast<float>(r * 100 + c);
    return v;
  };
  auto q = table(8, 3), k = table(4, 3), o = table(3, 8), norm = table(1, 3);
  write_safetensors(dir / "model.safetensors",
                    {{"l.0.attn.q.weight", TensorView{q.data(), DType::F32, {8, 3}, {}}},
                     {"l.0.attn.k.weight", TensorView{k.data(), DType::F32, {4, 3}, {}}},
                     {"l.0.attn.o.weight", TensorView{o.data(), DType::F32, {3, 8}, {}}},
                     {"l.0.norm.weight", TensorView{norm.data(), DType::F32, {3}, {}}}},
                    {{"format", "pt"}});
  auto base = open_checkpoint(dir.path());
  const std::vector<ShardRule> rules{{"attn.q.weight", 0, 4, "heads"},
                                     {"attn.k.weight", 0, 2, "kv heads"},
                                     {"attn.o.weight", 1, 4, "heads"}};
  const ShardedWeightSource r1(base, rules, 1, 2);
  CHECK(r1.info("l.0.attn.q.weight")->shape == Shape{4, 3});
  CHECK(r1.view("l.0.attn.q.weight").data ==
        static_cast<const std::byte*>(base->view("l.0.attn.q.weight").data) + 4 * 3 * sizeof(float));
  const TensorView o1 = r1.view("l.0.attn.o.weight");
  REQUIRE(o1.shape == Shape{3, 4});
  CHECK(o1.as<float>()[0] == 4.0f);    // row 0, column 4
  CHECK(o1.as<float>()[5] == 105.0f);  // row 1, column 5
  CHECK(r1.info("l.0.attn.o.weight")->nbytes == 3 * 4 * sizeof(float));
  CHECK(r1.view("l.0.norm.weight").data == base->view("l.0.norm.weight").data);  // not named: whole
  CHECK(r1.describe().ends_with("(rank 1 of 2)"));

  // 4 ranks over 2 kv heads: ranks 0 and 1 hold kv head 0, ranks 2 and 3 kv head 1.
  for (int r = 0; r < 4; ++r) {
    const ShardedWeightSource s(base, rules, r, 4);
    CHECK(s.view("l.0.attn.k.weight").as<float>()[0] == static_cast<float>((r / 2) * 2 * 100));
    CHECK(s.info("l.0.attn.q.weight")->shape == Shape{2, 3});
  }
  // 3 ranks: 4 heads do not split; the error names the tensor and the counts.
  const ShardedWeightSource three(base, rules, 0, 3);
  CHECK_THAT(input_error([&] { (void)three.view("l.0.attn.q.weight"); }),
             Contains("l.0.attn.q.weight") && Contains("4 heads") && Contains("3 ranks"));
  CHECK_THAT(input_error([&] { (void)three.info("l.0.attn.o.weight"); }), Contains("l.0.attn.o.weight"));
}

// The Megatron split itself, with these pieces: gate/up by rows and down by columns, each rank's
// SwiGLU on its share of the intermediate, one all-reduce (attention's o_proj is the same pattern
// over heads). Equal to the unsplit computation up to float32 summation order.
TEST_CASE("sharded weights and an all-reduce compute the unsplit SwiGLU MLP", "[tensor_parallel]") {
  constexpr std::int64_t T = 3, H = 8, I = 12;
  TempDir dir;
  auto gate = random_values(I * H, 1), up = random_values(I * H, 2), down = random_values(H * I, 3);
  write_safetensors(dir / "model.safetensors",
                    {{"mlp.gate.weight", TensorView{gate.data(), DType::F32, {I, H}, {}}},
                     {"mlp.up.weight", TensorView{up.data(), DType::F32, {I, H}, {}}},
                     {"mlp.down.weight", TensorView{down.data(), DType::F32, {H, I}, {}}}},
                    {{"format", "pt"}});
  auto base = open_checkpoint(dir.path());
  const auto x = random_values(T * H, 4);
  const auto mlp = [&](const WeightSource& w, std::int64_t inter) {
    const auto g = linear(x, T, w.view("mlp.gate.weight").as<float>(), inter, H);
    const auto u = linear(x, T, w.view("mlp.up.weight").as<float>(), inter, H);
    std::vector<float> a(g.size());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    return linear(a, T, w.view("mlp.down.weight").as<float>(), H, inter);
  };
  const auto whole = mlp(*base, I);
  const std::vector<ShardRule> rules{
      {"mlp.gate.weight", 0, 0, ""}, {"mlp.up.weight", 0, 0, ""}, {"mlp.down.weight", 1, 0, ""}};
  for (const int ranks : {2, 3, 4}) {
    INFO(ranks << " ranks");
    InProcessGroup group(ranks);
    std::vector<std::vector<float>> y(static_cast<std::size_t>(ranks));
    const auto errors = on_ranks(ranks, [&](int r) {
      const ShardedWeightSource w(base, rules, r, ranks);
      auto part = mlp(w, I / ranks);
      group.rank(r).all_reduce_sum(part);
      y[static_cast<std::size_t>(r)] = std::move(part);
    });
    for (const auto& e : errors) CHECK(e.empty());
    CHECK(rel_l2(y[0], whole) <= 1e-6);
    for (int r = 1; r < ranks; ++r) CHECK(y[static_cast<std::size_t>(r)] == y[0]);
  }
  // A split that leaves one rank's share of the down projection out is far off: the test can fail.
  InProcessGroup two(2);
  std::vector<float> partial;
  (void)on_ranks(2, [&](int r) {
    const ShardedWeightSource w(base, rules, r, 2);
    auto part = mlp(w, I / 2);
    if (r == 0) partial = part;
    two.rank(r).all_reduce_sum(part);
  });
  CHECK(rel_l2(partial, whole) > 0.1);
}
