// Embedding, RMSNorm, q/k norm + RoPE + cache write, activations, conversions and per-row
// reductions against the CPU reference ops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

#include "cuda/cuda_test_util.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/cuda/ops.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;
namespace cpu = zoo::kernels::cpu;
using zoo::round_to_bf16;

namespace {

constexpr double kNormRtol = 4 * kBf16Eps;

// transformers' bf16 RMSNorm from the float32 reference: normalize with a unit weight (float32),
// round to bf16, multiply by the bf16 weight, round again.
std::vector<float> rms_norm_bf16_ref(const std::vector<float>& x, const std::vector<float>& w, std::int64_t rows,
                                     std::int64_t dim, float eps) {
  std::vector<float> ones(dim, 1.0f), y(x.size());
  cpu::rms_norm(x.data(), ones.data(), y.data(), rows, dim, eps);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = round_to_bf16(w[i % dim] * round_to_bf16(y[i]));
  return y;
}

}  // namespace

TEST_CASE("embedding_gather copies table rows and scatter_rows_f32 overrides rows", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1001);
  Stream stream;
  for (std::int64_t hidden : {64, 100}) {  // vectorized and scalar paths
    INFO("hidden " << hidden);
    const std::int64_t vocab = 1000, tokens = 65;
    const auto table = random_bf16_values(rng, vocab * hidden);
    std::vector<std::int32_t> ids(tokens);
    std::uniform_int_distribution<std::int32_t> pick(0, vocab - 1);
    for (auto& id : ids) id = pick(rng);
    ids[3] = static_cast<std::int32_t>(vocab);  // out of range: zero row
    DeviceBuffer dtable = upload_bf16(table), dids = upload(ids), out(tokens * hidden * sizeof(Bf16));
    out.fill_bytes(0xff);
    embedding_gather(dtable.as<Bf16>(), vocab, hidden, dids.as<std::int32_t>(), tokens, out.as<Bf16>(), stream);
    const std::vector<std::int32_t> positions = {0, 10, 64};
    const auto rows = random_bf16_values(rng, positions.size() * hidden, -3.0f, 3.0f);
    std::vector<float> rows_f32(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) rows_f32[i] = rows[i] * 1.001f;  // not bf16-exact: rounds
    DeviceBuffer dpos = upload(positions), drows = upload(rows_f32);
    scatter_rows_f32(dpos.as<std::int32_t>(), drows.as<float>(), 3, hidden, out.as<Bf16>(), stream);
    stream.synchronize();
    const auto got = download_bf16(out, tokens * hidden);
    for (std::int64_t t = 0; t < tokens; ++t) {
      const auto it = std::find(positions.begin(), positions.end(), t);
      for (std::int64_t i = 0; i < hidden; ++i) {
        float want;
        if (it != positions.end())
          want = round_to_bf16(rows_f32[(it - positions.begin()) * hidden + i]);
        else if (t == 3)
          want = 0.0f;
        else
          want = table[ids[t] * hidden + i];
        REQUIRE(got[t * hidden + i] == want);
      }
    }
  }
}

TEST_CASE("rms_norm and add_rms_norm follow transformers' bf16 rounding", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::uint32_t seed = 1002;  // fixed: a failure reproduces
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Stream stream;
  const float eps = 1e-6f;
  for (std::int64_t dim : {1024, 100, 4096}) {
    for (std::int64_t rows : {1, 7, 65}) {
      INFO("rows " << rows << " dim " << dim);
      const auto x = random_bf16_values(rng, rows * dim, -3.0f, 3.0f);
      const auto w = random_bf16_values(rng, dim, 0.5f, 1.5f);
      const auto r = random_bf16_values(rng, rows * dim, -3.0f, 3.0f);
      DeviceBuffer dx = upload_bf16(x), dw = upload_bf16(w), dy(rows * dim * sizeof(Bf16));
      dy.fill_bytes(0xff);
      rms_norm(dx.as<Bf16>(), dw.as<Bf16>(), dy.as<Bf16>(), rows, dim, eps, stream);
      stream.synchronize();
      // The reference rounds at the same two points; a slightly different float32 sum or rsqrt can
      // flip the inner rounding by one ulp (2^-7), and the outer rounding then adds up to 2^-8:
      // allow 4 * 2^-8 relative.
      auto c = compare(download_bf16(dy, rows * dim), rms_norm_bf16_ref(x, w, rows, dim, eps), 1e-6, kNormRtol);
      INFO("rms_norm: " << c.str());
      CHECK(c.ok());

      // h = bf16(h + x), y = norm(h): h exactly, y as above.
      DeviceBuffer dh = upload_bf16(r);
      add_rms_norm(dh.as<Bf16>(), dx.as<Bf16>(), dw.as<Bf16>(), dy.as<Bf16>(), rows, dim, eps, stream);
      stream.synchronize();
      std::vector<float> h = r;
      cpu::add_inplace(h.data(), x.data(), rows * dim);
      for (auto& v : h) v = round_to_bf16(v);
      CHECK(download_bf16(dh, rows * dim) == h);
      c = compare(download_bf16(dy, rows * dim), rms_norm_bf16_ref(h, w, rows, dim, eps), 1e-6, kNormRtol);
      INFO("add_rms_norm: " << c.str());
      CHECK(c.ok());

      // In place: y == x.
      rms_norm(dx.as<Bf16>(), dw.as<Bf16>(), dx.as<Bf16>(), rows, dim, eps, stream);
      stream.synchronize();
      c = compare(download_bf16(dx, rows * dim), rms_norm_bf16_ref(x, w, rows, dim, eps), 1e-6, kNormRtol);
      CHECK(c.ok());
    }
  }
}

TEST_CASE(
    "rms_norm_split over a row's slices and their gathered sums of squares equals rms_norm of the whole row",
    "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1017);
  Stream stream;
  const float eps = 1e-6f;
  const std::int64_t rows = 5, dim = 512, parts = 4, slice = dim / parts;
  for (const NormWeight kind : {NormWeight::times_w, NormWeight::one_plus}) {
    const auto x = random_bf16_values(rng, rows * dim, -3.0f, 3.0f),
               w = random_bf16_values(rng, dim, 0.5f, 1.5f);
    DeviceBuffer dx = upload_bf16(x), dw = upload_bf16(w), whole(rows * dim * sizeof(Bf16)),
                 split = upload_bf16(x), pieces(parts * rows * sizeof(float));
    rms_norm(dx.as<Bf16>(), dw.as<Bf16>(), whole.as<Bf16>(), rows, dim, eps, stream, kind);
    // Each "rank" p holds columns [p * slice, (p + 1) * slice) of every row (a row stride of dim).
    for (std::int64_t p = 0; p < parts; ++p)
      row_sum_squares(split.as<Bf16>() + p * slice, pieces.as<float>() + p * rows, rows, slice, dim, stream);
    // In place, each slice with its slice of the weight; one part counted twice (a replicated share)
    // is undone by divide_by.
    for (std::int64_t p = 0; p < parts; ++p)
      rms_norm_split(split.as<Bf16>() + p * slice, dw.as<Bf16>() + p * slice, split.as<Bf16>() + p * slice,
                     rows, slice, dim, dim, pieces.as<float>(), static_cast<int>(parts), 1.0f,
                     static_cast<float>(dim), eps, stream, kind);
    stream.synchronize();
    const auto want = download_bf16(whole, rows * dim), got = download_bf16(split, rows * dim);
    std::size_t off = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      off += std::abs(got[i] - want[i]) > 2 * kBf16Eps * std::abs(want[i]) + 1e-6;  // sums in another order
    CHECK(off == 0);
  }
  // A replicated share: the same slice's sum gathered twice, divided by 2, over a whole of one slice.
  const auto x = random_bf16_values(rng, rows * slice, -3.0f, 3.0f),
             w = random_bf16_values(rng, slice, 0.5f, 1.5f);
  DeviceBuffer dx = upload_bf16(x), dw = upload_bf16(w), whole(rows * slice * sizeof(Bf16)),
               split(rows * slice * sizeof(Bf16)), pieces(2 * rows * sizeof(float));
  rms_norm(dx.as<Bf16>(), dw.as<Bf16>(), whole.as<Bf16>(), rows, slice, eps, stream);
  row_sum_squares(dx.as<Bf16>(), pieces.as<float>(), rows, slice, slice, stream);
  row_sum_squares(dx.as<Bf16>(), pieces.as<float>() + rows, rows, slice, slice, stream);
  rms_norm_split(dx.as<Bf16>(), dw.as<Bf16>(), split.as<Bf16>(), rows, slice, slice, slice,
                 pieces.as<float>(), 2, 2.0f, static_cast<float>(slice), eps, stream);
  stream.synchronize();
  const auto want = download_bf16(whole, rows * slice), got = download_bf16(split, rows * slice);
  std::size_t off = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    off += std::abs(got[i] - want[i]) > 2 * kBf16Eps * std::abs(want[i]) + 1e-6;
  CHECK(off == 0);
  CHECK_THROWS_AS(rms_norm_split(dx.as<Bf16>(), dw.as<Bf16>(), split.as<Bf16>(), rows, slice, slice, slice,
                                 pieces.as<float>(), 0, 1.0f, 1.0f, eps, stream),
                  std::invalid_argument);
}

TEST_CASE("norm_add_rms_norm equals rms_norm then add_rms_norm, bitwise", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1003);
  Stream stream;
  const float eps = 1e-6f;
  for (const NormWeight kind : {NormWeight::times_w, NormWeight::one_plus}) {
    for (std::int64_t dim : {1024, 100, 3584}) {
      for (std::int64_t rows : {1, 7}) {
        for (const bool next_weight : {true, false}) {
          INFO("kind " << (kind == NormWeight::one_plus ? "one_plus" : "times_w") << " dim " << dim << " rows " << rows
                       << (next_weight ? "" : " (no next norm: y = h)"));
          const auto x = random_bf16_values(rng, rows * dim, -3.0f, 3.0f);
          const auto w1 = random_bf16_values(rng, dim, 0.5f, 1.5f), w2 = random_bf16_values(rng, dim, 0.5f, 1.5f);
          const auto r = random_bf16_values(rng, rows * dim, -3.0f, 3.0f);
          DeviceBuffer dx = upload_bf16(x), dw1 = upload_bf16(w1), dw2 = upload_bf16(w2);
          DeviceBuffer h_fused = upload_bf16(r), h_pair = upload_bf16(r), tmp(rows * dim * sizeof(Bf16));
          DeviceBuffer y_fused(rows * dim * sizeof(Bf16)), y_pair(rows * dim * sizeof(Bf16));
          y_fused.fill_bytes(0xff);
          const Bf16* next = next_weight ? dw2.as<Bf16>() : nullptr;
          norm_add_rms_norm(dx.as<Bf16>(), dw1.as<Bf16>(), h_fused.as<Bf16>(), next, y_fused.as<Bf16>(), rows, dim, eps,
                            stream, kind);
          rms_norm(dx.as<Bf16>(), dw1.as<Bf16>(), tmp.as<Bf16>(), rows, dim, eps, stream, kind);
          add_rms_norm(h_pair.as<Bf16>(), tmp.as<Bf16>(), next, y_pair.as<Bf16>(), rows, dim, eps, stream, kind);
          stream.synchronize();
          CHECK(download_bf16(h_fused, rows * dim) == download_bf16(h_pair, rows * dim));
          CHECK(download_bf16(y_fused, rows * dim) == download_bf16(y_pair, rows * dim));
          CHECK(download_bf16(dx, rows * dim) == x);  // the sublayer output is left as it was
        }
      }
    }
  }
}

TEST_CASE("qk_norm_rope_cache normalizes, rotates and writes the cache at the right positions", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::uint32_t seed = 1003;  // fixed: a failure reproduces
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Stream stream;
  const float eps = 1e-6f, theta = 1000000.0f;
  struct Case {
    std::int64_t tokens, start;
    int q_heads, kv_heads, head_dim;
    bool packed, device_positions;
  };
  const Case cases[] = {{1, 0, 8, 2, 128, false, false},  {7, 3, 4, 4, 64, true, false},
                        {65, 3000, 16, 2, 128, true, true}, {63, 17, 8, 1, 64, false, true},
                        {3, 40000, 8, 1, 256, false, false}};
  for (const auto& cs : cases) {
    INFO("tokens " << cs.tokens << " start " << cs.start << " heads " << cs.q_heads << "/" << cs.kv_heads << " D "
                   << cs.head_dim << (cs.packed ? " packed" : "") << (cs.device_positions ? " positions" : ""));
    const std::int64_t T = cs.tokens, D = cs.head_dim, Hq = cs.q_heads, Hk = cs.kv_heads;
    const std::int64_t qw = Hq * D, kw = Hk * D;
    const std::int64_t max_pos = cs.start + T + 5;
    // Packed: one [T, (Hq + 2 Hk) D] QKV projection; otherwise three tensors.
    const auto q = random_bf16_values(rng, T * qw, -2.0f, 2.0f), k = random_bf16_values(rng, T * kw, -2.0f, 2.0f),
               v = random_bf16_values(rng, T * kw, -2.0f, 2.0f);
    const auto qnw = random_bf16_values(rng, D, 0.5f, 1.5f), knw = random_bf16_values(rng, D, 0.5f, 1.5f);
    std::vector<float> packed;
    DeviceBuffer dq, dk, dv, dqkv;
    QkNormRopeArgs a;
    if (cs.packed) {
      packed.resize(T * (qw + 2 * kw));
      for (std::int64_t t = 0; t < T; ++t) {
        std::copy_n(&q[t * qw], qw, &packed[t * (qw + 2 * kw)]);
        std::copy_n(&k[t * kw], kw, &packed[t * (qw + 2 * kw) + qw]);
        std::copy_n(&v[t * kw], kw, &packed[t * (qw + 2 * kw) + qw + kw]);
      }
      dqkv = upload_bf16(packed);
      a.q = dqkv.as<Bf16>();
      a.k = a.q + qw;
      a.v = a.q + qw + kw;
      a.q_stride = a.k_stride = a.v_stride = qw + 2 * kw;
    } else {
      dq = upload_bf16(q);
      dk = upload_bf16(k);
      dv = upload_bf16(v);
      a.q = dq.as<Bf16>();
      a.k = dk.as<Bf16>();
      a.v = dv.as<Bf16>();
    }
    std::vector<std::int32_t> positions(T);
    std::vector<std::int64_t> positions64(T);
    for (std::int64_t t = 0; t < T; ++t) positions64[t] = positions[t] = static_cast<std::int32_t>(cs.start + t);
    DeviceBuffer dpos = upload(positions), dqn = upload_bf16(qnw), dkn = upload_bf16(knw);
    DeviceBuffer qout(T * qw * 2), kc(max_pos * kw * 2), vc(max_pos * kw * 2), qnormed(T * qw * 2), knormed(T * kw * 2);
    for (auto* b : {&qout, &kc, &vc, &qnormed, &knormed}) b->fill_bytes(0xff);  // NaN poison
    a.q_norm_weight = dqn.as<Bf16>();
    a.k_norm_weight = dkn.as<Bf16>();
    a.q_out = qout.as<Bf16>();
    a.k_cache = kc.as<Bf16>();
    a.v_cache = vc.as<Bf16>();
    a.q_normed = qnormed.as<Bf16>();
    a.k_normed = knormed.as<Bf16>();
    a.positions = cs.device_positions ? dpos.as<std::int32_t>() : nullptr;
    a.start = cs.device_positions ? 0 : cs.start;
    a.tokens = T;
    a.q_heads = cs.q_heads;
    a.kv_heads = cs.kv_heads;
    a.head_dim = cs.head_dim;
    a.eps = eps;
    a.theta = theta;
    qk_norm_rope_cache(a, stream);
    stream.synchronize();

    // Reference: per-head bf16 RMSNorm, then the float32 RoPE of cpu_ops on the normed values.
    const auto qn_ref = rms_norm_bf16_ref(q, qnw, T * Hq, D, eps), kn_ref = rms_norm_bf16_ref(k, knw, T * Hk, D, eps);
    auto c = compare(download_bf16(qnormed, T * qw), qn_ref, 1e-6, kNormRtol);
    INFO("q_norm: " << c.str());
    CHECK(c.ok());
    c = compare(download_bf16(knormed, T * kw), kn_ref, 1e-6, kNormRtol);
    INFO("k_norm: " << c.str());
    CHECK(c.ok());
    // Use the GPU's normed values as the RoPE input so the check isolates the rotation.
    auto q_rope_ref = download_bf16(qnormed, T * qw), k_rope_ref = download_bf16(knormed, T * kw);
    const auto qn_gpu = q_rope_ref, kn_gpu = k_rope_ref;
    cpu::rope_half_split(q_rope_ref.data(), T, Hq, D, positions64.data(), theta);
    cpu::rope_half_split(k_rope_ref.data(), T, Hk, D, positions64.data(), theta);
    // bf16 cos/sin and the bf16 roundings of both products and of the sum (each <= 2^-8
    // relative) bound each output's error by 3 * 2^-8 (|x1| |cos| + |x2| |sin|) <=
    // 3 * 2^-8 (|x1| + |x2|); |cos| and |sin| are never both 1, which leaves room for float32
    // cos/sin differing in their last bits.
    auto check_rope = [&](const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& in,
                          std::int64_t heads) {
      std::size_t bad = 0;
      double worst = 0.0;
      for (std::int64_t row = 0; row < T * heads; ++row) {
        for (std::int64_t i = 0; i < D; ++i) {
          const std::int64_t p = i < D / 2 ? i : i - D / 2;
          const double mag = std::abs(in[row * D + p]) + std::abs(in[row * D + p + D / 2]);
          const double err = std::abs(got[row * D + i] - want[row * D + i]);
          const double tol = 3.0 * kBf16Eps * mag + 1e-6;
          if (!(err <= tol)) ++bad;
          worst = std::max(worst, err / tol);
        }
      }
      INFO("rope: " << bad << " outside tolerance, worst err/tol " << worst);
      CHECK(bad == 0);
    };
    check_rope(download_bf16(qout, T * qw), q_rope_ref, qn_gpu, Hq);
    const auto kcache = download_bf16(kc, max_pos * kw), vcache = download_bf16(vc, max_pos * kw);
    std::vector<float> k_rows(kcache.begin() + cs.start * kw, kcache.begin() + (cs.start + T) * kw);
    check_rope(k_rows, k_rope_ref, kn_gpu, Hk);
    std::size_t v_wrong = 0, touched = 0;
    for (std::int64_t p = 0; p < max_pos; ++p) {
      const bool written = p >= cs.start && p < cs.start + T;
      for (std::int64_t i = 0; i < kw; ++i) {
        if (written) {
          v_wrong += vcache[p * kw + i] != v[(p - cs.start) * kw + i];
        } else {
          // Rows outside the tokens' positions keep their NaN poison.
          touched += !std::isnan(vcache[p * kw + i]) || !std::isnan(kcache[p * kw + i]);
        }
      }
    }
    CHECK(v_wrong == 0);
    CHECK(touched == 0);
  }
}

TEST_CASE("qk_norm_rope_cache without q/k norm: a scaled RoPE table and attention scaling", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1004);
  Stream stream;
  const std::int64_t T = 5, start = 300, D = 64, Hq = 4, Hk = 2, qw = Hq * D, kw = Hk * D, cols = qw + 2 * kw;
  const std::int64_t max_pos = start + T;
  const auto qkv = random_bf16_values(rng, T * cols, -2.0f, 2.0f);
  // A table no theta produces (every other frequency divided by 8), and cos/sin scaled.
  std::vector<float> inv_freq = cpu::rope_default_inv_freq(D, 500000.0);
  for (std::size_t i = 1; i < inv_freq.size(); i += 2) inv_freq[i] /= 8;
  const float scaling = 1.125f;
  DeviceBuffer dqkv = upload_bf16(qkv), dfreq = upload(inv_freq);
  DeviceBuffer qout(T * qw * 2), kc(max_pos * kw * 2), vc(max_pos * kw * 2);
  QkNormRopeArgs a;
  a.q = dqkv.as<Bf16>();
  a.k = a.q + qw;
  a.v = a.q + qw + kw;
  a.q_stride = a.k_stride = a.v_stride = cols;
  a.inv_freq = dfreq.as<float>();
  a.attention_scaling = scaling;
  a.q_out = qout.as<Bf16>();
  a.k_cache = kc.as<Bf16>();
  a.v_cache = vc.as<Bf16>();
  a.start = start;
  a.tokens = T;
  a.q_heads = Hq;
  a.kv_heads = Hk;
  a.head_dim = D;
  qk_norm_rope_cache(a, stream);
  stream.synchronize();

  // Reference: the float32 RoPE of cpu_ops on the q and k slices; v is copied as is.
  std::vector<float> q(T * qw), k(T * kw), v(T * kw);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < cols; ++i) {
      const float x = qkv[t * cols + i];
      if (i < qw) q[t * qw + i] = x;
      else if (i < qw + kw) k[t * kw + i - qw] = x;
      else v[t * kw + i - qw - kw] = x;
    }
  std::vector<std::int64_t> positions(T);
  for (std::int64_t t = 0; t < T; ++t) positions[t] = start + t;
  auto q_ref = q, k_ref = k;
  cpu::rope_half_split(q_ref.data(), T, Hq, D, positions.data(), inv_freq.data(), scaling);
  cpu::rope_half_split(k_ref.data(), T, Hk, D, positions.data(), inv_freq.data(), scaling);
  // Same bound as above (bf16 cos/sin and three roundings), scaled by the attention factor.
  auto bad_count = [&](const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& in) {
    std::size_t bad = 0;
    for (std::size_t row = 0; row < in.size() / D; ++row)
      for (std::int64_t i = 0; i < D; ++i) {
        const std::int64_t p = i < D / 2 ? i : i - D / 2;
        const double mag = scaling * (std::abs(in[row * D + p]) + std::abs(in[row * D + p + D / 2]));
        if (!(std::abs(got[row * D + i] - want[row * D + i]) <= 3.0 * kBf16Eps * mag + 1e-6)) ++bad;
      }
    return bad;
  };
  CHECK(bad_count(download_bf16(qout, T * qw), q_ref, q) == 0);
  const auto kcache = download_bf16(kc, max_pos * kw), vcache = download_bf16(vc, max_pos * kw);
  CHECK(bad_count(std::vector<float>(kcache.begin() + start * kw, kcache.end()), k_ref, k) == 0);
  CHECK(std::equal(v.begin(), v.end(), vcache.begin() + start * kw));
  // Without a table the kernel still derives the default one from theta; a table is what it uses.
  a.inv_freq = nullptr;
  a.theta = 500000.0f;
  qk_norm_rope_cache(a, stream);
  stream.synchronize();
  CHECK(bad_count(download_bf16(qout, T * qw), q_ref, q) > 0);
}

TEST_CASE("silu_and_mul matches cpu::silu_mul", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1004);
  Stream stream;
  for (std::int64_t inter : {256, 100}) {
    for (std::int64_t tokens : {1, 7, 65}) {
      INFO("tokens " << tokens << " inter " << inter);
      const auto gu = random_bf16_values(rng, tokens * 2 * inter, -6.0f, 6.0f);
      std::vector<float> g(tokens * inter), u(tokens * inter), ref(tokens * inter);
      for (std::int64_t t = 0; t < tokens; ++t) {
        std::copy_n(&gu[t * 2 * inter], inter, &g[t * inter]);
        std::copy_n(&gu[t * 2 * inter + inter], inter, &u[t * inter]);
      }
      cpu::silu_mul(g.data(), u.data(), ref.data(), tokens * inter);
      DeviceBuffer dgu = upload_bf16(gu), out(tokens * inter * 2);
      out.fill_bytes(0xff);
      silu_and_mul(dgu.as<Bf16>(), out.as<Bf16>(), tokens, inter, stream);
      stream.synchronize();
      // Two bf16 roundings (silu, product): <= (2 + 2^-8) 2^-8 relative; allow 3 * 2^-8.
      auto c = compare(download_bf16(out, tokens * inter), ref, 1e-6, 3 * kBf16Eps);
      INFO("packed: " << c.str());
      CHECK(c.ok());
      DeviceBuffer dg = upload_bf16(g), du = upload_bf16(u);
      out.fill_bytes(0xff);
      silu_and_mul(dg.as<Bf16>(), inter, du.as<Bf16>(), inter, out.as<Bf16>(), tokens, inter, stream);
      stream.synchronize();
      c = compare(download_bf16(out, tokens * inter), ref, 1e-6, 3 * kBf16Eps);
      INFO("separate: " << c.str());
      CHECK(c.ok());
    }
  }
}

TEST_CASE("add and dtype conversions are exact", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1005);
  Stream stream;
  for (std::int64_t n : {1, 4096, 4099}) {
    INFO("n " << n);
    const auto a = random_bf16_values(rng, n, -100.0f, 100.0f), b = random_bf16_values(rng, n, -1.0f, 1.0f);
    std::vector<float> ref = a;
    cpu::add_inplace(ref.data(), b.data(), n);
    DeviceBuffer da = upload_bf16(a), db = upload_bf16(b), out(n * 2);
    add(da.as<Bf16>(), db.as<Bf16>(), out.as<Bf16>(), n, stream);
    stream.synchronize();
    auto got = download_bf16(out, n);
    for (std::int64_t i = 0; i < n; ++i) REQUIRE(got[i] == round_to_bf16(ref[i]));

    // float32: exact sums.
    std::vector<float> fa(n), fb(n);
    std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
    for (std::int64_t i = 0; i < n; ++i) {
      fa[i] = dist(rng);
      fb[i] = dist(rng);
    }
    std::vector<float> fref = fa;
    cpu::add_inplace(fref.data(), fb.data(), n);
    DeviceBuffer dfa = upload(fa), dfb = upload(fb), fout(n * 4);
    add(dfa.as<float>(), dfb.as<float>(), fout.as<float>(), n, stream);
    stream.synchronize();
    CHECK(download<float>(fout, n) == fref);

    // f32 -> bf16 (round to nearest even, specials kept) and back.
    std::vector<float> specials = fa;
    specials[0] = std::numeric_limits<float>::quiet_NaN();
    if (n > 3) {
      specials[1] = std::numeric_limits<float>::infinity();
      specials[2] = -0.0f;
      specials[3] = 1.0f + 1.0f / 256.0f;  // a tie: rounds to even (1.0)
    }
    DeviceBuffer ds = upload(specials), bout(n * 2), fback(n * 4);
    f32_to_bf16(ds.as<float>(), bout.as<Bf16>(), n, stream);
    bf16_to_f32(bout.as<Bf16>(), fback.as<float>(), n, stream);
    stream.synchronize();
    const auto bits = download<Bf16>(bout, n);
    const auto back = download<float>(fback, n);
    for (std::int64_t i = 0; i < n; ++i) {
      if (std::isnan(specials[i])) {
        REQUIRE(std::isnan(back[i]));
        continue;
      }
      REQUIRE(bits[i].bits == zoo::f32_to_bf16(specials[i]));
      REQUIRE(back[i] == zoo::bf16_to_f32(bits[i].bits));
    }
  }
}

TEST_CASE("argmax_rows, log_softmax_rows and top_k_rows match the CPU reference", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::uint32_t seed = 1006;  // fixed: a failure reproduces
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Stream stream;
  for (std::int64_t n : {1000, 8192, 151936}) {
    for (bool ties : {false, true}) {
      const std::int64_t rows = 3;
      INFO("n " << n << (ties ? " with ties" : ""));
      // Ties: integer-valued logits, so many entries share the top values (ranking by index).
      std::vector<float> x(rows * n);
      std::uniform_real_distribution<float> dist(-20.0f, 20.0f);
      std::uniform_int_distribution<int> small(0, 40);
      for (auto& v : x) v = ties ? static_cast<float>(small(rng)) : round_to_bf16(dist(rng));
      if (!ties) x[n + 5] = x[n + 7] = 25.0f;  // row 1: a tie at the maximum
      for (bool as_bf16 : {false, true}) {
        INFO((as_bf16 ? "bf16 input" : "f32 input"));
        DeviceBuffer dx = as_bf16 ? upload_bf16(x) : upload(x);  // x is bf16-exact either way
        DeviceBuffer am(rows * 4), ls(rows * n * 4);
        if (as_bf16) {
          argmax_rows(dx.as<Bf16>(), rows, n, am.as<std::int32_t>(), stream);
          log_softmax_rows(dx.as<Bf16>(), ls.as<float>(), rows, n, stream);
        } else {
          argmax_rows(dx.as<float>(), rows, n, am.as<std::int32_t>(), stream);
          log_softmax_rows(dx.as<float>(), ls.as<float>(), rows, n, stream);
        }
        stream.synchronize();
        const auto got_am = download<std::int32_t>(am, rows);
        const auto got_ls = download<float>(ls, rows * n);
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::span<const float> row(&x[r * n], static_cast<std::size_t>(n));
          CHECK(got_am[r] == cpu::argmax(row));
          std::vector<float> ref(n);
          cpu::log_softmax(row.data(), ref.data(), n);
          const std::vector<float> got(got_ls.begin() + r * n, got_ls.begin() + (r + 1) * n);
          const auto c = compare(got, ref, 2e-5, 1e-6);  // float32 exp/log vs libm
          INFO("log_softmax row " << r << ": " << c.str());
          CHECK(c.ok());
        }
        for (int k : {1, 5, 50, 64, 300}) {
          INFO("k " << k);
          DeviceBuffer idx(rows * k * 4), val(rows * k * 4), ws(std::max<std::size_t>(1, top_k_workspace_bytes(rows, n, k)));
          if (as_bf16)
            top_k_rows(dx.as<Bf16>(), rows, n, k, idx.as<std::int32_t>(), val.as<float>(), ws.data(), ws.size(), stream);
          else
            top_k_rows(dx.as<float>(), rows, n, k, idx.as<std::int32_t>(), val.as<float>(), ws.data(), ws.size(), stream);
          stream.synchronize();
          const auto gi = download<std::int32_t>(idx, rows * k);
          const auto gv = download<float>(val, rows * k);
          for (std::int64_t r = 0; r < rows; ++r) {
            const std::span<const float> row(&x[r * n], static_cast<std::size_t>(n));
            std::vector<std::int64_t> want(k);
            cpu::top_k(row, k, want.data());
            for (int j = 0; j < k; ++j) {
              REQUIRE(gi[r * k + j] == want[j]);
              REQUIRE(gv[r * k + j] == row[want[j]]);
            }
          }
        }
      }
    }
  }
  // NaN ranks first, like torch.argmax and the CPU reference.
  std::vector<float> x(300, 1.0f);
  x[200] = std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer dx = upload(x), am(4);
  argmax_rows(dx.as<float>(), 1, 300, am.as<std::int32_t>(), stream);
  stream.synchronize();
  CHECK(download<std::int32_t>(am, 1)[0] == 200);
}
