#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "kernel_test_util.hpp"
#include "zoo/kernels/cpu_ops.hpp"

namespace {
using zoo::kernels::test::Mismatches;
using zoo::kernels::test::normal_vector;

struct AttentionCase {
  std::int64_t tokens, start, q_heads, kv_heads, head_dim;
  float scale;
  float stddev = 1.0f;  // of q and k
  float softcap = 0.0f;
  std::int64_t window = 0;
};

void check_attention(const AttentionCase& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::int64_t context = c.start + c.tokens;
  const std::int64_t cache_len = context + 3;
  const std::int64_t d = c.head_dim;
  const auto q = normal_vector(rng, c.tokens * c.q_heads * d, c.stddev);
  auto k = normal_vector(rng, cache_len * c.kv_heads * d, c.stddev);
  auto v = normal_vector(rng, cache_len * c.kv_heads * d);
  // Cache rows past the context must never be read: NaN there would poison the output.
  std::fill(k.begin() + context * c.kv_heads * d, k.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(v.begin() + context * c.kv_heads * d, v.end(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> out(q.size(), -7.0f);
  // Keys before a query's window must never be read either: poison the first one when it is out.
  if (c.window > 0 && c.start + 1 > c.window) {
    std::fill(k.begin(), k.begin() + c.kv_heads * d, std::numeric_limits<float>::quiet_NaN());
    std::fill(v.begin(), v.begin() + c.kv_heads * d, std::numeric_limits<float>::quiet_NaN());
  }
  zoo::kernels::cpu::attention_causal_gqa(q.data(), k.data(), v.data(), out.data(), c.tokens, c.start, c.q_heads,
                                          c.kv_heads, d,
                                          {.scale = c.scale, .softcap = c.softcap, .window = c.window});

  const std::int64_t group = c.q_heads / c.kv_heads;
  Mismatches bad;
  std::vector<double> scores, want(static_cast<std::size_t>(d));
  for (std::int64_t t = 0; t < c.tokens; ++t) {
    for (std::int64_t h = 0; h < c.q_heads; ++h) {
      const std::int64_t g = h / group, length = c.start + t + 1;
      const std::int64_t first = c.window > 0 ? std::max<std::int64_t>(0, length - c.window) : 0;
      const float* qv = q.data() + (t * c.q_heads + h) * d;
      scores.assign(static_cast<std::size_t>(length), -INFINITY);
      double max_score = -INFINITY, max_abs_dot = 0.0, max_abs_v = 0.0;
      for (std::int64_t j = first; j < length; ++j) {
        const float* kv = k.data() + (j * c.kv_heads + g) * d;
        double s = 0.0, abs_sum = 0.0;
        for (std::int64_t i = 0; i < d; ++i) {
          s += static_cast<double>(qv[i]) * kv[i];
          abs_sum += std::abs(static_cast<double>(qv[i]) * kv[i]);
        }
        scores[j] = s * c.scale;
        if (c.softcap > 0) scores[j] = std::tanh(scores[j] / c.softcap) * c.softcap;
        max_score = std::max(max_score, scores[j]);
        max_abs_dot = std::max(max_abs_dot, abs_sum * c.scale);
        for (std::int64_t i = 0; i < d; ++i) max_abs_v = std::max(max_abs_v, std::abs(double{v[(j * c.kv_heads + g) * d + i]}));
      }
      double sum = 0.0;
      for (auto& s : scores) sum += (s = std::exp(s - max_score));
      std::fill(want.begin(), want.end(), 0.0);
      for (std::int64_t j = first; j < length; ++j) {
        for (std::int64_t i = 0; i < d; ++i) want[i] += scores[j] / sum * v[(j * c.kv_heads + g) * d + i];
      }
      // Worst-case float32 error: each score is off by at most score_err = d * 2^-24 * sum|q k| *
      // scale; softmax moves at most 2 * score_err of probability mass; the exp/sum/weighted sum
      // over `length` terms add (length + 8) * 2^-22. All relative to the largest |v|.
      const double score_err = d * 0x1p-24 * max_abs_dot;
      const double tol = max_abs_v * (2.0 * score_err + (length + 8) * 0x1p-22);
      for (std::int64_t i = 0; i < d; ++i) {
        const std::int64_t idx = (t * c.q_heads + h) * d + i;
        bad.check(idx, out[idx], want[i], tol);
      }
    }
  }
  std::ostringstream what;
  what << "tokens=" << c.tokens << " start=" << c.start << " q_heads=" << c.q_heads << " kv_heads=" << c.kv_heads
       << " head_dim=" << d << " scale=" << c.scale << " stddev=" << c.stddev << " softcap=" << c.softcap
       << " window=" << c.window << ": " << bad;
  INFO(what.str());
  CHECK(bad.count == 0);
}
}  // namespace

TEST_CASE("attention_causal_gqa matches a double loop", "[kernels][attention]") {
  struct Heads {
    std::int64_t q, kv;
  };
  std::uint32_t seed = 500;
  for (Heads heads : {Heads{2, 2}, Heads{4, 2}, Heads{8, 2}, Heads{4, 1}}) {  // GQA ratios 1, 2, 4, 4
    for (std::int64_t head_dim : {16, 20, 64, 128}) {
      for (std::int64_t tokens : {1, 5, 33}) {
        for (std::int64_t start : {0, 7, 100}) {
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          check_attention({tokens, start, heads.q, heads.kv, head_dim, scale}, ++seed);
        }
      }
    }
  }
}

TEST_CASE("attention_causal_gqa is stable for large scores", "[kernels][attention]") {
  // Scores in the thousands: exp() without the max subtracted would overflow to inf and NaN.
  std::uint32_t seed = 600;
  for (std::int64_t tokens : {1, 9}) {
    check_attention({tokens, 20, 4, 2, 64, 1.0f, 8.0f}, ++seed);
  }
}

TEST_CASE("attention_causal_gqa spreads a long prefill over the threads", "[kernels][attention]") {
  check_attention({200, 0, 8, 2, 64, 0.125f}, 700);
}

TEST_CASE("attention_causal_gqa: the first token attends only to itself", "[kernels][attention]") {
  // With start = 0 the first query sees one key, so its output is exactly that value row,
  // whatever q and k hold.
  std::mt19937 rng(800);
  const std::int64_t d = 32;
  const auto q = normal_vector(rng, 2 * 4 * d, 5.0f);
  const auto k = normal_vector(rng, 2 * 2 * d, 5.0f);
  const auto v = normal_vector(rng, 2 * 2 * d);
  std::vector<float> out(q.size());
  zoo::kernels::cpu::attention_causal_gqa(q.data(), k.data(), v.data(), out.data(), 2, 0, 4, 2, d, 0.3f);
  for (std::int64_t h = 0; h < 4; ++h) {
    for (std::int64_t i = 0; i < d; ++i) CHECK(out[h * d + i] == v[(h / 2) * d + i]);
  }
  CHECK_THROWS_AS(zoo::kernels::cpu::attention_causal_gqa(q.data(), k.data(), v.data(), out.data(), 1, 0, 3, 2, d,
                                                          0.3f),
                  std::invalid_argument);
}

TEST_CASE("attention_causal_gqa: a sliding window and a softcap match the double loop", "[kernels][attention]") {
  std::uint32_t seed = 900;
  // Windows shorter and longer than the context, at prefill and decode, with and without caps.
  for (const AttentionCase& c : {AttentionCase{9, 0, 4, 2, 16, 0.25f, 1.0f, 0.0f, 3},
                                 AttentionCase{1, 20, 4, 1, 32, 0.2f, 1.0f, 0.0f, 5},
                                 AttentionCase{6, 7, 2, 2, 64, 0.125f, 1.0f, 0.0f, 100},
                                 AttentionCase{12, 0, 4, 2, 16, 0.25f, 3.0f, 1.5f, 0},
                                 AttentionCase{5, 9, 8, 2, 64, 0.1f, 2.0f, 2.0f, 4}})
    check_attention(c, seed++);
}

TEST_CASE("attention_causal_gqa: window 1 attends to the query's own value only", "[kernels][attention]") {
  const std::int64_t d = 8;
  std::mt19937 rng(77);
  const auto q = normal_vector(rng, 3 * 2 * d);
  const auto k = normal_vector(rng, 3 * d);
  const auto v = normal_vector(rng, 3 * d);
  std::vector<float> out(q.size());
  zoo::kernels::cpu::attention_causal_gqa(q.data(), k.data(), v.data(), out.data(), 3, 0, 2, 1, d,
                                          {.scale = 0.3f, .softcap = 0.0f, .window = 1});
  for (std::int64_t t = 0; t < 3; ++t)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < d; ++i) CHECK(out[(t * 2 + h) * d + i] == v[t * d + i]);
}

namespace {

// Each sequence's keys and values scattered over shuffled pages of a shared pool.
TEST_CASE("attention_paged_gqa: several sequences over shuffled pages give the contiguous kernel's bits",
          "[kernels][attention]") {
  namespace cpu = zoo::kernels::cpu;
  constexpr std::int64_t P = cpu::kPagedAttentionPageTokens;
  const std::int64_t q_heads = 4, kv_heads = 2, d = 16, row = kv_heads * d;
  struct Seq {
    std::int64_t start, tokens;
  };
  // A decode step, a chunk crossing a page boundary, a prefill from zero, one token at a boundary.
  const std::vector<Seq> seqs = {{40, 1}, {13, 7}, {0, 33}, {31, 1}};
  // Plain, and with a sliding window and a softcap.
  const auto options = GENERATE(cpu::AttentionOptions{.scale = 0.25f},
                                cpu::AttentionOptions{.scale = 0.25f, .softcap = 3.0f, .window = 5});
  std::mt19937 rng(5);
  std::int64_t pages_total = 0;
  for (const auto& s : seqs) pages_total += (s.start + s.tokens + P - 1) / P;
  std::vector<std::int32_t> order(static_cast<std::size_t>(pages_total));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<float> k_pages(static_cast<std::size_t>(pages_total * P * row), NAN),
      v_pages(k_pages.size(), NAN);  // unwritten slots are NaN: reading one would show
  std::int64_t rows = 0;
  for (const auto& s : seqs) rows += s.tokens;
  const std::vector<float> q = normal_vector(rng, rows * q_heads * d);
  std::vector<float> out(q.size(), 0.0f), expected(q.size(), 0.0f);
  std::vector<std::vector<std::int32_t>> tables;
  std::vector<cpu::PagedAttentionSlice> slices;
  std::int64_t next_page = 0, next_row = 0;
  for (const auto& s : seqs) {
    const std::int64_t context = s.start + s.tokens;
    const std::vector<float> k = normal_vector(rng, context * row);
    const std::vector<float> v = normal_vector(rng, context * row);
    auto& table = tables.emplace_back();
    for (std::int64_t p = 0; p < (context + P - 1) / P; ++p) table.push_back(order[static_cast<std::size_t>(next_page++)]);
    for (std::int64_t j = 0; j < context; ++j) {
      const std::int64_t slot = table[static_cast<std::size_t>(j / P)] * P + j % P;
      std::copy_n(&k[static_cast<std::size_t>(j * row)], row, &k_pages[static_cast<std::size_t>(slot * row)]);
      std::copy_n(&v[static_cast<std::size_t>(j * row)], row, &v_pages[static_cast<std::size_t>(slot * row)]);
    }
    cpu::attention_causal_gqa(&q[static_cast<std::size_t>(next_row * q_heads * d)], k.data(), v.data(),
                              &expected[static_cast<std::size_t>(next_row * q_heads * d)], s.tokens, s.start, q_heads,
                              kv_heads, d, options);
    slices.push_back({next_row, s.tokens, s.start, tables.back().data()});
    next_row += s.tokens;
  }
  cpu::attention_paged_gqa(q.data(), k_pages.data(), v_pages.data(), out.data(), slices, q_heads, kv_heads, d,
                           options);
  CHECK(std::equal(out.begin(), out.end(), expected.begin()));
}

}  // namespace
