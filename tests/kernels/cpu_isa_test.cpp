// The two CPU op implementations (portable and AVX2/FMA, picked at run time) agree within float32
// rounding, and ZOO_CPU_ISA is honoured. ctest also runs this whole binary with
// ZOO_CPU_ISA=generic, so every other kernel test checks the portable path against its reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_test_util.hpp"
#include "test_skip.hpp"
#include "zoo/kernels/cpu_ops.hpp"

namespace cpu = zoo::kernels::cpu;
using cpu::CpuIsa;
using zoo::kernels::test::Mismatches;
using zoo::kernels::test::normal_vector;

namespace {

// Runs `op` (which writes into its output vector) under both instruction sets and compares the
// outputs elementwise: |generic - avx2| <= atol + rtol * |avx2|.
void check_same(const std::function<std::vector<float>()>& op, double atol, double rtol) {
  const CpuIsa before = cpu::cpu_isa();
  cpu::set_cpu_isa(CpuIsa::generic);
  const std::vector<float> generic = op();
  cpu::set_cpu_isa(CpuIsa::avx2);
  const std::vector<float> avx2 = op();
  cpu::set_cpu_isa(before);
  REQUIRE(generic.size() == avx2.size());
  Mismatches m;
  for (std::size_t i = 0; i < avx2.size(); ++i)
    m.check(static_cast<std::int64_t>(i), generic[i], avx2[i], atol + rtol * std::abs(avx2[i]));
  INFO(m);
  CHECK(m.count == 0);
}

}  // namespace

TEST_CASE("ZOO_CPU_ISA picks the implementation", "[kernels][isa]") {
  const char* env = std::getenv("ZOO_CPU_ISA");
  INFO("ZOO_CPU_ISA=" << (env ? env : "(unset)"));
  CHECK(cpu::cpu_isa() == cpu::resolve_cpu_isa(env));
  if (env != nullptr && std::string(env) == "generic") CHECK(cpu::cpu_isa() == CpuIsa::generic);

  CHECK(cpu::resolve_cpu_isa("generic") == CpuIsa::generic);
  CHECK(cpu::resolve_cpu_isa(nullptr) == (cpu::cpu_isa_supported(CpuIsa::avx2) ? CpuIsa::avx2 : CpuIsa::generic));
  CHECK(cpu::resolve_cpu_isa("auto") == cpu::resolve_cpu_isa(""));
  CHECK_THROWS_WITH(cpu::resolve_cpu_isa("sse9"), Catch::Contains("ZOO_CPU_ISA=sse9") && Catch::Contains("generic"));
  if (cpu::cpu_isa_supported(CpuIsa::avx2)) {
    CHECK(cpu::resolve_cpu_isa("avx2") == CpuIsa::avx2);
  } else {
    CHECK_THROWS_WITH(cpu::resolve_cpu_isa("avx2"), Catch::Contains("ZOO_CPU_ISA=avx2"));
  }
}

TEST_CASE("generic and AVX2 CPU ops agree", "[kernels][isa][isa_agree]") {
  if (!cpu::cpu_isa_supported(CpuIsa::avx2)) ZOO_SKIP("this CPU has no AVX2/FMA: only the generic ops exist here");
  std::mt19937 rng(20261130);
  const std::int64_t k = 389;  // not a multiple of 8: exercises the tails
  const std::int64_t n = 203;

  for (std::int64_t m : {1, 3, 4, 9, 12, 13, 50}) {  // GEMV, small-batch and GEMM paths of the AVX2 linear
    DYNAMIC_SECTION("linear m = " << m) {
      const auto x = normal_vector(rng, m * k), w = normal_vector(rng, n * k), bias = normal_vector(rng, m * n);
      for (bool accumulate : {false, true}) {
        check_same([&] {
          std::vector<float> y = bias;
          cpu::linear(x.data(), w.data(), y.data(), m, n, k, accumulate);
          return y;
        }, 1e-4, 1e-5);
      }
    }
  }
  SECTION("rms_norm") {
    const auto x = normal_vector(rng, 7 * k), w = normal_vector(rng, k);
    check_same([&] {
      std::vector<float> y(x.size());
      cpu::rms_norm(x.data(), w.data(), y.data(), 7, k, 1e-6f);
      return y;
    }, 1e-6, 1e-5);
  }
  SECTION("rope_half_split") {
    const std::int64_t tokens = 5, heads = 3, dim = 64;
    const auto x = normal_vector(rng, tokens * heads * dim);
    const std::vector<std::int64_t> positions{0, 1, 17, 300, 4095};
    check_same([&] {
      std::vector<float> y = x;
      cpu::rope_half_split(y.data(), tokens, heads, dim, positions.data(), 1e6f);
      return y;
    }, 1e-6, 1e-6);
  }
  SECTION("attention_causal_gqa") {
    const std::int64_t tokens = 6, start = 37, qh = 8, kvh = 2, dim = 72, context = start + tokens;
    const auto q = normal_vector(rng, tokens * qh * dim), kc = normal_vector(rng, context * kvh * dim);
    const auto vc = normal_vector(rng, context * kvh * dim);
    check_same([&] {
      std::vector<float> out(q.size());
      cpu::attention_causal_gqa(q.data(), kc.data(), vc.data(), out.data(), tokens, start, qh, kvh, dim,
                                1.0f / std::sqrt(static_cast<float>(dim)));
      return out;
    }, 1e-5, 1e-4);
  }
  SECTION("silu_mul and add_inplace") {
    const auto g = normal_vector(rng, 1000, 4.0f), u = normal_vector(rng, 1000);
    check_same([&] {
      std::vector<float> y(g.size());
      cpu::silu_mul(g.data(), u.data(), y.data(), 1000);
      cpu::add_inplace(y.data(), u.data(), 1000);
      return y;
    }, 1e-6, 1e-6);
  }
}
