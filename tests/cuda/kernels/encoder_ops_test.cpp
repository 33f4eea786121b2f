// The float32 encoder-stack ops of kernels/cuda/encoder.hpp against the CPU ops
// (kernels/encoder_cpu.hpp): layer / per-channel norm, GELU, ELU, the scaled softmax and
// transpose behind the attention, the polyphase resampler (bit-equal: same taps, same order, no
// FMA), and the nearest-code pick (equal codes and gaps from the same dot products).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "cuda/cuda_test_util.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/cuda/encoder.hpp"
#include "zoo/kernels/encoder_cpu.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;
namespace cpu = zoo::kernels::cpu;

namespace {

std::vector<float> normal_values(std::mt19937& rng, std::size_t n, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

void check_close(const DeviceBuffer& got, const std::vector<float>& want, double tol = 1e-5) {
  const auto cmp = compare(download<float>(got, want.size()), want, tol, tol);
  INFO(cmp.str());
  CHECK(cmp.ok());
}

}  // namespace

TEST_CASE("encoder ops on CUDA match the CPU ops: norms, GELU, ELU, softmax, transpose", "[cuda][encoder_ops_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(27);
  Stream stream;
  const std::int64_t rows = 33, dim = 768;
  auto x = normal_values(rng, rows * dim, 2.0f);
  const auto w = normal_values(rng, dim), b = normal_values(rng, dim);
  std::vector<float> want(x.size());
  cpu::layer_norm(x.data(), w.data(), b.data(), want.data(), rows, dim, 1e-5f);
  DeviceBuffer dx = upload(x), dw = upload(w), db = upload(b), dy(x.size() * sizeof(float));
  layer_norm_f32(dx.as<float>(), dw.as<float>(), db.as<float>(), dy.as<float>(), rows, dim, 1e-5f, stream);
  stream.synchronize();
  check_close(dy, want);

  const std::int64_t length = 5001, channels = 24;
  const auto z = normal_values(rng, length * channels, 3.0f);
  const auto wc = normal_values(rng, channels), bc = normal_values(rng, channels);
  std::vector<float> want_c(z.size());
  cpu::per_channel_norm(z.data(), wc.data(), bc.data(), want_c.data(), length, channels, 1e-5f);
  DeviceBuffer dz = upload(z), dwc = upload(wc), dbc = upload(bc), dyc(z.size() * sizeof(float)),
               stats(2 * channels * sizeof(float));
  per_channel_norm_f32(dz.as<float>(), dwc.as<float>(), dbc.as<float>(), dyc.as<float>(), length, channels, 1e-5f,
                       stats.as<float>(), stream);
  stream.synchronize();
  check_close(dyc, want_c);

  std::vector<float> g(z.size()), e(z.size());
  cpu::gelu_erf(z.data(), g.data(), static_cast<std::int64_t>(z.size()));
  cpu::elu(z.data(), e.data(), static_cast<std::int64_t>(z.size()));
  gelu_erf_f32(dz.as<float>(), dyc.as<float>(), static_cast<std::int64_t>(z.size()), stream);
  stream.synchronize();
  check_close(dyc, g, 1e-6);
  elu_f32(dz.as<float>(), dyc.as<float>(), static_cast<std::int64_t>(z.size()), stream);
  stream.synchronize();
  check_close(dyc, e, 1e-6);

  // softmax of scale * row, rows of 500
  const std::int64_t T = 500;
  auto s = normal_values(rng, 7 * T, 4.0f);
  std::vector<float> want_s(s);
  for (std::int64_t r = 0; r < 7; ++r) {
    float* row = want_s.data() + r * T;
    float m = -INFINITY, sum = 0;
    for (std::int64_t j = 0; j < T; ++j) m = std::max(m, row[j] *= 0.125f);
    for (std::int64_t j = 0; j < T; ++j) sum += (row[j] = std::exp(row[j] - m));
    for (std::int64_t j = 0; j < T; ++j) row[j] /= sum;
  }
  DeviceBuffer ds = upload(s);
  scaled_softmax_rows_f32(ds.as<float>(), 7, T, 0.125f, stream);
  stream.synchronize();
  check_close(ds, want_s, 1e-6);

  // transpose a [rows, cols] block of a wider matrix
  const std::int64_t R = 70, Ccols = 45, stride = 100;
  const auto m = normal_values(rng, R * stride);
  std::vector<float> want_t(R * Ccols);
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < Ccols; ++c) want_t[c * R + r] = m[r * stride + 3 + c];
  DeviceBuffer dm = upload(m), dt(want_t.size() * sizeof(float));
  transpose_f32(dm.as<float>() + 3, stride, dt.as<float>(), R, Ccols, stream);
  stream.synchronize();
  CHECK(download<float>(dt, want_t.size()) == want_t);
}

TEST_CASE("polyphase resample and nearest code on CUDA equal the CPU results", "[cuda][encoder_ops_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(28);
  Stream stream;
  const cpu::SincResampler r(24000, 16000);
  const std::int64_t n = 24007;
  const auto x = normal_values(rng, n, 0.3f);
  const auto want = r.run(x.data(), n);
  const std::int64_t taps = static_cast<std::int64_t>(r.filters().size()) / 2;
  DeviceBuffer dx = upload(x), df = upload(r.filters()), dy(want.size() * sizeof(float));
  polyphase_resample_f32(dx.as<float>(), n, df.as<float>(), 2, taps, 3, r.width(), dy.as<float>(),
                         static_cast<std::int64_t>(want.size()), stream);
  stream.synchronize();
  CHECK(download<float>(dy, want.size()) == want);

  // Codes: the same dot products in, the CPU's pick and gap out.
  const std::int64_t rows = 250, dim = 64, codes = 1024;
  const auto p = normal_values(rng, rows * dim), embed = normal_values(rng, codes * dim);
  std::vector<float> dots(rows * codes), esq(codes);
  cpu::linear(p.data(), embed.data(), dots.data(), rows, codes, dim);
  for (std::int64_t c = 0; c < codes; ++c) {
    float acc = 0.0f;
    for (std::int64_t d = 0; d < dim; ++d) acc += embed[c * dim + d] * embed[c * dim + d];
    esq[c] = acc;
  }
  std::vector<std::int32_t> want_idx(rows);
  std::vector<float> want_gap(rows);
  for (std::int64_t t = 0; t < rows; ++t) {
    float xx = 0.0f;
    for (std::int64_t d = 0; d < dim; ++d) xx += p[t * dim + d] * p[t * dim + d];
    float best = -INFINITY, second = -INFINITY;
    for (std::int64_t c = 0; c < codes; ++c) {
      const float score = -((xx - 2.0f * dots[t * codes + c]) + esq[c]);
      if (score > best) {
        second = best;
        best = score;
        want_idx[t] = static_cast<std::int32_t>(c);
      } else if (score > second) {
        second = score;
      }
    }
    want_gap[t] = best - second;
  }
  DeviceBuffer dp = upload(p), dd = upload(dots), de = upload(esq), di(rows * sizeof(std::int32_t)), dg(rows * sizeof(float));
  nearest_code_rows_f32(dp.as<float>(), dim, dd.as<float>(), de.as<float>(), rows, codes, di.as<std::int32_t>(),
                        dg.as<float>(), stream);
  stream.synchronize();
  CHECK(download<std::int32_t>(di, rows) == want_idx);
  CHECK(download<float>(dg, rows) == want_gap);
}
