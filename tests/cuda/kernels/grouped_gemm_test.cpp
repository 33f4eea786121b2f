// grouped_gemm (grouped_gemm.hpp) against a host reference of the same bf16 inputs: uneven groups
// with empty ones, a single group, 512 groups, tiny n and k, k off the 64-deep tile, rows off the
// 128-row tile, rows past offsets[groups] left untouched, a CUDA graph replayed with new offsets,
// and cuBLAS's grouped GEMM (Gemm::grouped_linear) on one shape. Each case runs the default kernel
// (wgmma on an H100/H200 with an sm_90a build) and the mma.sync one (ZOO_CUDA_PRE_HOPPER=1).
// The benchmark ("[grouped_gemm_bench]", hidden) times the Qwen3-30B-A3B prefill projections
// against cuBLAS's grouped and dense GEMMs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_test_util.hpp"
#include "scoped_env.hpp"
#include "zoo/kernels/cuda/gemm.hpp"
#include "zoo/kernels/cuda/grouped_gemm.hpp"
#include "zoo/kernels/cuda/moe.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;

// A named namespace, not an anonymous one: the tests are compiled in unity batches.
namespace zoo::grouped_gemm_test {

constexpr std::uint16_t kSentinel = 0xffff;  // a bf16 NaN: y's rows that must stay untouched
constexpr std::uint16_t kNanBits = 0x7fc0;   // x's rows past offsets[groups]: never read

std::vector<std::int32_t> offsets_of(const std::vector<std::int32_t>& counts) {
  std::vector<std::int32_t> offsets(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
  return offsets;
}

// Random counts in [0, hi], about a third of them empty.
std::vector<std::int32_t> random_counts(std::mt19937& rng, int groups, int hi) {
  std::uniform_int_distribution<int> dist(0, hi), empty(0, 2);
  std::vector<std::int32_t> counts(groups);
  for (auto& c : counts) c = empty(rng) == 0 ? 0 : dist(rng);
  return counts;
}

// y rows [0, offsets.back()) of the grouped product, accumulated in double.
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w, std::int64_t w_stride,
                             const std::vector<std::int32_t>& offsets, std::int64_t n, std::int64_t k) {
  std::vector<float> y(static_cast<std::size_t>(offsets.back()) * n);
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g)
    for (std::int64_t r = offsets[g]; r < offsets[g + 1]; ++r)
      for (std::int64_t j = 0; j < n; ++j) {
        const float* xr = &x[r * k];
        const float* wr = &w[g * w_stride + j * k];
        double acc = 0.0;
        for (std::int64_t p = 0; p < k; ++p) acc += double(xr[p]) * double(wr[p]);
        y[r * n + j] = static_cast<float>(acc);
      }
  return y;
}

// One problem's host data and device buffers: x [max_rows, k] with NaN rows past the groups,
// y [max_rows, n].
struct Problem {
  std::int64_t n = 0, k = 0, w_stride = 0, max_rows = 0;
  std::vector<std::int32_t> counts, offsets;
  std::vector<float> x, w, want;
  DeviceBuffer dx, dw, doffsets, dy;

  Problem(std::mt19937& rng, std::int64_t n_, std::int64_t k_, std::vector<std::int32_t> counts_,
          std::int64_t extra_rows, std::int64_t stride_pad = 0)
      : n(n_),
        k(k_),
        w_stride(n_ * k_ + stride_pad),
        counts(std::move(counts_)),
        offsets(offsets_of(counts)) {
    max_rows = offsets.back() + extra_rows;
    const auto groups = static_cast<std::int64_t>(counts.size());
    x = random_bf16_values(rng, static_cast<std::size_t>(offsets.back() * k));
    w = random_bf16_values(rng, static_cast<std::size_t>(groups * w_stride));
    want = reference(x, w, w_stride, offsets, n, k);
    auto xb = to_bf16(x);
    xb.resize(static_cast<std::size_t>(std::max<std::int64_t>(max_rows * k, 8)), Bf16{kNanBits});
    dx = upload(xb);
    dw = upload_bf16(w.empty() ? std::vector<float>(8) : w);
    doffsets = upload(offsets);
    dy = DeviceBuffer(static_cast<std::size_t>(std::max<std::int64_t>(max_rows * n, 8)) * 2);
  }
  int groups() const { return static_cast<int>(counts.size()); }
  std::int64_t rows() const { return offsets.back(); }
  void run(cudaStream_t stream) {
    grouped_gemm(dx.as<Bf16>(), dw.as<Bf16>(), w_stride, doffsets.as<std::int32_t>(), groups(), max_rows, n,
                 k, dy.as<Bf16>(), stream);
  }
  std::string str() const {
    return "groups " + std::to_string(groups()) + " rows " + std::to_string(rows()) + " max_rows " +
           std::to_string(max_rows) + " n " + std::to_string(n) + " k " + std::to_string(k);
  }
};

// y's first offsets.back() rows against `want` (one bf16 rounding of a float32 sum), the rest
// bitwise the sentinel.
void check_y(const DeviceBuffer& dy, std::int64_t rows, std::int64_t max_rows, std::int64_t n, std::int64_t k,
             const std::vector<float>& want) {
  const auto raw = download<Bf16>(dy, static_cast<std::size_t>(max_rows * n));
  const std::vector<Bf16> head(raw.begin(), raw.begin() + rows * n);
  const auto got = from_bf16(head);
  const double atol = 1e-4 * std::sqrt(double(k) + 1.0);
  const auto cmp = compare(got, want, atol, 2 * kBf16Eps);
  // The first few misses, (row, column): got / want.
  std::string misses;
  for (std::size_t i = 0, shown = 0; i < want.size() && shown < 6; ++i)
    if (!(std::abs(double(got[i]) - want[i]) <= atol + 2 * kBf16Eps * std::abs(want[i]))) {
      misses += " (" + std::to_string(i / n) + ", " + std::to_string(i % n) + "): " + std::to_string(got[i]) +
                " / " + std::to_string(want[i]);
      ++shown;
    }
  INFO(cmp.str() << misses);
  CHECK(cmp.ok());
  std::size_t touched = 0;
  for (std::size_t i = static_cast<std::size_t>(rows * n); i < raw.size(); ++i)
    touched += raw[i].bits != kSentinel;
  INFO("values past offsets[groups] overwritten: " << touched);
  CHECK(touched == 0);
}

// The kernels to try: the default one (wgmma on an H100/H200), and the mma.sync one, which devices
// before sm_90 run.
struct Path {
  const char* label;
  bool pre_hopper;
};
const std::vector<Path>& paths() {
  static const std::vector<Path> all = {{"default", false}, {"ZOO_CUDA_PRE_HOPPER=1", true}};
  return all;
}
// Sets a path's switch for one scope.
struct PathEnv {
  std::optional<zoo::test::ScopedEnv> pre_hopper;
  explicit PathEnv(const Path& p) {
    if (p.pre_hopper) pre_hopper.emplace("ZOO_CUDA_PRE_HOPPER", "1");
  }
};
std::string path_name(const Path& p) {
  return std::string(p.label) + (grouped_gemm_uses_wgmma() ? " (wgmma)" : " (mma.sync)");
}

// Fills `count` bf16 values on the device from 1 Mi random ones, repeated (the benchmark's
// weights are ~0.8 GB: generating them all on the host would take seconds).
DeviceBuffer random_device_bf16(std::mt19937& rng, std::size_t count) {
  DeviceBuffer buf(count * 2);
  const std::size_t chunk = std::min<std::size_t>(count, std::size_t{1} << 20);
  const auto values = to_bf16(random_bf16_values(rng, chunk));
  buf.upload(values.data(), chunk * 2);
  for (std::size_t done = chunk; done < count;) {
    const std::size_t c = std::min(done, count - done);
    ZOO_CUDA_CHECK(cudaMemcpy(buf.as<char>() + done * 2, buf.as<char>(), c * 2, cudaMemcpyDeviceToDevice));
    done += c;
  }
  ZOO_CUDA_CHECK(cudaDeviceSynchronize());  // device-to-device cudaMemcpy does not block the host
  return buf;
}

}  // namespace zoo::grouped_gemm_test

namespace ggt = zoo::grouped_gemm_test;

TEST_CASE("grouped_gemm matches a host reference over uneven groups", "[cuda][grouped_gemm]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(4101);
  Stream stream;
  std::vector<ggt::Problem> problems;
  // Tiny n and k, empty groups first and last.
  problems.emplace_back(rng, 16, 8, std::vector<std::int32_t>{0, 3, 0, 130, 1, 0}, 5);
  // k off the 64-deep tile, n off the 256-wide one, groups spanning several 128-row tiles.
  problems.emplace_back(rng, 136, 200, std::vector<std::int32_t>{0, 300, 1, 0, 129, 127, 0, 64, 65}, 37, 64);
  // Random uneven groups, several n tiles.
  problems.emplace_back(rng, 520, 264, ggt::random_counts(rng, 20, 200), 130);
  // A single group.
  problems.emplace_back(rng, 264, 1032, std::vector<std::int32_t>{333}, 0);
  // The most groups (two per scheduling thread), a few rows each.
  problems.emplace_back(rng, 24, 72, ggt::random_counts(rng, kMoeMaxExperts, 5), 3, 8);
  // Many tiles (hundreds of blocks), 2 k-tiles and then 1.
  problems.emplace_back(rng, 1024, 72, ggt::random_counts(rng, 64, 300), 50);
  problems.emplace_back(rng, 2048, 40, ggt::random_counts(rng, 48, 320), 0);
  // k == 0: zeros.
  problems.emplace_back(rng, 40, 0, std::vector<std::int32_t>{2, 0, 9}, 4);
  // Every group empty: nothing written.
  problems.emplace_back(rng, 32, 16, std::vector<std::int32_t>{0, 0, 0}, 7);
  for (const auto& path : ggt::paths()) {
    const ggt::PathEnv env(path);
    for (auto& p : problems) {
      INFO(ggt::path_name(path) << ": " << p.str());
      p.dy.fill_bytes(0xff);
      p.run(stream);
      stream.synchronize();
      ggt::check_y(p.dy, p.rows(), p.max_rows, p.n, p.k, p.want);
    }
  }
}

TEST_CASE("grouped_gemm replays from a CUDA graph with new offsets", "[cuda][grouped_gemm]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(4102);
  const std::int64_t n = 200, k = 136, max_rows = 700;
  const int groups = 12;
  for (const auto& path : ggt::paths()) {
    const ggt::PathEnv env(path);
    Stream stream;
    const auto w = random_bf16_values(rng, groups * n * k);
    DeviceBuffer dw = upload_bf16(w), dx(max_rows * k * 2), dy(max_rows * n * 2), doffsets((groups + 1) * 4);
    doffsets.fill_bytes(0);
    // The first call outside the graph (sets the kernel's shared-memory limit), then the capture.
    grouped_gemm(dx.as<Bf16>(), dw.as<Bf16>(), n * k, doffsets.as<std::int32_t>(), groups, max_rows, n, k,
                 dy.as<Bf16>(), stream);
    stream.synchronize();
    CudaGraph graph;
    graph.begin_capture(stream);
    grouped_gemm(dx.as<Bf16>(), dw.as<Bf16>(), n * k, doffsets.as<std::int32_t>(), groups, max_rows, n, k,
                 dy.as<Bf16>(), stream);
    graph.end_capture(stream);
    for (int replay = 0; replay < 4; ++replay) {
      INFO(ggt::path_name(path) << ": replay " << replay);
      // New group sizes (the last replay fills max_rows exactly) and new rows, same buffers.
      auto counts = ggt::random_counts(rng, groups, 90);
      if (replay == 3) {
        counts.assign(groups, 0);
        counts[5] = static_cast<std::int32_t>(max_rows - 1);
        counts[11] = 1;
      }
      const auto offsets = ggt::offsets_of(counts);
      REQUIRE(offsets.back() <= max_rows);
      const auto x = random_bf16_values(rng, offsets.back() * k);
      if (!x.empty()) dx.upload(to_bf16(x).data(), x.size() * 2);
      doffsets.upload(offsets.data(), offsets.size() * 4);
      dy.fill_bytes(0xff);
      graph.launch(stream);
      stream.synchronize();
      ggt::check_y(dy, offsets.back(), max_rows, n, k, ggt::reference(x, w, n * k, offsets, n, k));
    }
  }
}

TEST_CASE("grouped_gemm agrees with cuBLAS grouped GEMM (Gemm::grouped_linear)", "[cuda][grouped_gemm]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(4103);
  Stream stream;
  Gemm gemm;
  const std::int64_t n = 384, k = 704;
  auto counts = ggt::random_counts(rng, 16, 300);
  counts[3] = 256;
  ggt::Problem p(rng, n, k, counts, 0);
  DeviceBuffer cublas_y(p.rows() * n * 2);
  gemm.grouped_linear(p.dx.as<Bf16>(), p.dw.as<Bf16>(), p.w_stride, p.counts.data(), p.groups(),
                      cublas_y.as<Bf16>(), n, k, stream);
  stream.synchronize();
  const auto theirs = download_bf16(cublas_y, p.rows() * n);
  for (const auto& path : ggt::paths()) {
    const ggt::PathEnv env(path);
    INFO(ggt::path_name(path) << ": " << p.str());
    p.dy.fill_bytes(0xff);
    p.run(stream);
    stream.synchronize();
    const auto ours = download_bf16(p.dy, p.rows() * n);
    // Each is one rounding of a float32 sum (the orders differ): within two roundings of each other.
    const auto cmp = compare(ours, theirs, 1e-4 * std::sqrt(double(k)), 2.5 * kBf16Eps);
    std::size_t same = 0;
    for (std::size_t i = 0; i < ours.size(); ++i) same += ours[i] == theirs[i];
    INFO(cmp.str() << "; bitwise equal " << same << " of " << ours.size());
    CHECK(cmp.ok());
    ggt::check_y(p.dy, p.rows(), p.max_rows, n, k, p.want);
  }
}

TEST_CASE("grouped_gemm refuses bad arguments", "[cuda][grouped_gemm]") {
  // Checked before anything reaches the device: runs without a GPU too.
  const auto* aligned = reinterpret_cast<const Bf16*>(std::uintptr_t{256});
  const auto* misaligned = reinterpret_cast<const Bf16*>(std::uintptr_t{258});
  auto* out = reinterpret_cast<Bf16*>(std::uintptr_t{512});
  auto* out_misaligned = reinterpret_cast<Bf16*>(std::uintptr_t{520});
  const auto* offsets = reinterpret_cast<const std::int32_t*>(std::uintptr_t{1024});
  const cudaStream_t s = nullptr;
  const auto call = [&](const Bf16* x, const Bf16* w, std::int64_t stride, int groups, std::int64_t rows,
                        std::int64_t n, std::int64_t k,
                        Bf16* y) { grouped_gemm(x, w, stride, offsets, groups, rows, n, k, y, s); };
  CHECK_THROWS_AS(call(aligned, aligned, 64 * 64, 1, 4, 64, 12, out), std::invalid_argument);  // k % 8
  CHECK_THROWS_AS(call(aligned, aligned, 64 * 64, 1, 4, 20, 64, out), std::invalid_argument);  // n % 8
  CHECK_THROWS_AS(call(misaligned, aligned, 64 * 64, 1, 4, 64, 64, out), std::invalid_argument);
  CHECK_THROWS_AS(call(aligned, misaligned, 64 * 64, 1, 4, 64, 64, out), std::invalid_argument);
  CHECK_THROWS_AS(call(aligned, aligned, 64 * 64, 1, 4, 64, 64, out_misaligned), std::invalid_argument);
  CHECK_THROWS_AS(call(aligned, aligned, 64 * 64 + 4, 1, 4, 64, 64, out),
                  std::invalid_argument);  // stride % 8
  CHECK_THROWS_AS(call(aligned, aligned, 64 * 64, kMoeMaxExperts + 1, 4, 64, 64, out), std::invalid_argument);
  CHECK_THROWS_AS(call(aligned, aligned, 64 * 64, -1, 4, 64, 64, out), std::invalid_argument);
  CHECK_THROWS_AS(call(aligned, aligned, 64 * 64, 1, -4, 64, 64, out), std::invalid_argument);
  CHECK_THROWS_AS(call(nullptr, aligned, 64 * 64, 1, 4, 64, 64, out), std::invalid_argument);
  CHECK_THROWS_AS(grouped_gemm(aligned, aligned, 64 * 64, nullptr, 1, 4, 64, 64, out, s),
                  std::invalid_argument);
  // Nothing to do: returns before touching anything.
  CHECK_NOTHROW(call(nullptr, nullptr, 0, 0, 4, 64, 64, nullptr));
  CHECK_NOTHROW(call(nullptr, nullptr, 0, 3, 0, 64, 64, nullptr));
}

// A look at the layout when the comparison fails (hidden: `test_cuda "[grouped_gemm_diag]"`): one
// 128 x 256 tile over k = 64 with one-hot rows of x, so y[r, j] = w[j, r % 64]. With w[j, p] = p
// the values show which k a row met, with w[j, p] = j which column landed where.
TEST_CASE("grouped_gemm layout probe", "[.][grouped_gemm_diag]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  Stream stream;
  const std::int64_t rows = 128, n = 256, k = 64;
  std::vector<float> x(rows * k, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) x[r * k + r % 64] = 1.0f;
  const std::vector<std::int32_t> offsets = {0, static_cast<std::int32_t>(rows)};
  DeviceBuffer dx = upload_bf16(x), doff = upload(offsets), dy(rows * n * 2);
  for (const auto& path : ggt::paths()) {
    const ggt::PathEnv env(path);
    for (const int mode : {0, 1}) {
      std::vector<float> w(n * k);
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t p = 0; p < k; ++p) w[j * k + p] = mode == 0 ? float(p) : float(j);
      DeviceBuffer dw = upload_bf16(w);
      dy.fill_bytes(0);
      grouped_gemm(dx.as<Bf16>(), dw.as<Bf16>(), n * k, doff.as<std::int32_t>(), 1, rows, n, k, dy.as<Bf16>(),
                   stream);
      stream.synchronize();
      const auto y = download_bf16(dy, rows * n);
      std::printf("%s, w[j, p] = %s; rows: y[r, 0..7] y[r, 8] y[r, 16] y[r, 64] y[r, 255]\n",
                  ggt::path_name(path).c_str(), mode == 0 ? "p (want r mod 64)" : "j (want j)");
      for (const int r : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127}) {
        std::printf("  %3d:", r);
        for (const int j : {0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 64, 255}) std::printf(" %4g", y[r * n + j]);
        std::printf("\n");
      }
    }
  }
}

TEST_CASE("bench: grouped_gemm vs cuBLAS grouped and dense GEMMs", "[.bench][grouped_gemm_bench]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(4104);
  Stream stream;
  Gemm gemm;
  constexpr int kExperts = 128, kTopK = 8;
  struct Shape {
    const char* name;
    std::int64_t n, k;
  };
  const Shape shapes[] = {{"gate|up", 1536, 2048}, {"down", 2048, 768}};
  std::printf(
      "grouped GEMM, Qwen3-30B-A3B prefill (%d experts, top %d), %s; TFLOP/s = 2 rows n k / median time\n",
      kExperts, kTopK, device_properties().name.c_str());
  std::printf("%-8s %6s %6s %5s %5s | %-18s | %-18s | %-18s | %-18s\n", "shape", "tokens", "rows", "n", "k",
              "ours (default)", "ours mma.sync", "cuBLAS grouped", "cuBLAS dense");
  for (const std::int64_t tokens : {2048, 4096}) {
    // Random top-8 choices: 8 distinct experts per token.
    std::vector<std::int32_t> counts(kExperts, 0);
    std::vector<int> perm(kExperts);
    std::iota(perm.begin(), perm.end(), 0);
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int j = 0; j < kTopK; ++j) {
        std::swap(perm[j], perm[std::uniform_int_distribution<int>(j, kExperts - 1)(rng)]);
        ++counts[perm[j]];
      }
    const auto offsets = ggt::offsets_of(counts);
    const std::int64_t rows = offsets.back();
    DeviceBuffer doffsets = upload(offsets);
    for (const auto& s : shapes) {
      DeviceBuffer x = ggt::random_device_bf16(rng, rows * s.k);
      DeviceBuffer w = ggt::random_device_bf16(rng, kExperts * s.n * s.k);
      DeviceBuffer y(rows * s.n * 2), y_cublas(rows * s.n * 2);
      const double flop = 2.0 * double(rows) * double(s.n) * double(s.k);
      const auto ours = [&] {
        grouped_gemm(x.as<Bf16>(), w.as<Bf16>(), s.n * s.k, doffsets.as<std::int32_t>(), kExperts, rows, s.n,
                     s.k, y.as<Bf16>(), stream);
      };
      const auto cublas = [&] {
        gemm.grouped_linear(x.as<Bf16>(), w.as<Bf16>(), s.n * s.k, counts.data(), kExperts,
                            y_cublas.as<Bf16>(), s.n, s.k, stream);
      };
      const auto dense = [&] {
        gemm.linear(x.as<Bf16>(), w.as<Bf16>(), y.as<Bf16>(), rows, s.n, s.k, stream);
      };
      const std::string path = grouped_gemm_uses_wgmma() ? "wgmma" : "mma.sync";
      double t_mma = 0.0;
      {
        zoo::test::ScopedEnv env("ZOO_CUDA_PRE_HOPPER", "1");
        t_mma = median_ms(ours, stream);
        stream.synchronize();
      }
      const double t_ours = median_ms(ours, stream);
      const double t_cublas = median_ms(cublas, stream);
      // The results of the last runs of both grouped GEMMs agree (a check at full size).
      ours();
      cublas();
      stream.synchronize();
      const auto a = download_bf16(y, rows * s.n), b = download_bf16(y_cublas, rows * s.n);
      const auto cmp = compare(a, b, 1e-4 * std::sqrt(double(s.k)), 2.5 * kBf16Eps);
      INFO(s.name << " tokens " << tokens << ": ours vs cuBLAS: " << cmp.str());
      CHECK(cmp.ok());
      const double t_dense = median_ms(dense, stream);
      const auto cell = [&](double ms) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%7.1f us %5.0f TF", ms * 1e3, flop / (ms * 1e-3) / 1e12);
        return std::string(buf);
      };
      std::printf("%-8s %6lld %6lld %5lld %5lld | %-18s | %-18s | %-18s | %-18s  [%s; counts %d..%d]\n",
                  s.name, static_cast<long long>(tokens), static_cast<long long>(rows),
                  static_cast<long long>(s.n), static_cast<long long>(s.k), cell(t_ours).c_str(),
                  cell(t_mma).c_str(), cell(t_cublas).c_str(), cell(t_dense).c_str(), path.c_str(),
                  *std::min_element(counts.begin(), counts.end()),
                  *std::max_element(counts.begin(), counts.end()));
      std::fflush(stdout);
    }
  }
}
