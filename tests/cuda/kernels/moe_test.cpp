// The mixture-of-experts kernels (moe.hpp) against a host reference of transformers'
// Qwen3MoeSparseMoeBlock in bf16: the routing (ids exactly, weights to the bf16 ulp), the decode
// path (moe_gate_up_act + moe_down_sum) and the prefill path (moe_group, gather_rows,
// Gemm::grouped_linear, act_and_mul, moe_combine) against the whole block's roundings, the
// ascending-expert-id order of the weighted sum bitwise on exactly representable data, and the
// decode path replayed in a CUDA graph with new inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <set>
#include <stdexcept>

#include "cuda/cuda_test_util.hpp"
#include "zoo/kernels/cuda/gemm.hpp"
#include "zoo/kernels/cuda/moe.hpp"
#include "zoo/kernels/cuda/ops.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;
using zoo::round_to_bf16;

// A named namespace, not an anonymous one: the tests are compiled in unity batches.
namespace zoo::moe_test {

using kernels::cuda::GatedActivation;

const char* act_name(GatedActivation a) {
  return a == GatedActivation::silu ? "silu" : (a == GatedActivation::gelu_tanh ? "gelu_tanh" : "gelu");
}

// Distinct bf16 logits of magnitude >= 1/16 per row: their exponentials differ by far more than
// float32 rounding, so the ranking has no near-ties for the device's and the host's softmax to
// break differently.
std::vector<float> distinct_logits(std::mt19937& rng, std::int64_t tokens, int experts) {
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> out(static_cast<std::size_t>(tokens * experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::set<float> seen;
    for (int e = 0; e < experts; ++e) {
      float v;
      do v = round_to_bf16(dist(rng));
      while (std::abs(v) < 0.0625f || !seen.insert(v).second);
      out[t * experts + e] = v;
    }
  }
  return out;
}

struct Routing {
  std::vector<std::int32_t> ids;
  std::vector<float> weights;
};

// torch: softmax(bf16 logits, float32), topk (descending, ties to the lower index), optional
// renormalization in float32, then bf16 weights.
Routing route_reference(const std::vector<float>& logits, std::int64_t tokens, int experts, int k, bool normalize) {
  Routing r;
  r.ids.resize(tokens * k);
  r.weights.resize(tokens * k);
  std::vector<float> p(experts);
  std::vector<int> order(experts);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* l = &logits[t * experts];
    const float m = *std::max_element(l, l + experts);
    float s = 0.0f;
    for (int e = 0; e < experts; ++e) {
      p[e] = std::exp(l[e] - m);
      s += p[e];
    }
    for (int e = 0; e < experts; ++e) p[e] = p[e] / s;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += p[order[j]];
    for (int j = 0; j < k; ++j) {
      const float v = normalize ? p[order[j]] / sum : p[order[j]];
      r.ids[t * k + j] = order[j];
      r.weights[t * k + j] = round_to_bf16(v);
    }
  }
  return r;
}

// bf16(act(g)) * u in float32 (the caller rounds), as device_utils.cuh forms it.
float act_times(GatedActivation a, float g, float u) {
  switch (a) {
    case GatedActivation::silu: return round_to_bf16(g / (1.0f + std::exp(-g))) * u;
    case GatedActivation::gelu_tanh: {
      const float inner = 0.7978845608028654f * (g + 0.044715f * g * g * g);
      return round_to_bf16(0.5f * g * (1.0f + std::tanh(inner))) * u;
    }
    case GatedActivation::gelu: return round_to_bf16(g * 0.5f * (1.0f + std::erf(g * 0.7071067811865476f))) * u;
  }
  return 0.0f;
}

// A dot product in float64, rounded to bf16 (a GEMM's float32 sum differs from it only where the
// exact value lies within float32 rounding of a bf16 rounding boundary).
float dot_bf16(const float* a, const float* b, std::int64_t n) {
  double acc = 0.0;
  for (std::int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return round_to_bf16(static_cast<float>(acc));
}

struct Problem {
  std::int64_t tokens = 0, hidden = 0, inter = 0;
  int experts = 0, k = 0;
  bool normalize = true;
  GatedActivation act = GatedActivation::silu;
  std::vector<float> x, w_gate_up, w_down, logits;
};

Problem make_problem(std::mt19937& rng, std::int64_t tokens, int experts, int k, std::int64_t hidden,
                     std::int64_t inter, bool normalize, GatedActivation act) {
  Problem p;
  p.tokens = tokens;
  p.experts = experts;
  p.k = k;
  p.hidden = hidden;
  p.inter = inter;
  p.normalize = normalize;
  p.act = act;
  p.x = random_bf16_values(rng, tokens * hidden);
  // Projections of order 1 whatever the sizes.
  const float wg = 2.0f / std::sqrt(static_cast<float>(hidden)), wd = 2.0f / std::sqrt(static_cast<float>(inter));
  p.w_gate_up = random_bf16_values(rng, experts * 2 * inter * hidden, -wg, wg);
  p.w_down = random_bf16_values(rng, experts * hidden * inter, -wd, wd);
  p.logits = distinct_logits(rng, tokens, experts);
  return p;
}

// The block's intermediate and final values for given routing.
struct Expected {
  std::vector<float> act, act_scale;  // [T * k, I]; scale |g u| + |act|
  std::vector<float> out, out_scale;  // [T, H]; scale: the sum of the weighted terms' magnitudes
  std::vector<std::int32_t> counts;   // assignments per expert
};

Expected expected(const Problem& p, const std::vector<std::int32_t>& ids, const std::vector<float>& weights) {
  const std::int64_t H = p.hidden, I = p.inter, n = p.tokens * p.k;
  Expected e;
  e.act.resize(n * I);
  e.act_scale.resize(n * I);
  e.out.assign(p.tokens * H, 0.0f);
  e.out_scale.assign(p.tokens * H, 0.0f);
  e.counts.assign(p.experts, 0);
  std::vector<float> y(n * H);
  for (std::int64_t a = 0; a < n; ++a) {
    const std::int64_t t = a / p.k, ex = ids[a];
    ++e.counts[ex];
    const float* xr = &p.x[t * H];
    const float* wgu = &p.w_gate_up[ex * 2 * I * H];
    for (std::int64_t i = 0; i < I; ++i) {
      const float g = dot_bf16(xr, wgu + i * H, H), u = dot_bf16(xr, wgu + (I + i) * H, H);
      const float v = round_to_bf16(act_times(p.act, g, u));
      e.act[a * I + i] = v;
      e.act_scale[a * I + i] = std::abs(g * u) + std::abs(v);
    }
    for (std::int64_t h = 0; h < H; ++h) y[a * H + h] = dot_bf16(&e.act[a * I], &p.w_down[(ex * H + h) * I], I);
  }
  std::vector<int> order(p.k);
  for (std::int64_t t = 0; t < p.tokens; ++t) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ids[t * p.k + a] < ids[t * p.k + b]; });
    for (std::int64_t h = 0; h < H; ++h) {
      float o = 0.0f, s = 0.0f;
      for (const int j : order) {
        const float v = round_to_bf16(y[(t * p.k + j) * H + h] * weights[t * p.k + j]);
        o = round_to_bf16(o + v);
        s += std::abs(v);
      }
      e.out[t * H + h] = o;
      e.out_scale[t * H + h] = s;
    }
  }
  return e;
}

// The routing kernel's ids must equal the reference's; its weights may differ from the host's in a
// rounding to bf16 that a last-bit difference of the float32 softmax flipped (one bf16 ulp).
void check_routing(const std::vector<std::int32_t>& ids, const std::vector<float>& weights, const Routing& want) {
  REQUIRE(ids == want.ids);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    INFO("weight " << i << ": " << weights[i] << " vs " << want.weights[i]);
    REQUIRE(weights[i] == round_to_bf16(weights[i]));
    REQUIRE(std::abs(weights[i] - want.weights[i]) <= std::abs(want.weights[i]) / 128.0f);
  }
}

// An expert output against the reference: within 2^-6 of the summed magnitudes (the
// projections' bf16 rounding may flip where the float32 and float64 sums straddle a boundary),
// and bitwise equal almost everywhere (those flips are rare; a wrong expert, a wrong weight or a
// wrong summation order change most values).
void check_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& scale,
                 const char* what) {
  const double max_scale = *std::max_element(scale.begin(), scale.end());
  const auto c = compare_scaled(got, want, scale, 1e-3 * kBf16Eps * max_scale, 4 * kBf16Eps);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
  INFO(what << ": " << c.str() << "; " << differ << " not bitwise equal");
  CHECK(c.ok());
  CHECK(differ <= got.size() / 100 + 2);
}

struct DeviceProblem {
  DeviceBuffer x, w_gate_up, w_down, logits;
  explicit DeviceProblem(const Problem& p)
      : x(upload_bf16(p.x)), w_gate_up(upload_bf16(p.w_gate_up)), w_down(upload_bf16(p.w_down)),
        logits(upload(p.logits)) {}
};

int multiprocessors() { return device_properties().multiprocessors; }

// Routing on the device, checked; returns its ids and weights.
Routing route_on_device(const Problem& p, DeviceProblem& d, DeviceBuffer& ids, DeviceBuffer& weights,
                        cudaStream_t stream) {
  moe_route(d.logits.as<float>(), p.tokens, p.experts, p.k, p.normalize, ids.as<std::int32_t>(),
            weights.as<float>(), stream);
  ZOO_CUDA_CHECK(cudaStreamSynchronize(stream));
  Routing r{download<std::int32_t>(ids, p.tokens * p.k), download<float>(weights, p.tokens * p.k)};
  check_routing(r.ids, r.weights, route_reference(p.logits, p.tokens, p.experts, p.k, p.normalize));
  return r;
}

struct Shape {
  std::int64_t tokens;
  int experts, k;
  std::int64_t hidden, inter;
};

// The shapes of the block tests: 1, 3 and 37 tokens, 8 or 16 experts, k 2 or 4, and H, I cycling
// through sizes that are and are not multiples of the kernels' steps.
std::vector<Shape> block_shapes() {
  const std::int64_t hi[][2] = {{64, 32}, {136, 40}, {256, 96}};
  std::vector<Shape> out;
  int c = 0;
  for (const std::int64_t tokens : {1, 3, 37})
    for (const auto& ek : {std::pair{8, 2}, std::pair{16, 4}}) {
      out.push_back({tokens, ek.first, ek.second, hi[c % 3][0], hi[c % 3][1]});
      ++c;
    }
  return out;
}

}  // namespace zoo::moe_test

namespace mt = zoo::moe_test;

TEST_CASE("moe_route picks transformers' top-k experts with bf16 weights", "[cuda][moe]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(3001);
  Stream stream;
  struct Case {
    std::int64_t tokens;
    int experts, k;
  };
  const Case cases[] = {{1, 8, 2}, {3, 16, 4}, {37, 128, 8}, {5, 512, 32}, {4, 32, 32}, {70, 60, 7}};
  for (const auto& cs : cases)
    for (const bool normalize : {true, false}) {
      INFO("tokens " << cs.tokens << " experts " << cs.experts << " k " << cs.k << " normalize " << normalize);
      const auto logits = mt::distinct_logits(rng, cs.tokens, cs.experts);
      // Off the bf16 grid by less than half an ulp: the kernel rounds them back, in place.
      std::vector<float> raw(logits);
      for (auto& v : raw) v *= 1.0f + 1.0f / 2048.0f;
      DeviceBuffer dl = upload(raw), ids(cs.tokens * cs.k * 4), weights(cs.tokens * cs.k * 4);
      ids.fill_bytes(0xff);
      weights.fill_bytes(0xff);
      moe_route(dl.as<float>(), cs.tokens, cs.experts, cs.k, normalize, ids.as<std::int32_t>(), weights.as<float>(),
                stream);
      stream.synchronize();
      CHECK(download<float>(dl, logits.size()) == logits);
      mt::check_routing(download<std::int32_t>(ids, cs.tokens * cs.k), download<float>(weights, cs.tokens * cs.k),
                        mt::route_reference(logits, cs.tokens, cs.experts, cs.k, normalize));
    }
  {
    INFO("ties go to the lower expert index");
    const int experts = 16, k = 4;
    std::vector<float> logits(2 * experts);
    for (int e = 0; e < experts; ++e) {
      logits[e] = 0.5f;                     // all equal: experts 0..3
      logits[experts + e] = 0.25f * (e / 2);  // pairs: 14, 15, 12, 13
    }
    DeviceBuffer dl = upload(logits), ids(2 * k * 4), weights(2 * k * 4);
    moe_route(dl.as<float>(), 2, experts, k, true, ids.as<std::int32_t>(), weights.as<float>(), stream);
    stream.synchronize();
    const auto got = download<std::int32_t>(ids, 2 * k);
    CHECK(got == std::vector<std::int32_t>{0, 1, 2, 3, 14, 15, 12, 13});
    CHECK(download<float>(weights, k) == std::vector<float>(k, 0.25f));
    mt::check_routing(got, download<float>(weights, 2 * k), mt::route_reference(logits, 2, experts, k, true));
  }
}

TEST_CASE("moe_group sorts the assignments by expert", "[cuda][moe]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(3002);
  Stream stream;
  struct Case {
    std::int64_t tokens;
    int k, experts;
    bool invalid;  // a few ids outside [0, experts): no row
  };
  const Case cases[] = {{1, 2, 8, false}, {37, 4, 16, true}, {100, 8, 512, false}, {16384, 4, 128, false},
                        {0, 4, 8, false}};
  for (const auto& cs : cases) {
    INFO("tokens " << cs.tokens << " k " << cs.k << " experts " << cs.experts);
    const std::int64_t n = cs.tokens * cs.k;
    // Only every other expert is used, so that some counts are zero.
    std::uniform_int_distribution<int> pick(0, (cs.experts - 1) / 2);
    std::vector<std::int32_t> ids(n);
    for (auto& id : ids) id = 2 * pick(rng);
    if (cs.invalid) {
      ids[1] = -1;
      ids[n - 1] = cs.experts;
    }
    DeviceBuffer did = upload(ids.empty() ? std::vector<std::int32_t>{0} : ids);
    DeviceBuffer counts(cs.experts * 4), offsets((cs.experts + 1) * 4), row_of(std::max<std::int64_t>(n, 1) * 4),
        token_of(std::max<std::int64_t>(n, 1) * 4);
    counts.fill_bytes(0x7f);  // not zeroed: the kernel must start from zero itself
    offsets.fill_bytes(0x7f);
    token_of.fill_bytes(0xff);
    moe_group(did.as<std::int32_t>(), cs.tokens, cs.k, cs.experts, counts.as<std::int32_t>(),
              offsets.as<std::int32_t>(), row_of.as<std::int32_t>(), token_of.as<std::int32_t>(), stream);
    stream.synchronize();
    std::vector<std::int32_t> want_counts(cs.experts, 0), want_offsets(cs.experts + 1, 0);
    for (const auto id : ids)
      if (id >= 0 && id < cs.experts) ++want_counts[id];
    for (int e = 0; e < cs.experts; ++e) want_offsets[e + 1] = want_offsets[e] + want_counts[e];
    REQUIRE(download<std::int32_t>(counts, cs.experts) == want_counts);
    REQUIRE(download<std::int32_t>(offsets, cs.experts + 1) == want_offsets);
    if (n == 0) continue;
    const auto rows = download<std::int32_t>(row_of, n), tokens = download<std::int32_t>(token_of, n);
    std::vector<int> hits(want_offsets[cs.experts], 0);
    for (std::int64_t a = 0; a < n; ++a) {
      INFO("assignment " << a << " expert " << ids[a] << " row " << rows[a]);
      if (ids[a] < 0 || ids[a] >= cs.experts) {
        REQUIRE(rows[a] == -1);
        continue;
      }
      REQUIRE(rows[a] >= want_offsets[ids[a]]);
      REQUIRE(rows[a] < want_offsets[ids[a] + 1]);
      REQUIRE(tokens[rows[a]] == a / cs.k);
      ++hits[rows[a]];
    }
    CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));  // a permutation
  }
}

TEST_CASE("moe_down_sum and moe_combine add the experts in ascending id order, bitwise", "[cuda][moe]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(3003);
  Stream stream;
  const std::int64_t tokens = 5, inter = 64;
  const int experts = 32;
  for (const int k : {4, 8})
    for (const std::int64_t hidden : {64, 70}) {
      INFO("k " << k << " hidden " << hidden);
      const std::int64_t n = tokens * k;
      // Small integers (times 1/8): every dot product is exact in float32 whatever the order, so
      // the only roundings are the block's own and the result is fixed bit for bit.
      std::uniform_int_distribution<int> small(-3, 3);
      std::vector<float> act(n * inter), w_down(experts * hidden * inter);
      for (auto& v : act) v = static_cast<float>(small(rng));
      for (auto& v : w_down) v = 0.125f * static_cast<float>(small(rng));
      // Experts in probability order, i.e. not sorted by id.
      std::vector<std::int32_t> ids(n);
      std::vector<int> perm(experts);
      for (std::int64_t t = 0; t < tokens; ++t) {
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int j = 0; j < k; ++j) ids[t * k + j] = perm[j];
      }
      const auto weights = random_bf16_values(rng, n, 0.05f, 1.0f);
      std::vector<float> y(n * hidden);
      for (std::int64_t a = 0; a < n; ++a)
        for (std::int64_t h = 0; h < hidden; ++h)
          y[a * hidden + h] = mt::dot_bf16(&act[a * inter], &w_down[(ids[a] * hidden + h) * inter], inter);
      // The reference in id order, and (to show the data tells orders apart) in the given order.
      std::vector<float> want(tokens * hidden), given(tokens * hidden);
      std::vector<int> order(k);
      for (std::int64_t t = 0; t < tokens; ++t) {
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int a, int b) { return ids[t * k + a] < ids[t * k + b]; });
        for (std::int64_t h = 0; h < hidden; ++h) {
          float o = 0.0f, g = 0.0f;
          for (int r = 0; r < k; ++r) {
            const std::int64_t a = t * k + order[r], b = t * k + r;
            o = round_to_bf16(o + round_to_bf16(y[a * hidden + h] * weights[a]));
            g = round_to_bf16(g + round_to_bf16(y[b * hidden + h] * weights[b]));
          }
          want[t * hidden + h] = o;
          given[t * hidden + h] = g;
        }
      }
      REQUIRE(want != given);

      DeviceBuffer dact = upload_bf16(act), dw = upload_bf16(w_down), dids = upload(ids), dweights = upload(weights);
      DeviceBuffer out(tokens * hidden * 2);
      out.fill_bytes(0xff);
      moe_down_sum(dact.as<Bf16>(), dw.as<Bf16>(), dids.as<std::int32_t>(), dweights.as<float>(), tokens, k, hidden,
                   inter, out.as<Bf16>(), mt::multiprocessors(), stream);
      stream.synchronize();
      CHECK(download_bf16(out, tokens * hidden) == want);

      // The same through the prefill path's combine, from rows in expert-sorted order.
      DeviceBuffer counts(experts * 4), offsets((experts + 1) * 4), row_of(n * 4), token_of(n * 4);
      moe_group(dids.as<std::int32_t>(), tokens, k, experts, counts.as<std::int32_t>(), offsets.as<std::int32_t>(),
                row_of.as<std::int32_t>(), token_of.as<std::int32_t>(), stream);
      stream.synchronize();
      const auto rows = download<std::int32_t>(row_of, n);
      std::vector<float> y_sorted(n * hidden);
      for (std::int64_t a = 0; a < n; ++a)
        std::copy_n(&y[a * hidden], hidden, &y_sorted[rows[a] * hidden]);
      DeviceBuffer dy = upload_bf16(y_sorted);
      out.fill_bytes(0xff);
      moe_combine(dy.as<Bf16>(), row_of.as<std::int32_t>(), dids.as<std::int32_t>(), dweights.as<float>(), tokens, k,
                  hidden, out.as<Bf16>(), stream);
      stream.synchronize();
      CHECK(download_bf16(out, tokens * hidden) == want);
    }
}

TEST_CASE("The decode path (moe_gate_up_act, moe_down_sum) follows the bf16 block", "[cuda][moe]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(3004);
  Stream stream;
  for (const auto act : {GatedActivation::silu, GatedActivation::gelu_tanh, GatedActivation::gelu})
    for (const bool normalize : {true, false})
      for (const auto& s : mt::block_shapes()) {
        INFO(mt::act_name(act) << " normalize " << normalize << " tokens " << s.tokens << " experts " << s.experts
                               << " k " << s.k << " hidden " << s.hidden << " inter " << s.inter);
        const auto p = mt::make_problem(rng, s.tokens, s.experts, s.k, s.hidden, s.inter, normalize, act);
        mt::DeviceProblem d(p);
        const std::int64_t n = s.tokens * s.k;
        DeviceBuffer ids(n * 4), weights(n * 4), dact(n * s.inter * 2), out(s.tokens * s.hidden * 2);
        const auto r = mt::route_on_device(p, d, ids, weights, stream);
        const auto want = mt::expected(p, r.ids, r.weights);
        dact.fill_bytes(0xff);
        out.fill_bytes(0xff);
        moe_gate_up_act(act, d.x.as<Bf16>(), d.w_gate_up.as<Bf16>(), ids.as<std::int32_t>(), s.tokens, s.k, s.inter,
                        s.hidden, dact.as<Bf16>(), mt::multiprocessors(), stream);
        moe_down_sum(dact.as<Bf16>(), d.w_down.as<Bf16>(), ids.as<std::int32_t>(), weights.as<float>(), s.tokens, s.k,
                     s.hidden, s.inter, out.as<Bf16>(), mt::multiprocessors(), stream);
        stream.synchronize();
        mt::check_close(download_bf16(dact, n * s.inter), want.act, want.act_scale, "act");
        mt::check_close(download_bf16(out, s.tokens * s.hidden), want.out, want.out_scale, "out");
      }
}

TEST_CASE("The prefill path (moe_group, gather_rows, grouped_linear, moe_combine) follows the bf16 block",
          "[cuda][moe]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(3005);
  Stream stream;
  Gemm gemm;
  auto shapes = mt::block_shapes();
  shapes.push_back({300, 16, 4, 256, 96});  // groups of ~75 rows
  for (const auto act : {GatedActivation::silu, GatedActivation::gelu_tanh, GatedActivation::gelu})
    for (const bool normalize : {true, false})
      for (const auto& s : shapes) {
        INFO(mt::act_name(act) << " normalize " << normalize << " tokens " << s.tokens << " experts " << s.experts
                               << " k " << s.k << " hidden " << s.hidden << " inter " << s.inter);
        const auto p = mt::make_problem(rng, s.tokens, s.experts, s.k, s.hidden, s.inter, normalize, act);
        mt::DeviceProblem d(p);
        const std::int64_t n = s.tokens * s.k, H = s.hidden, I = s.inter;
        DeviceBuffer ids(n * 4), weights(n * 4), counts(s.experts * 4), offsets((s.experts + 1) * 4),
            row_of(n * 4), token_of(n * 4);
        DeviceBuffer xs(n * H * 2), gate_up(n * 2 * I * 2), act_rows(n * I * 2), y(n * H * 2), out(s.tokens * H * 2);
        const auto r = mt::route_on_device(p, d, ids, weights, stream);
        const auto want = mt::expected(p, r.ids, r.weights);
        moe_group(ids.as<std::int32_t>(), s.tokens, s.k, s.experts, counts.as<std::int32_t>(),
                  offsets.as<std::int32_t>(), row_of.as<std::int32_t>(), token_of.as<std::int32_t>(), stream);
        stream.synchronize();
        const auto host_counts = download<std::int32_t>(counts, s.experts);
        REQUIRE(host_counts == want.counts);
        const std::int64_t rows = std::accumulate(host_counts.begin(), host_counts.end(), std::int64_t{0});
        REQUIRE(rows == n);
        out.fill_bytes(0xff);
        gather_rows(d.x.as<Bf16>(), token_of.as<std::int32_t>(), rows, H, xs.as<Bf16>(), stream);
        gemm.grouped_linear(xs.as<Bf16>(), d.w_gate_up.as<Bf16>(), 2 * I * H, host_counts.data(), s.experts,
                            gate_up.as<Bf16>(), 2 * I, H, stream);
        act_and_mul(act, gate_up.as<Bf16>(), act_rows.as<Bf16>(), rows, I, stream);
        gemm.grouped_linear(act_rows.as<Bf16>(), d.w_down.as<Bf16>(), H * I, host_counts.data(), s.experts,
                            y.as<Bf16>(), H, I, stream);
        moe_combine(y.as<Bf16>(), row_of.as<std::int32_t>(), ids.as<std::int32_t>(), weights.as<float>(), s.tokens,
                    s.k, H, out.as<Bf16>(), stream);
        stream.synchronize();
        // The activations, moved back from sorted rows to assignments.
        const auto sorted = download_bf16(act_rows, n * I);
        const auto row = download<std::int32_t>(row_of, n);
        std::vector<float> got(n * I);
        for (std::int64_t a = 0; a < n; ++a) std::copy_n(&sorted[row[a] * I], I, &got[a * I]);
        mt::check_close(got, want.act, want.act_scale, "act");
        mt::check_close(download_bf16(out, s.tokens * H), want.out, want.out_scale, "out");
      }
}

TEST_CASE("Gemm::grouped_linear multiplies each group's rows by its own weight", "[cuda][moe]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(3006);
  Gemm gemm;
  Stream s1, s2;
  const std::int64_t n = 72, k = 136, stride = n * k + 64;  // the groups' weights apart by more than one
  const int groups = 70;
  const auto w = random_bf16_values(rng, groups * stride);
  DeviceBuffer dw = upload_bf16(w);
  // Several calls in flight on two streams (the pointer staging is reused every other call), a
  // group count that grows the staging, and empty groups.
  std::vector<std::vector<std::int32_t>> calls = {{3, 0, 17, 1, 0, 40}, {0, 5}, std::vector<std::int32_t>(groups, 1),
                                                  {2, 2, 0, 0, 0, 9, 1}};
  calls[2][5] = 0;
  calls[2][69] = 33;
  struct Run {
    std::vector<float> x;
    DeviceBuffer dx, dy;
    std::int64_t rows;
  };
  std::vector<Run> runs;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const auto& counts = calls[c];
    const std::int64_t rows = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    Run run{random_bf16_values(rng, rows * k), DeviceBuffer(), DeviceBuffer(rows * n * 2), rows};
    run.dx = upload_bf16(run.x);
    run.dy.fill_bytes(0xff);
    gemm.grouped_linear(run.dx.as<Bf16>(), dw.as<Bf16>(), stride, counts.data(), static_cast<int>(counts.size()),
                        run.dy.as<Bf16>(), n, k, c % 2 ? s2.get() : s1.get());
    runs.push_back(std::move(run));
  }
  s1.synchronize();
  s2.synchronize();
  for (std::size_t c = 0; c < calls.size(); ++c) {
    INFO("call " << c);
    const auto& run = runs[c];
    std::vector<float> want(run.rows * n);
    std::int64_t row = 0;
    for (std::size_t g = 0; g < calls[c].size(); ++g)
      for (std::int32_t i = 0; i < calls[c][g]; ++i, ++row)
        for (std::int64_t j = 0; j < n; ++j) {
          double acc = 0.0;
          for (std::int64_t p = 0; p < k; ++p)
            acc += double(run.x[row * k + p]) * double(w[g * stride + j * k + p]);
          want[row * n + j] = static_cast<float>(acc);
        }
    const auto cmp = compare(download_bf16(run.dy, run.rows * n), want, 1e-4 * std::sqrt(double(k)), 2 * kBf16Eps);
    INFO(cmp.str());
    CHECK(cmp.ok());
  }
  // Nothing to do: no launch, y untouched.
  const std::vector<std::int32_t> none(4, 0);
  gemm.grouped_linear(nullptr, dw.as<Bf16>(), stride, none.data(), 4, nullptr, n, k, s1);
  gemm.grouped_linear(nullptr, dw.as<Bf16>(), stride, nullptr, 0, nullptr, n, k, s1);
  const std::vector<std::int32_t> negative = {1, -1};
  CHECK_THROWS_AS(gemm.grouped_linear(runs[0].dx.as<Bf16>(), dw.as<Bf16>(), stride, negative.data(), 2,
                                      runs[0].dy.as<Bf16>(), n, k, s1),
                  std::invalid_argument);
  // Not capturable: refused before anything is enqueued.
  ZOO_CUDA_CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
  CHECK_THROWS_AS(gemm.grouped_linear(runs[0].dx.as<Bf16>(), dw.as<Bf16>(), stride, calls[0].data(), 6,
                                      runs[0].dy.as<Bf16>(), n, k, s1),
                  std::logic_error);
  cudaGraph_t graph = nullptr;
  ZOO_CUDA_CHECK(cudaStreamEndCapture(s1, &graph));
  if (graph) ZOO_CUDA_CHECK(cudaGraphDestroy(graph));
}

TEST_CASE("The decode path replays in a CUDA graph with new inputs", "[cuda][moe]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(3007);
  Stream stream;
  const std::int64_t tokens = 3, hidden = 256, inter = 96;
  const int experts = 16, k = 4;
  const std::int64_t n = tokens * k;
  auto p = mt::make_problem(rng, tokens, experts, k, hidden, inter, true, GatedActivation::silu);
  mt::DeviceProblem d(p);  // the buffers the graph is captured on
  DeviceBuffer ids(n * 4), weights(n * 4), act(n * inter * 2), out(tokens * hidden * 2), direct(tokens * hidden * 2);
  const auto issue = [&](Bf16* y) {
    moe_route(d.logits.as<float>(), tokens, experts, k, true, ids.as<std::int32_t>(), weights.as<float>(), stream);
    moe_gate_up_act(GatedActivation::silu, d.x.as<Bf16>(), d.w_gate_up.as<Bf16>(), ids.as<std::int32_t>(), tokens, k,
                    inter, hidden, act.as<Bf16>(), mt::multiprocessors(), stream);
    moe_down_sum(act.as<Bf16>(), d.w_down.as<Bf16>(), ids.as<std::int32_t>(), weights.as<float>(), tokens, k, hidden,
                 inter, y, mt::multiprocessors(), stream);
  };
  CudaGraph graph;
  graph.begin_capture(stream);
  issue(out.as<Bf16>());
  graph.end_capture(stream);
  for (int round = 0; round < 3; ++round) {
    INFO("replay " << round);
    // New tokens, new routing and new expert weights in the same buffers.
    p = mt::make_problem(rng, tokens, experts, k, hidden, inter, true, GatedActivation::silu);
    d.x.upload(to_bf16(p.x).data(), p.x.size() * 2);
    d.w_gate_up.upload(to_bf16(p.w_gate_up).data(), p.w_gate_up.size() * 2);
    d.w_down.upload(to_bf16(p.w_down).data(), p.w_down.size() * 2);
    d.logits.upload(p.logits.data(), p.logits.size() * 4);
    out.fill_bytes(0xff);
    graph.launch(stream);
    stream.synchronize();
    const auto got = download_bf16(out, tokens * hidden);
    const mt::Routing r{download<std::int32_t>(ids, n), download<float>(weights, n)};
    mt::check_routing(r.ids, r.weights, mt::route_reference(p.logits, tokens, experts, k, true));
    const auto want = mt::expected(p, r.ids, r.weights);
    mt::check_close(got, want.out, want.out_scale, "graph out");
    // The same launches outside the graph give the same bits (the kernels are deterministic).
    direct.fill_bytes(0xff);
    issue(direct.as<Bf16>());
    stream.synchronize();
    CHECK(download_bf16(direct, tokens * hidden) == got);
  }
}

TEST_CASE("The MoE ops refuse bad arguments", "[cuda][moe]") {
  // Checked before anything reaches the device: runs without a GPU too.
  const auto* aligned = reinterpret_cast<const Bf16*>(std::uintptr_t{256});
  const auto* misaligned = reinterpret_cast<const Bf16*>(std::uintptr_t{258});
  auto* out = reinterpret_cast<Bf16*>(std::uintptr_t{512});
  const cudaStream_t s = nullptr;
  CHECK_THROWS_AS(moe_route(nullptr, 1, kMoeMaxExperts + 1, 2, true, nullptr, nullptr, s), std::invalid_argument);
  CHECK_THROWS_AS(moe_route(nullptr, 1, 0, 1, true, nullptr, nullptr, s), std::invalid_argument);
  CHECK_THROWS_AS(moe_route(nullptr, 1, 64, kMoeMaxTopK + 1, true, nullptr, nullptr, s), std::invalid_argument);
  CHECK_THROWS_AS(moe_route(nullptr, 1, 8, 9, true, nullptr, nullptr, s), std::invalid_argument);
  CHECK_THROWS_AS(moe_route(nullptr, 1, 8, 0, true, nullptr, nullptr, s), std::invalid_argument);
  CHECK_THROWS_AS(moe_route(nullptr, -1, 8, 2, true, nullptr, nullptr, s), std::invalid_argument);
  const auto gate_up = [&](const Bf16* x, std::int64_t hidden, int k) {
    moe_gate_up_act(GatedActivation::silu, x, aligned, nullptr, 1, k, 32, hidden, out, 132, s);
  };
  CHECK_THROWS_AS(gate_up(aligned, 12, 2), std::invalid_argument);
  CHECK_THROWS_AS(gate_up(misaligned, 64, 2), std::invalid_argument);
  CHECK_THROWS_AS(gate_up(aligned, 64, 0), std::invalid_argument);
  CHECK_THROWS_AS(gate_up(aligned, 64, kMoeMaxTopK + 1), std::invalid_argument);
  const auto down = [&](const Bf16* a, std::int64_t inter, int k) {
    moe_down_sum(a, aligned, nullptr, nullptr, 1, k, 64, inter, out, 132, s);
  };
  CHECK_THROWS_AS(down(aligned, 12, 2), std::invalid_argument);
  CHECK_THROWS_AS(down(misaligned, 64, 2), std::invalid_argument);
  CHECK_THROWS_AS(down(aligned, 64, kMoeMaxTopK + 1), std::invalid_argument);
  CHECK_THROWS_AS(moe_group(nullptr, 1, 2, 0, nullptr, nullptr, nullptr, nullptr, s), std::invalid_argument);
  CHECK_THROWS_AS(moe_group(nullptr, 1, 2, kMoeMaxExperts + 1, nullptr, nullptr, nullptr, nullptr, s),
                  std::invalid_argument);
  CHECK_THROWS_AS(moe_group(nullptr, kMoeMaxAssignments, 2, 8, nullptr, nullptr, nullptr, nullptr, s),
                  std::invalid_argument);
  CHECK_THROWS_AS(moe_combine(aligned, nullptr, nullptr, nullptr, 1, 0, 64, out, s), std::invalid_argument);
  CHECK_THROWS_AS(gather_rows(aligned, nullptr, -1, 64, out, s), std::invalid_argument);
}
