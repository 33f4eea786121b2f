// The float32 convolution ops of kernels/cuda/conv.hpp against the CPU ops (conv_cpu.hpp) on
// random shapes: strides 1-8, dilations 1/3/9, odd lengths, Snake fused or not, the direct path
// for few output channels, the residual accumulate. Both sides are float32 with float32
// accumulation in different orders, so they agree to ~1e-6 relative; TF32 (10-bit mantissa)
// would miss the 1e-5 gate by two orders of magnitude.
#include <catch2/catch.hpp>

#include "cuda/cuda_test_util.hpp"
#include "zoo/kernels/conv_cpu.hpp"
#include "zoo/kernels/cuda/conv.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;
namespace cpu = zoo::kernels::cpu;

namespace {

constexpr double kRelL2 = 1e-5;

std::vector<float> random_values(std::mt19937& rng, std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

DeviceBuffer workspace_for(std::size_t floats) { return DeviceBuffer(std::max<std::size_t>(floats, 1) * sizeof(float)); }

// The device result `got` (synchronized) against the CPU op's `want`: relative L2 <= kRelL2 and
// every element within 1e-4 absolute + 1e-4 relative.
void check_matches_cpu(const DeviceBuffer& got, const std::vector<float>& want) {
  const auto cmp = compare(download<float>(got, want.size()), want, 1e-4, 1e-4);
  INFO(cmp.str());
  CHECK(cmp.rel_l2() <= kRelL2);
  CHECK(cmp.ok());
}

}  // namespace

TEST_CASE("conv1d on CUDA matches the CPU op: strides, dilations, padding, Snake, accumulate", "[cuda][conv_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(4242);
  Stream stream;
  GemmF32 gemm;
  struct Case {
    std::int64_t length, in, out, kernel, stride, padding, dilation;
  };
  const Case cases[] = {
      {97, 16, 24, 7, 1, 3, 1},     {101, 32, 32, 7, 1, 9, 3},   {255, 8, 12, 7, 1, 27, 9},  // same-length, dilated
      {63, 12, 20, 5, 2, 2, 1},     {77, 6, 10, 4, 3, 0, 1},     {129, 24, 16, 3, 8, 1, 3},  // strided
      {33, 20, 28, 1, 1, 0, 1},     {31, 7, 9, 1, 1, 0, 1},      {50, 5, 7, 3, 5, 4, 2},     // pointwise, odd widths
      {241, 32, 1, 7, 1, 3, 1},     {99, 9, 3, 5, 2, 2, 3},      {17, 64, 4, 3, 1, 1, 1},    // direct (<= 4 out)
  };
  for (const auto& c : cases) {
    for (const bool with_snake : {false, true}) {
      for (const bool accumulate : {false, true}) {
        const Conv1dShape s{c.length, c.in, c.out, c.kernel, c.stride, c.padding, c.dilation};
        INFO("length " << c.length << " in " << c.in << " out " << c.out << " kernel " << c.kernel << " stride "
                       << c.stride << " padding " << c.padding << " dilation " << c.dilation << " snake "
                       << with_snake << " accumulate " << accumulate);
        const std::int64_t out_len = s.out_length();
        REQUIRE(out_len > 0);
        const auto x = random_values(rng, c.length * c.in, -2.0f, 2.0f);
        const auto w = random_values(rng, c.out * c.in * c.kernel, -0.3f, 0.3f);
        const auto bias = random_values(rng, c.out);
        const auto alpha = random_values(rng, c.in, 0.3f, 2.0f);
        const auto y0 = random_values(rng, out_len * c.out);
        std::vector<float> packed(w.size());
        cpu::pack_conv1d_weight(w.data(), packed.data(), s);
        // CPU reference: snake, conv, then the residual add.
        std::vector<float> xs = x, want(out_len * c.out);
        if (with_snake) cpu::snake(x.data(), alpha.data(), xs.data(), c.length, c.in);
        cpu::conv1d(xs.data(), packed.data(), bias.data(), want.data(), s);
        if (accumulate)
          for (std::size_t i = 0; i < want.size(); ++i) want[i] += y0[i];

        auto dx = upload(x), dw = upload(packed), db = upload(bias), da = upload(alpha), dy = upload(y0);
        const std::size_t ws_floats = conv1d_workspace_floats(s, with_snake);
        auto ws = workspace_for(ws_floats);
        conv1d(gemm, dx.as<float>(), dw.as<float>(), db.as<float>(), dy.as<float>(), s, ws.as<float>(), ws_floats,
               stream, with_snake ? da.as<float>() : nullptr, accumulate);
        stream.synchronize();
        check_matches_cpu(dy, want);
      }
    }
  }
}

TEST_CASE("conv_transpose1d on CUDA matches the CPU op: strides 2-8, output_padding, Snake", "[cuda][conv_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(777);
  Stream stream;
  GemmF32 gemm;
  struct Case {
    std::int64_t length, in, out, kernel, stride, padding, output_padding;
  };
  std::vector<Case> cases;
  for (std::int64_t stride = 2; stride <= 8; ++stride)  // the DAC geometry: kernel 2s, padding ceil(s/2)
    cases.push_back({11 + 2 * stride, 8 * stride, 4 * stride + 1, 2 * stride, stride, (stride + 1) / 2, stride % 2});
  cases.push_back({1, 16, 8, 10, 5, 3, 1});   // one input step
  cases.push_back({37, 5, 7, 3, 2, 0, 1});    // kernel not a multiple of the stride
  cases.push_back({20, 12, 6, 7, 3, 2, 2});   // kernel > 2 x stride
  for (const auto& c : cases) {
    for (const bool with_snake : {false, true}) {
      const ConvTranspose1dShape s{c.length, c.in, c.out, c.kernel, c.stride, c.padding, c.output_padding};
      INFO("length " << c.length << " in " << c.in << " out " << c.out << " kernel " << c.kernel << " stride "
                     << c.stride << " padding " << c.padding << " output_padding " << c.output_padding << " snake "
                     << with_snake);
      const std::int64_t out_len = s.out_length();
      REQUIRE(out_len > 0);
      const auto x = random_values(rng, c.length * c.in, -2.0f, 2.0f);
      const auto w = random_values(rng, c.in * c.out * c.kernel, -0.3f, 0.3f);
      const auto bias = random_values(rng, c.out);
      const auto alpha = random_values(rng, c.in, 0.3f, 2.0f);
      std::vector<float> packed(w.size());
      cpu::pack_conv_transpose1d_weight(w.data(), packed.data(), s);
      std::vector<float> xs = x, want(out_len * c.out);
      if (with_snake) cpu::snake(x.data(), alpha.data(), xs.data(), c.length, c.in);
      cpu::conv_transpose1d(xs.data(), packed.data(), bias.data(), want.data(), s);

      auto dx = upload(x), dw = upload(packed), db = upload(bias), da = upload(alpha);
      DeviceBuffer dy(want.size() * sizeof(float));
      const std::size_t ws_floats = conv_transpose1d_workspace_floats(s, with_snake);
      auto ws = workspace_for(ws_floats);
      conv_transpose1d(gemm, dx.as<float>(), dw.as<float>(), db.as<float>(), dy.as<float>(), s, ws.as<float>(),
                       ws_floats, stream, with_snake ? da.as<float>() : nullptr);
      stream.synchronize();
      check_matches_cpu(dy, want);
    }
  }
}

TEST_CASE("snake and sum_rows on CUDA match the CPU reference", "[cuda][conv_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(99);
  Stream stream;
  {
    const std::int64_t length = 301, channels = 37;
    // Large arguments too: alpha * x in the hundreds, where a fast sine would be off.
    const auto x = random_values(rng, length * channels, -300.0f, 300.0f);
    const auto alpha = random_values(rng, channels, 0.3f, 2.0f);
    std::vector<float> want(x.size());
    cpu::snake(x.data(), alpha.data(), want.data(), length, channels);
    auto dx = upload(x), da = upload(alpha);
    snake(dx.as<float>(), da.as<float>(), dx.as<float>(), length, channels, stream);  // in place
    stream.synchronize();
    const auto cmp = compare(download<float>(dx, x.size()), want, 1e-4, 1e-6);
    INFO(cmp.str());
    CHECK(cmp.ok());
  }
  {
    const std::int64_t table_rows = 50, width = 33, rows = 9, per_row = 4;
    const auto tables = random_values(rng, table_rows * width);
    std::vector<std::int32_t> ids(rows * per_row);
    std::uniform_int_distribution<int> pick(0, static_cast<int>(table_rows) - 1);
    for (auto& id : ids) id = pick(rng);
    ids[5] = -1;   // out of range: adds nothing
    ids[6] = 999;
    std::vector<float> want(rows * width, 0.0f);
    for (std::int64_t t = 0; t < rows; ++t)
      for (std::int64_t j = 0; j < per_row; ++j) {
        const int id = ids[t * per_row + j];
        if (id < 0 || id >= table_rows) continue;
        for (std::int64_t c = 0; c < width; ++c) want[t * width + c] += tables[id * width + c];
      }
    auto dt = upload(tables), di = upload(ids);
    DeviceBuffer out(want.size() * sizeof(float));
    sum_rows(dt.as<float>(), table_rows, width, di.as<std::int32_t>(), per_row, rows, out.as<float>(), stream);
    stream.synchronize();
    CHECK(download<float>(out, want.size()) == want);  // same order of float adds: exact
  }
}

TEST_CASE("GemmF32 is float32 (no TF32), with bias and residual epilogues", "[cuda][conv_cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(5);
  Stream stream;
  GemmF32 gemm;
  const std::int64_t m = 300, n = 96, k = 1000;
  const auto x = random_values(rng, m * k), w = random_values(rng, n * k), bias = random_values(rng, n),
             y0 = random_values(rng, m * n);
  std::vector<float> want(m * n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (std::int64_t l = 0; l < k; ++l) acc += static_cast<double>(x[i * k + l]) * w[j * k + l];
      want[i * n + j] = static_cast<float>(acc + bias[j] + y0[i * n + j]);
    }
  auto dx = upload(x), dw = upload(w), db = upload(bias), dy = upload(y0);
  gemm.linear(dx.as<float>(), dw.as<float>(), db.as<float>(), dy.as<float>(), m, n, k, stream, true);
  stream.synchronize();
  const auto cmp = compare(download<float>(dy, want.size()), want, 1e-4, 1e-5);
  INFO(cmp.str());
  // float32 accumulation of 1000 products: ~1e-7 relative; TF32 inputs would give ~1e-3.
  CHECK(cmp.rel_l2() <= 2e-6);
  CHECK(cmp.ok());
  CHECK(gemm.cached_plans() == 1);
}
