#pragma once
// Helpers for the CUDA op tests: bf16 host data, uploads, and error statistics against the CPU
// reference ops (which run in float32 on the bf16 inputs converted exactly).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "zoo/dtype.hpp"
#include "zoo/kernels/cuda/attention.hpp"
#include "zoo/kernels/cuda/common.hpp"

#include "test_skip.hpp"

// Without a GPU the case is skipped (ctest shows "Skipped"), never passed.
#define ZOO_REQUIRE_CUDA_DEVICE()                                        \
  do {                                                                   \
    if (!::zoo::kernels::cuda::cuda_available()) ZOO_SKIP("no CUDA device"); \
  } while (0)

namespace zoo::cuda_test {

using kernels::cuda::Bf16;
using kernels::cuda::DeviceBuffer;

// Random values already rounded to bf16, so the CPU reference sees exactly the GPU's inputs.
inline std::vector<float> random_bf16_values(std::mt19937& rng, std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to_bf16(dist(rng));
  return v;
}

inline std::vector<Bf16> to_bf16(const std::vector<float>& v) {
  std::vector<Bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i].bits = f32_to_bf16(v[i]);
  return out;
}

inline std::vector<float> from_bf16(const std::vector<Bf16>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(v[i].bits);
  return out;
}

template <class T>
DeviceBuffer upload(const std::vector<T>& host) {
  DeviceBuffer buf(host.size() * sizeof(T));
  buf.upload(host.data(), host.size() * sizeof(T));
  return buf;
}

inline DeviceBuffer upload_bf16(const std::vector<float>& values) { return upload(to_bf16(values)); }

template <class T>
std::vector<T> download(const DeviceBuffer& buf, std::size_t count) {
  std::vector<T> host(count);
  buf.download(host.data(), count * sizeof(T));
  return host;
}

inline std::vector<float> download_bf16(const DeviceBuffer& buf, std::size_t count) {
  return from_bf16(download<Bf16>(buf, count));
}

// Elementwise check |got - want| <= atol + rtol * |want| (NaN always fails), plus summary
// statistics for the report.
struct Comparison {
  std::size_t count = 0, failures = 0, worst = 0;
  double max_abs = 0.0, max_ref = 0.0, worst_excess = 0.0;
  double err_sq = 0.0, ref_sq = 0.0;
  double rel_l2() const { return ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq); }
  bool ok() const { return failures == 0; }
  std::string str() const {
    std::ostringstream os;
    os << count << " values, " << failures << " outside tolerance, max_abs_err " << max_abs << " (max |ref| "
       << max_ref << "), rel_l2 " << rel_l2() << ", worst index " << worst;
    return os.str();
  }
};

// As compare(), with the relative part taken of scale[i] instead of |want[i]| (for results whose
// error scales with the magnitude of intermediate values, not of the final one).
inline Comparison compare_scaled(const std::vector<float>& got, const std::vector<float>& want,
                                 const std::vector<float>& scale, double atol, double rtol) {
  Comparison c;
  c.count = want.size();
  REQUIRE(got.size() == want.size());
  REQUIRE(scale.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i], err = std::abs(g - w);
    const double tol = atol + rtol * std::abs(scale[i]);
    c.max_ref = std::max(c.max_ref, std::abs(w));
    c.err_sq += std::isnan(err) ? INFINITY : err * err;
    c.ref_sq += w * w;
    if (!(err <= tol)) {
      ++c.failures;
      const double excess = std::isnan(err) ? INFINITY : err / tol;
      if (excess > c.worst_excess || c.failures == 1) {
        c.worst_excess = excess;
        c.worst = i;
      }
    }
    if (!std::isnan(err)) c.max_abs = std::max(c.max_abs, err);
  }
  return c;
}

inline Comparison compare(const std::vector<float>& got, const std::vector<float>& want, double atol, double rtol) {
  return compare_scaled(got, want, want, atol, rtol);
}

// bf16 keeps 8 significant bits: one rounding moves a value by at most half an ulp, i.e. at most
// 2^-8 of its magnitude (the bound is reached just above a power of two).
inline constexpr double kBf16Eps = 1.0 / 256.0;

// Prefill arguments over the test's device buffers (q rows q_stride apart; 0: packed).
inline kernels::cuda::PrefillAttentionArgs prefill_args(const DeviceBuffer& q, const DeviceBuffer& k,
                                                        const DeviceBuffer& v, DeviceBuffer& out, std::int64_t tokens,
                                                        std::int64_t start, int q_heads, int kv_heads, int head_dim,
                                                        std::int64_t q_stride = 0) {
  kernels::cuda::PrefillAttentionArgs a;
  a.q = q.as<Bf16>();
  a.q_stride = q_stride;
  a.k_cache = k.as<Bf16>();
  a.v_cache = v.as<Bf16>();
  a.out = out.as<Bf16>();
  a.tokens = tokens;
  a.start = start;
  a.q_heads = q_heads;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  return a;
}

// Median time in ms of `iters` runs after three warm-ups, each bracketed by events on `stream`
// (the benches' timer).
inline double median_ms(const std::function<void()>& run, cudaStream_t stream, int iters = 20) {
  for (int i = 0; i < 3; ++i) run();
  std::vector<double> times;
  kernels::cuda::Event start, end;
  for (int i = 0; i < iters; ++i) {
    start.record(stream);
    run();
    end.record(stream);
    end.synchronize();
    times.push_back(kernels::cuda::Event::elapsed_ms(start, end));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace zoo::cuda_test
