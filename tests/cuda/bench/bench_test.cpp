// Microbenchmarks of the CUDA ops (hidden: run with `test_cuda "[.bench]"`). They report numbers
// and assert nothing about speed; inputs are random (zeros run faster on tensor cores).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "cuda/cuda_test_util.hpp"
#include "scoped_env.hpp"
#include "zoo/kernels/cuda/attention.hpp"
#include "zoo/kernels/cuda/gemm.hpp"
#include "zoo/kernels/cuda/ops.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;

namespace {

DeviceBuffer random_bf16_buffer(std::mt19937& rng, std::size_t n) { return upload_bf16(random_bf16_values(rng, n)); }

// A decode attention call's settings for the benches: one query token per sequence, lengths on the
// device, the grid sized for kv_len.
DecodeAttentionArgs decode_args(DeviceBuffer& q, DeviceBuffer& out, std::int64_t kv_len,
                                DeviceBuffer& lengths, int q_heads, int kv_heads, int head_dim,
                                DeviceBuffer& workspace) {
  DecodeAttentionArgs a;
  a.q = q.as<Bf16>();
  a.out = out.as<Bf16>();
  a.kv_len = kv_len;
  a.kv_len_device = lengths.as<std::int32_t>();
  a.q_heads = q_heads;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  a.workspace = workspace.data();
  a.workspace_bytes = workspace.size();
  return a;
}

// Median microseconds of one decode attention call with `a`'s settings, over a graph of `layers`
// calls whose layer l reads the caches at k and v + l * cache elements (no layer finds its keys in
// L2). Environment switches are read while the graph is captured.
double decode_attention_us(DecodeAttentionArgs a, DeviceBuffer& k, DeviceBuffer& v, std::size_t cache,
                           int layers, const Stream& stream) {
  CudaGraph graph;
  graph.begin_capture(stream);
  for (int l = 0; l < layers; ++l) {
    a.k_cache = k.as<Bf16>() + l * cache;
    a.v_cache = v.as<Bf16>() + l * cache;
    attention_decode(a, stream);
  }
  graph.end_capture(stream);
  return median_ms([&] { graph.launch(stream); }, stream, 20) * 1e3 / layers;
}

}  // namespace

TEST_CASE("bench: GEMM, attention and elementwise ops", "[.bench][cuda_bench]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1234);
  Stream stream;
  const auto& props = device_properties();
  std::printf("device: %s, %d SMs\n", props.name.c_str(), props.multiprocessors);

  Gemm gemm;
  struct G {
    std::int64_t m, n, k;
  };
  for (const G g : {G{4096, 4096, 4096}, G{8192, 8192, 8192}, G{4096, 24576, 4096}, G{4096, 4096, 12288},
                    G{1, 24576, 4096}, G{1, 151936, 4096}}) {
    DeviceBuffer x = random_bf16_buffer(rng, g.m * g.k), w = random_bf16_buffer(rng, g.n * g.k), y(g.m * g.n * 2);
    const double ms = median_ms(
        [&] { gemm.linear(x.as<Bf16>(), w.as<Bf16>(), y.as<Bf16>(), g.m, g.n, g.k, stream); }, stream);
    const double tflops = 2.0 * g.m * g.n * g.k / (ms * 1e-3) / 1e12;
    const double gbs = 2.0 * (g.m * g.k + g.n * g.k + g.m * g.n) / (ms * 1e-3) / 1e9;
    std::printf("gemm m=%-5lld n=%-6lld k=%-5lld  %8.3f ms  %7.1f TFLOP/s  %7.1f GB/s\n", (long long)g.m,
                (long long)g.n, (long long)g.k, ms, tflops, gbs);
  }

  struct P {
    std::int64_t T;
    int Hq, Hk, D;
  };
  // Zoo's kernel, then cuDNN's fused attention (PrefillAttention with the length threshold off;
  // its first call, which builds the plan, is outside the timing).
  PrefillAttention engines;
  const std::string cudnn_off = PrefillAttention::cudnn_unavailable_reason();
  const zoo::test::ScopedEnv every_length("ZOO_CUDNN_MIN_TOKENS", "1");
  for (const P p : {P{4096, 32, 8, 128}, P{4096, 16, 8, 128}, P{4096, 32, 8, 64}, P{4096, 16, 4, 256},
                    P{16384, 32, 8, 128}, P{512, 32, 8, 128}, P{1024, 32, 8, 128}, P{2048, 32, 8, 128},
                    P{8192, 32, 8, 128}, P{1024, 16, 8, 128}, P{2048, 16, 8, 128}}) {
    DeviceBuffer q = random_bf16_buffer(rng, p.T * p.Hq * p.D), k = random_bf16_buffer(rng, p.T * p.Hk * p.D),
                 v = random_bf16_buffer(rng, p.T * p.Hk * p.D), o(p.T * p.Hq * p.D * 2);
    const auto a = prefill_args(q, k, v, o, p.T, 0, p.Hq, p.Hk, p.D);
    const double ms = median_ms([&] { attention_prefill(a, stream); }, stream, 10);
    // Causal FLOPs: query i sees i + 1 keys; 2 matmuls of 2 * D FLOPs per (query, key).
    const double flops = 4.0 * p.D * p.Hq * (static_cast<double>(p.T) * (p.T + 1) / 2);
    std::printf("prefill attention T=%-5lld heads %d/%d D=%-3d  %8.3f ms  %7.1f TFLOP/s (causal)\n", (long long)p.T,
                p.Hq, p.Hk, p.D, ms, flops / (ms * 1e-3) / 1e12);
    if (!cudnn_off.empty()) continue;
    engines.run(a, stream);
    stream.synchronize();
    if (std::string(engines.last_engine()) != "cudnn") {
      std::printf("cudnn prefill attention T=%-5lld heads %d/%d D=%-3d  refused (ZOO_CUDNN_LOG=1 says why)\n",
                  (long long)p.T, p.Hq, p.Hk, p.D);
      continue;
    }
    const double cudnn_ms = median_ms([&] { engines.run(a, stream); }, stream, 10);
    std::printf("cudnn prefill attention T=%-5lld heads %d/%d D=%-3d  %8.3f ms  %7.1f TFLOP/s (causal)\n",
                (long long)p.T, p.Hq, p.Hk, p.D, cudnn_ms, flops / (cudnn_ms * 1e-3) / 1e12);
  }

  for (const std::int64_t ctx : {std::int64_t{1024}, std::int64_t{4096}, std::int64_t{32768}}) {
    const int Hq = 32, Hk = 8, D = 128;
    DeviceBuffer q = random_bf16_buffer(rng, Hq * D), k = random_bf16_buffer(rng, ctx * Hk * D),
                 v = random_bf16_buffer(rng, ctx * Hk * D), o(Hq * D * 2);
    DeviceBuffer ws(decode_attention_workspace_bytes(1, Hq, D));
    ws.fill_bytes(0);
    DecodeAttentionArgs a;
    a.q = q.as<Bf16>();
    a.k_cache = k.as<Bf16>();
    a.v_cache = v.as<Bf16>();
    a.out = o.as<Bf16>();
    a.kv_len = ctx;
    a.q_heads = Hq;
    a.kv_heads = Hk;
    a.head_dim = D;
    a.workspace = ws.data();
    a.workspace_bytes = ws.size();
    const double ms = median_ms([&] { attention_decode(a, stream); }, stream, 50);
    const double bytes = 2.0 * ctx * Hk * D * 2;
    std::printf("decode attention ctx=%-6lld heads %d/%d D=%d  %8.1f us  %7.1f GB/s (K+V read)\n", (long long)ctx, Hq,
                Hk, D, ms * 1e3, bytes / (ms * 1e-3) / 1e9);
  }

  {
    const std::int64_t rows = 4096, dim = 4096, inter = 12288;
    DeviceBuffer x = random_bf16_buffer(rng, rows * dim), h = random_bf16_buffer(rng, rows * dim),
                 w = random_bf16_buffer(rng, dim), y(rows * dim * 2);
    double ms = median_ms([&] { rms_norm(x.as<Bf16>(), w.as<Bf16>(), y.as<Bf16>(), rows, dim, 1e-6f, stream); },
                          stream);
    std::printf("rms_norm [%lld, %lld]  %8.1f us  %7.1f GB/s\n", (long long)rows, (long long)dim, ms * 1e3,
                4.0 * rows * dim / (ms * 1e-3) / 1e9);
    ms = median_ms(
        [&] { add_rms_norm(h.as<Bf16>(), x.as<Bf16>(), w.as<Bf16>(), y.as<Bf16>(), rows, dim, 1e-6f, stream); },
        stream);
    std::printf("add_rms_norm [%lld, %lld]  %8.1f us  %7.1f GB/s\n", (long long)rows, (long long)dim, ms * 1e3,
                8.0 * rows * dim / (ms * 1e-3) / 1e9);
    DeviceBuffer gu = random_bf16_buffer(rng, rows * 2 * inter), act(rows * inter * 2);
    ms = median_ms([&] { silu_and_mul(gu.as<Bf16>(), act.as<Bf16>(), rows, inter, stream); }, stream);
    std::printf("silu_and_mul [%lld, %lld]  %8.1f us  %7.1f GB/s\n", (long long)rows, (long long)inter, ms * 1e3,
                6.0 * rows * inter / (ms * 1e-3) / 1e9);
  }
  {
    const std::int64_t T = 4096;
    const int Hq = 32, Hk = 8, D = 128;
    DeviceBuffer qkv = random_bf16_buffer(rng, T * (Hq + 2 * Hk) * D), nw = random_bf16_buffer(rng, D);
    DeviceBuffer qo(T * Hq * D * 2), kc(T * Hk * D * 2), vc(T * Hk * D * 2);
    QkNormRopeArgs a;
    a.q = qkv.as<Bf16>();
    a.k = a.q + Hq * D;
    a.v = a.k + Hk * D;
    a.q_stride = a.k_stride = a.v_stride = (Hq + 2 * Hk) * D;
    a.q_norm_weight = a.k_norm_weight = nw.as<Bf16>();
    a.q_out = qo.as<Bf16>();
    a.k_cache = kc.as<Bf16>();
    a.v_cache = vc.as<Bf16>();
    a.tokens = T;
    a.q_heads = Hq;
    a.kv_heads = Hk;
    a.head_dim = D;
    const double ms = median_ms([&] { qk_norm_rope_cache(a, stream); }, stream);
    std::printf("qk_norm_rope_cache T=%lld heads %d/%d D=%d  %8.1f us  %7.1f GB/s\n", (long long)T, Hq, Hk, D,
                ms * 1e3, 4.0 * T * (Hq + 2 * Hk) * D / (ms * 1e-3) / 1e9);
  }
  {
    const std::int64_t V = 151936;
    std::vector<float> logits(V);
    std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
    for (auto& l : logits) l = dist(rng);
    DeviceBuffer x = upload(logits), am(4), ls(V * 4), idx(64 * 4), val(64 * 4);
    DeviceBuffer ws(top_k_workspace_bytes(1, V, 64));
    double ms = median_ms([&] { argmax_rows(x.as<float>(), 1, V, am.as<std::int32_t>(), stream); }, stream, 50);
    std::printf("argmax [1, %lld]  %8.1f us\n", (long long)V, ms * 1e3);
    ms = median_ms([&] { log_softmax_rows(x.as<float>(), ls.as<float>(), 1, V, stream); }, stream, 50);
    std::printf("log_softmax [1, %lld]  %8.1f us\n", (long long)V, ms * 1e3);
    for (int k : {1, 50, 64}) {
      ms = median_ms(
          [&] {
            top_k_rows(x.as<float>(), 1, V, k, idx.as<std::int32_t>(), val.as<float>(), ws.data(), ws.size(), stream);
          },
          stream, 50);
      std::printf("top_k k=%d [1, %lld]  %8.1f us\n", k, (long long)V, ms * 1e3);
    }
  }
  std::fflush(stdout);
  SUCCEED();
}

// The decode GEMMs (m = 1) of the benchmark shapes, and a few m, through the GEMV kernel and
// through cuBLASLt, as decode runs them: from HBM (each call reads its own copy of W, the copies
// together several times the L2) and back to back in a CUDA graph (no launch gaps).
// `test_cuda "[gemv_bench]"`.
TEST_CASE("bench: decode GEMMs, GEMV kernel vs cuBLASLt", "[.bench][gemv_bench]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(4321);
  Stream stream;
  Gemm gemm;
  struct G {
    const char* name;
    std::int64_t n, k;
    bool f32;
  };
  const G shapes[] = {
      {"0.6B qkv", 4096, 1024, false},   {"0.6B o", 1024, 2048, false},     {"0.6B gate_up", 6144, 1024, false},
      {"0.6B down", 1024, 3072, false},  {"0.6B head", 151936, 1024, true}, {"4B qkv", 6144, 2560, false},
      {"4B o", 2560, 4096, false},       {"4B gate_up", 19456, 2560, false}, {"4B down", 2560, 9728, false},
      {"4B head", 151936, 2560, true},   {"8B qkv", 6144, 4096, false},     {"8B o", 4096, 4096, false},
      {"8B gate_up", 24576, 4096, false}, {"8B down", 4096, 12288, false},  {"8B head", 151936, 4096, true},
  };
  const std::size_t pool_bytes = std::size_t{2} << 30;  // 2 GiB of weight copies: ~35x the L2
  DeviceBuffer pool(pool_bytes);
  {
    // Random bits of bf16 range: fill with a pattern of modest finite values (zeros would not do
    // for tensor cores; the GEMV kernel does not care).
    const auto vals = random_bf16_values(rng, 1 << 20);
    const auto host = to_bf16(vals);
    for (std::size_t off = 0; off < pool_bytes; off += host.size() * 2)
      pool.upload(host.data(), std::min(host.size() * 2, pool_bytes - off), off);
  }
  DeviceBuffer x = random_bf16_buffer(rng, 8 * 12288), y(std::size_t{8} * 151936 * 4);
  const std::int64_t ms_rows[] = {1, 2, 4, 8};
  std::printf("%-13s %7s %6s %2s %10s %9s %10s %9s %7s\n", "shape", "n", "k", "m", "cublas us", "GB/s", "gemv us",
              "GB/s", "speedup");
  for (const G& g : shapes) {
    const std::size_t wbytes = static_cast<std::size_t>(g.n * g.k * 2);
    const std::size_t wstride = (wbytes + 255) / 256 * 256;
    const int copies = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(64, pool_bytes / wstride)));
    for (const std::int64_t m : ms_rows) {
      if (m > 1 && std::string(g.name).find("8B") == std::string::npos) continue;  // m sweep on the 8B shapes
      double us[2] = {0, 0};
      for (int path = 0; path < 2; ++path) {
        gemm.set_gemv_max_rows(path == 0 ? 0 : 8);
        auto call = [&](int c) {
          const Bf16* w = reinterpret_cast<const Bf16*>(static_cast<const char*>(pool.data()) + c * wstride);
          if (g.f32)
            gemm.linear(x.as<Bf16>(), w, y.as<float>(), m, g.n, g.k, stream);
          else
            gemm.linear(x.as<Bf16>(), w, y.as<Bf16>(), m, g.n, g.k, stream);
        };
        call(0);  // plans outside the capture
        stream.synchronize();
        CudaGraph graph;
        graph.begin_capture(stream);
        for (int c = 0; c < copies; ++c) call(c);
        graph.end_capture(stream);
        const double ms = median_ms([&] { graph.launch(stream); }, stream, 7);
        us[path] = ms * 1e3 / copies;
      }
      const double gb = (static_cast<double>(wbytes) + m * g.k * 2.0 + m * g.n * (g.f32 ? 4.0 : 2.0)) / 1e9;
      std::printf("%-13s %7lld %6lld %2lld %10.2f %9.0f %10.2f %9.0f %6.2fx\n", g.name, (long long)g.n,
                  (long long)g.k, (long long)m, us[0], gb / (us[0] * 1e-6), us[1], gb / (us[1] * 1e-6),
                  us[0] / us[1]);
    }
  }
  std::fflush(stdout);
  SUCCEED();
}

// Decode attention as a decode step runs it: a CUDA graph of one call per layer (8 layers, each its
// own cache, so nothing stays in L2 between calls), the grid sized for the length's graph bucket
// (the next power of two >= 256) and the true length read on the device. Per ZOO_DECODE_ATTN policy
// (0: host-sized splits and a second kernel; 1: device-sized splits merged by the last block;
// default: device-sized splits merged in a thread-block cluster up to 1024 keys, 0 beyond) and with
// programmatic dependent launch off (ZOO_PDL=0) or on.
TEST_CASE("bench: decode attention in graphs, per policy", "[.bench][decode_attn_bench]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(7);
  Stream stream;
  const int layers = 8, D = 128;
  for (const auto& heads : {std::pair{32, 8}, std::pair{16, 8}}) {
    const int Hq = heads.first, Hk = heads.second;
    for (const std::int64_t len : {std::int64_t{64}, std::int64_t{540}, std::int64_t{1000}, std::int64_t{4000},
                                   std::int64_t{16000}}) {
      std::int64_t bucket = 256;
      while (bucket < len) bucket *= 2;
      const std::size_t cache = static_cast<std::size_t>(bucket) * Hk * D;
      DeviceBuffer q = random_bf16_buffer(rng, Hq * D), o(Hq * D * 2), k(layers * cache * 2), v(layers * cache * 2);
      k.fill_bytes(0x3c);
      v.fill_bytes(0x3c);
      DeviceBuffer ws(decode_attention_workspace_bytes(8, Hq, D));
      ws.fill_bytes(0);
      const std::vector<std::int32_t> l32 = {static_cast<std::int32_t>(len)};
      DeviceBuffer dlen = upload(l32);
      std::printf("decode attention graph heads %d/%d ctx %-6lld (bucket %lld):", Hq, Hk, (long long)len,
                  (long long)bucket);
      const DecodeAttentionArgs a = decode_args(q, o, bucket, dlen, Hq, Hk, D, ws);
      // Policy, then PDL on or off (ZOO_PDL=0: each call waits for the previous one to finish
      // before it starts; with PDL the next call loads its first K/V tiles meanwhile).
      for (const auto& [policy, pdl] : {std::pair{"0", false}, std::pair{"1", false}, std::pair{"default", false},
                                        std::pair{"0", true}, std::pair{"1", true}, std::pair{"default", true}}) {
        const zoo::test::ScopedEnv policy_env("ZOO_DECODE_ATTN", std::string(policy) == "default" ? nullptr : policy);
        const zoo::test::ScopedEnv pdl_env("ZOO_PDL", pdl ? "1" : "0");
        const double us = decode_attention_us(a, k, v, cache, layers, stream);
        std::printf("  policy %s%s %6.2f us", policy, pdl ? "+pdl" : "", us);
      }
      std::printf("   (K+V %.2f MB per call)\n", 2.0 * len * Hk * D * 2 / 1e6);
    }
  }
}

// Decode attention of a batch step (the batch runtime's shape): B sequences of 512..543 keys in
// shuffled 16-row pages, Qwen3-8B's heads (32/8, head_dim 128), the grid sized for the runner's
// kv bucket (1024), lengths read on the device, captured in a graph over `layers` caches (so no
// layer finds its keys in L2). Effective bandwidth counts each sequence's K and V bytes once.
TEST_CASE("bench: batched decode attention over pages", "[.bench][batch_attn_bench]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(11);
  Stream stream;
  const int layers = 4, D = 128, Hq = 32, Hk = 8;
  constexpr std::int64_t P = 16, kBucket = 1024;
  for (const int B : {1, 2, 4, 8, 16, 64, 96, 128, 256}) {
    std::vector<std::int32_t> lens(static_cast<std::size_t>(B));
    std::int64_t keys = 0;
    for (auto& L : lens) keys += L = static_cast<std::int32_t>(512 + rng() % 32);
    const std::int64_t stride = kBucket / P, pages = B * stride;
    std::vector<std::int32_t> table(static_cast<std::size_t>(pages));
    for (std::int64_t i = 0; i < pages; ++i)
      table[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
    std::shuffle(table.begin(), table.end(), rng);
    const std::size_t cache = static_cast<std::size_t>(pages * P) * Hk * D;
    DeviceBuffer q = random_bf16_buffer(rng, static_cast<std::size_t>(B) * Hq * D),
                 o(static_cast<std::size_t>(B) * Hq * D * 2), k(layers * cache * 2), v(layers * cache * 2);
    k.fill_bytes(0x3c);
    v.fill_bytes(0x3c);
    DeviceBuffer ws(decode_attention_workspace_bytes(B, Hq, D)), dlen = upload(lens), dtable = upload(table);
    ws.fill_bytes(0);
    std::printf("batched decode attention B %-4d ctx 512..543:", B);
    DecodeAttentionArgs a = decode_args(q, o, kBucket, dlen, Hq, Hk, D, ws);
    a.batch = B;
    a.page_table = dtable.as<std::int32_t>();
    a.page_stride = stride;
    // The tile loop per ZOO_DECODE_PIPE: 0 the plain one, 1 the pipelined one, default as picked.
    for (const char* pipe : {"0", "1", "default"}) {
      const zoo::test::ScopedEnv pipe_env("ZOO_DECODE_PIPE", std::string(pipe) == "default" ? nullptr : pipe);
      const double us = decode_attention_us(a, k, v, cache, layers, stream);
      std::printf("  pipe %s %8.2f us %6.0f GB/s", pipe, us, 2.0 * keys * Hk * D * 2 / (us * 1e-6) / 1e9);
    }
    {
      const zoo::test::ScopedEnv ticket("ZOO_DECODE_ATTN", "1");  // splits merged by ticket, never a cluster
      const double us = decode_attention_us(a, k, v, cache, layers, stream);
      std::printf("  attn=1 %8.2f us", us);
    }
    std::printf("\n");
  }
}

// One sequence's decode attention at the families' shapes (issue 23's decode at context 512): as a
// Session's decode graph runs it (captured for the 1024-key bucket, the true length on the device),
// over `layers` calls with their own caches, the contiguous cache and the page table of a runner.
TEST_CASE("bench: decode attention at the families' shapes", "[.bench][family_attn_bench]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(5);
  Stream stream;
  struct Shape {
    const char* name;
    int Hq, Hk, D;
    float softcap;
    std::int64_t window;
  };
  const int layers = 8;
  constexpr std::int64_t kBucket = 1024, P = 16;
  for (const Shape s :
       {Shape{"qwen3-8b", 32, 8, 128, 0.0f, 0}, Shape{"mistral-7b", 32, 8, 128, 0.0f, 4096},
        Shape{"olmo2-7b", 32, 32, 128, 0.0f, 0}, Shape{"phi3-mini", 32, 32, 96, 0.0f, 2047},
        Shape{"gemma2-9b", 16, 8, 256, 50.0f, 4096}, Shape{"gemma2-9b unmasked", 16, 8, 256, 0.0f, 0},
        Shape{"gemma3-like", 16, 8, 256, 0.0f, 1024}}) {
    for (const std::int64_t len : {std::int64_t{512}, std::int64_t{4000}}) {
      const std::int64_t bucket = len <= kBucket ? kBucket : 4096;
      const std::size_t cache = static_cast<std::size_t>(bucket) * s.Hk * s.D;
      DeviceBuffer q = random_bf16_buffer(rng, static_cast<std::size_t>(s.Hq) * s.D), o(s.Hq * s.D * 2),
                   k = random_bf16_buffer(rng, layers * cache), v = random_bf16_buffer(rng, layers * cache);
      DeviceBuffer ws(decode_attention_workspace_bytes(1, s.Hq, s.D));
      ws.fill_bytes(0);
      DeviceBuffer dlen = upload(std::vector<std::int32_t>{static_cast<std::int32_t>(len)});
      std::vector<std::int32_t> table(static_cast<std::size_t>(bucket / P));
      for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
      std::shuffle(table.begin(), table.end(), rng);
      DeviceBuffer dtable = upload(table);
      DecodeAttentionArgs a = decode_args(q, o, bucket, dlen, s.Hq, s.Hk, s.D, ws);
      a.softcap = s.softcap;
      a.window = s.window;
      const double contiguous = decode_attention_us(a, k, v, cache, layers, stream);
      a.page_table = dtable.as<std::int32_t>();
      a.page_stride = static_cast<std::int64_t>(table.size());
      const double paged = decode_attention_us(a, k, v, cache, layers, stream);
      const double keys = static_cast<double>(s.window > 0 ? std::min(len, s.window) : len);
      const double bytes = 2.0 * keys * s.Hk * s.D * 2;
      std::printf(
          "decode attention %-20s heads %2d/%-2d D=%-3d len %-5lld  contiguous %7.2f us (%6.0f GB/s)  paged "
          "%7.2f us |",
          s.name, s.Hq, s.Hk, s.D, (long long)len, contiguous, bytes / (contiguous * 1e-6) / 1e9, paged);
      // The split policies (ZOO_DECODE_ATTN) and the pipelined loop, paged.
      for (const char* policy : {"1", "2", "4", "0"}) {
        const zoo::test::ScopedEnv env("ZOO_DECODE_ATTN", policy);
        std::printf(" attn=%s %6.2f", policy, decode_attention_us(a, k, v, cache, layers, stream));
      }
      {
        const zoo::test::ScopedEnv env("ZOO_DECODE_ATTN", "1");
        const zoo::test::ScopedEnv pipe("ZOO_DECODE_PIPE", "1");
        std::printf(" attn=1,pipe %6.2f", decode_attention_us(a, k, v, cache, layers, stream));
      }
      std::printf("\n");
    }
  }
}
