// cuBLASLt linear layers against cpu::linear on the same (bf16-exact) inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

#include "cuda/cuda_test_util.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/cuda/gemm.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;
namespace cpu = zoo::kernels::cpu;

TEST_CASE("Gemm matches cpu::linear for bf16 and float32 outputs, with and without accumulation", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::uint32_t seed = 1007;  // fixed: a failure reproduces
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Gemm gemm;
  gemm.set_gemv_max_rows(0);  // the cuBLASLt path for every m here; gemv_test.cpp covers the other
  Stream stream;
  struct Shape {
    std::int64_t m, n, k;
  };
  // Awkward row counts (1, 7, 63, 65, 4097) and widths that are not multiples of the tiles.
  const Shape shapes[] = {{1, 256, 512}, {7, 96, 64}, {63, 130, 72}, {65, 1000, 1024}, {4097, 264, 136}, {3, 17, 40}};
  for (const auto& s : shapes) {
    INFO("m=" << s.m << " n=" << s.n << " k=" << s.k);
    const auto x = random_bf16_values(rng, s.m * s.k), w = random_bf16_values(rng, s.n * s.k);
    const auto y0 = random_bf16_values(rng, s.m * s.n, -4.0f, 4.0f);
    std::vector<float> ref(s.m * s.n);
    cpu::linear(x.data(), w.data(), ref.data(), s.m, s.n, s.k);
    DeviceBuffer dx = upload_bf16(x), dw = upload_bf16(w);

    // bf16 out: the float32 sum rounded once (<= 2^-8 relative; allowed 2^-7). |y| ~ sqrt(k)/3,
    // so allow 1e-4 * sqrt(k) absolute for the summation order.
    const double atol = 1e-4 * std::sqrt(static_cast<double>(s.k));
    DeviceBuffer dy(s.m * s.n * sizeof(Bf16));
    dy.fill_bytes(0xff);  // NaN poison: every element must be written
    gemm.linear(dx.as<Bf16>(), dw.as<Bf16>(), dy.as<Bf16>(), s.m, s.n, s.k, stream);
    stream.synchronize();
    auto c = compare(download_bf16(dy, s.m * s.n), ref, atol, 2 * kBf16Eps);
    INFO("bf16 out: " << c.str());
    CHECK(c.ok());
    CHECK(c.rel_l2() < 4e-3);

    // float32 out: only the summation order differs.
    DeviceBuffer df(s.m * s.n * sizeof(float));
    df.fill_bytes(0xff);
    gemm.linear(dx.as<Bf16>(), dw.as<Bf16>(), df.as<float>(), s.m, s.n, s.k, stream);
    stream.synchronize();
    c = compare(download<float>(df, s.m * s.n), ref, atol, 1e-5);
    INFO("f32 out: " << c.str());
    CHECK(c.ok());
    CHECK(c.rel_l2() < 1e-5);

    // Accumulate (residual add): y = y0 + x w^T. cuBLASLt's bf16 epilogue was measured to round
    // the product before the add (errors of two roundings, as transformers' bf16(bf16(p) + h)),
    // so the bound is 2^-8 (2 |p| + |y0|): allow 2^-7 (|p| + |y0|).
    DeviceBuffer dacc = upload_bf16(y0);
    gemm.linear(dx.as<Bf16>(), dw.as<Bf16>(), dacc.as<Bf16>(), s.m, s.n, s.k, stream, /*accumulate=*/true);
    stream.synchronize();
    std::vector<float> ref_acc = ref, scale(ref.size());
    cpu::add_inplace(ref_acc.data(), y0.data(), s.m * s.n);
    for (std::size_t i = 0; i < scale.size(); ++i) scale[i] = std::abs(ref[i]) + std::abs(y0[i]);
    c = compare_scaled(download_bf16(dacc, s.m * s.n), ref_acc, scale, atol, 2 * kBf16Eps);
    INFO("bf16 accumulate: " << c.str());
    CHECK(c.ok());
  }
  // One plan per (shape, output type) [+ alignment]: 6 shapes x 2 output types.
  CHECK(gemm.cached_plans() >= 12);
  const auto before = gemm.cached_plans();
  {
    DeviceBuffer dx(7 * 64 * 2), dw(96 * 64 * 2), dy(7 * 96 * 2);
    gemm.linear(dx.as<Bf16>(), dw.as<Bf16>(), dy.as<Bf16>(), 7, 96, 64, stream);
    stream.synchronize();
  }
  CHECK(gemm.cached_plans() == before);  // the shape was planned already
}

TEST_CASE("Gemm is capturable in a CUDA graph", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1008);
  const std::int64_t m = 5, n = 384, k = 256;
  const auto x = random_bf16_values(rng, m * k), w = random_bf16_values(rng, n * k);
  DeviceBuffer dx = upload_bf16(x), dw = upload_bf16(w), dy(m * n * sizeof(float));
  Gemm gemm;
  gemm.set_gemv_max_rows(0);  // the cuBLASLt path (m = 5 takes it by default too; this pins it)
  Stream stream;
  gemm.linear(dx.as<Bf16>(), dw.as<Bf16>(), dy.as<float>(), m, n, k, stream);  // plans outside the capture
  stream.synchronize();
  dy.fill_bytes(0);
  CudaGraph graph;
  graph.begin_capture(stream);
  gemm.linear(dx.as<Bf16>(), dw.as<Bf16>(), dy.as<float>(), m, n, k, stream);
  graph.end_capture(stream);
  graph.launch(stream);
  stream.synchronize();
  std::vector<float> ref(m * n);
  cpu::linear(x.data(), w.data(), ref.data(), m, n, k);
  const auto c = compare(download<float>(dy, m * n), ref, 1e-3, 1e-5);
  INFO(c.str());
  CHECK(c.ok());
}

TEST_CASE("Gemm::linear_bias adds the bias before the single rounding, at every m", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1011);
  Gemm gemm;  // default GEMV limit: m = 1 would take the GEMV without a bias
  Stream stream;
  for (std::int64_t m : {1, 5, 64}) {
    const std::int64_t n = 264, k = 512;
    INFO("m=" << m);
    const auto x = random_bf16_values(rng, m * k), w = random_bf16_values(rng, n * k);
    // A bias much larger than the product: rounding the product first would be visible.
    const auto bias = random_bf16_values(rng, n, 40.0f, 60.0f);
    std::vector<float> ref(m * n);
    cpu::linear(x.data(), w.data(), ref.data(), m, n, k);
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) ref[r * n + c] += bias[c];
    DeviceBuffer dx = upload_bf16(x), dw = upload_bf16(w), db = upload_bf16(bias), dy(m * n * sizeof(Bf16));
    dy.fill_bytes(0xff);
    gemm.linear_bias(dx.as<Bf16>(), dw.as<Bf16>(), db.as<Bf16>(), dy.as<Bf16>(), m, n, k, stream);
    stream.synchronize();
    // One rounding of the biased sum: within half a bf16 step of it (plus summation-order noise).
    const auto got = download_bf16(dy, m * n);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(std::abs(got[i] - ref[i]) <= 0.5 * kBf16Eps * 2 * std::abs(ref[i]) + 1e-3)) ++bad;
    CHECK(bad == 0);
    // Without a bias it is plain linear().
    gemm.linear_bias(dx.as<Bf16>(), dw.as<Bf16>(), nullptr, dy.as<Bf16>(), m, n, k, stream);
    stream.synchronize();
    const auto plain = download_bf16(dy, m * n);
    CHECK(std::abs(plain[0] - (ref[0] - bias[0])) < 0.1);
  }
}

TEST_CASE("Gemm in batch-invariant mode gives every row bitwise the same at any m and any offset", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1013);
  Stream stream;
  Gemm gemm;
  gemm.set_batch_invariant(true);
  CHECK(gemm.batch_invariant());
  const std::int64_t total = 600;
  struct Shape {
    std::int64_t n, k;
  };
  // A fixture's width and a 7-8B model's (the shapes whose heuristic choice differs most with m).
  for (const Shape s : {Shape{96, 64}, Shape{4096, 4096}, Shape{1536, 1024}}) {
    INFO("n=" << s.n << " k=" << s.k);
    const auto x = random_bf16_values(rng, total * s.k), w = random_bf16_values(rng, s.n * s.k);
    const auto bias = random_bf16_values(rng, s.n, -2.0f, 2.0f);
    DeviceBuffer dx = upload_bf16(x), dw = upload_bf16(w), db = upload_bf16(bias);
    DeviceBuffer ref16(total * s.n * sizeof(Bf16)), ref32(total * s.n * sizeof(float)),
        refb(total * s.n * sizeof(Bf16));
    gemm.linear(dx.as<Bf16>(), dw.as<Bf16>(), ref16.as<Bf16>(), total, s.n, s.k, stream);
    gemm.linear(dx.as<Bf16>(), dw.as<Bf16>(), ref32.as<float>(), total, s.n, s.k, stream);
    gemm.linear_bias(dx.as<Bf16>(), dw.as<Bf16>(), db.as<Bf16>(), refb.as<Bf16>(), total, s.n, s.k, stream);
    stream.synchronize();
    const auto want16 = download<std::uint16_t>(ref16, total * s.n);
    const auto want32 = download<float>(ref32, total * s.n);
    const auto wantb = download<std::uint16_t>(refb, total * s.n);
    for (const std::int64_t m : {1, 2, 3, 5, 8, 13, 64, 255, 256, 257, 511}) {
      for (const std::int64_t offset : {std::int64_t{0}, std::int64_t{37}}) {
        if (offset + m > total) continue;
        INFO("m=" << m << " rows from " << offset);
        const Bf16* xs = dx.as<Bf16>() + offset * s.k;
        DeviceBuffer y16(m * s.n * sizeof(Bf16)), y32(m * s.n * sizeof(float)), yb(m * s.n * sizeof(Bf16));
        gemm.linear(xs, dw.as<Bf16>(), y16.as<Bf16>(), m, s.n, s.k, stream);
        gemm.linear(xs, dw.as<Bf16>(), y32.as<float>(), m, s.n, s.k, stream);
        gemm.linear_bias(xs, dw.as<Bf16>(), db.as<Bf16>(), yb.as<Bf16>(), m, s.n, s.k, stream);
        stream.synchronize();
        const auto got16 = download<std::uint16_t>(y16, m * s.n);
        const auto got32 = download<float>(y32, m * s.n);
        const auto gotb = download<std::uint16_t>(yb, m * s.n);
        std::size_t diff16 = 0, diff32 = 0, diffb = 0;
        for (std::int64_t i = 0; i < m * s.n; ++i) {
          const auto at = static_cast<std::size_t>(offset * s.n + i), here = static_cast<std::size_t>(i);
          diff16 += got16[here] != want16[at];
          diff32 += std::memcmp(&got32[here], &want32[at], sizeof(float)) != 0;
          diffb += gotb[here] != wantb[at];
        }
        CHECK(diff16 == 0);
        CHECK(diff32 == 0);
        CHECK(diffb == 0);
      }
    }
  }
  CHECK(gemm.gemv_calls() == 0);  // m = 1 took the one algorithm too

  // The gated MLP's fused GEMV at m = 1 is off as well: one row of a gate|up projection equals
  // that row of a 64-row call.
  const std::int64_t inter = 256, k = 512, m = 64;
  const auto x = random_bf16_values(rng, m * k), w = random_bf16_values(rng, 2 * inter * k);
  DeviceBuffer dx = upload_bf16(x), dw = upload_bf16(w), gate_up(m * 2 * inter * sizeof(Bf16)),
               act(m * inter * sizeof(Bf16)), act1(inter * sizeof(Bf16));
  gemm.linear_silu_mul(dx.as<Bf16>(), dw.as<Bf16>(), gate_up.as<Bf16>(), act.as<Bf16>(), m, inter, k, stream);
  gemm.linear_silu_mul(dx.as<Bf16>() + 5 * k, dw.as<Bf16>(), gate_up.as<Bf16>(), act1.as<Bf16>(), 1, inter, k,
                       stream);
  stream.synchronize();
  const auto all = download<std::uint16_t>(act, m * inter), one = download<std::uint16_t>(act1, inter);
  CHECK(std::equal(one.begin(), one.end(), all.begin() + 5 * inter));
  CHECK(gemm.gemv_calls() == 0);
}
