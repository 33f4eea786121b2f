// Prefill and decode attention against cpu::attention_causal_gqa on the same bf16-exact inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "cuda/cuda_test_util.hpp"
#include "scoped_env.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/cuda/attention.hpp"

using namespace zoo::kernels::cuda;
using namespace zoo::cuda_test;
namespace cpu = zoo::kernels::cpu;

namespace {

struct AttentionInputs {
  std::vector<float> q, k, v;  // q [T, Hq, D]; k, v [cache_len, Hk, D]
  std::vector<float> ref;      // [T, Hq, D]
};

// Scores spread over a few units (q in [-2, 2], k in [-1, 1]) so the softmax is neither flat
// nor one-hot.
AttentionInputs make_inputs(std::mt19937& rng, std::int64_t T, std::int64_t start, std::int64_t cache_len, int Hq,
                            int Hk, int D) {
  AttentionInputs in;
  in.q = random_bf16_values(rng, T * Hq * D, -2.0f, 2.0f);
  in.k = random_bf16_values(rng, cache_len * Hk * D);
  in.v = random_bf16_values(rng, cache_len * Hk * D);
  in.ref.resize(T * Hq * D);
  cpu::attention_causal_gqa(in.q.data(), in.k.data(), in.v.data(), in.ref.data(), T, start, Hq, Hk, D,
                            1.0f / std::sqrt(static_cast<float>(D)));
  return in;
}

// The output is a convex combination of V rows (|v| <= 1): bf16 probabilities (2^-9 relative
// each) and the bf16 output rounding keep every element within ~2^-8 of the reference; 1e-2
// absolute leaves room for the summation order while any indexing or masking error (O(0.1..1))
// fails.
constexpr double kAttnAtol = 1e-2;
constexpr double kAttnRelL2 = 1e-2;

// The synchronized output's first want.size() bf16 values against the CPU reference, within both gates.
void check_attention(const DeviceBuffer& out, const std::vector<float>& want) {
  const auto c = compare(download_bf16(out, want.size()), want, kAttnAtol, 0.0);
  INFO(c.str());
  CHECK(c.ok());
  CHECK(c.rel_l2() < kAttnRelL2);
}

}  // namespace

TEST_CASE("attention_prefill matches the CPU reference (causal GQA, partial tiles, start offset)", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::uint32_t seed = 1010;  // fixed: a failure reproduces
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Stream stream;
  struct Case {
    std::int64_t tokens, start;
    int q_heads, kv_heads, head_dim;
  };
  // Lengths 1, 7, 63, 65, 4097 (none a tile multiple), GQA ratios 1/2/4/8, head_dim 64/96/128/256,
  // and prefills continuing after cached tokens.
  const Case cases[] = {{1, 0, 4, 4, 64},     {7, 0, 8, 4, 128},   {63, 0, 8, 2, 64},   {65, 0, 16, 2, 128},
                        {65, 100, 8, 8, 128}, {63, 1, 8, 1, 64},   {130, 37, 4, 2, 256}, {1, 200, 8, 1, 128},
                        {4097, 0, 8, 1, 128}, {200, 3000, 4, 2, 64},  {7, 0, 32, 32, 96},  {130, 37, 8, 2, 96}};
  for (const auto& cs : cases) {
    INFO("tokens " << cs.tokens << " start " << cs.start << " heads " << cs.q_heads << "/" << cs.kv_heads << " D "
                   << cs.head_dim);
    const std::int64_t T = cs.tokens, D = cs.head_dim, cache_len = cs.start + T + 3;  // unused tail rows too
    const auto in = make_inputs(rng, T, cs.start, cache_len, cs.q_heads, cs.kv_heads, cs.head_dim);
    DeviceBuffer dq = upload_bf16(in.q), dk = upload_bf16(in.k), dv = upload_bf16(in.v), dout(T * cs.q_heads * D * 2);
    const auto a = prefill_args(dq, dk, dv, dout, T, cs.start, cs.q_heads, cs.kv_heads, cs.head_dim);
    // head_dim 128 has two tile shapes (64 or 128 queries per block, picked by the grid size):
    // ZOO_PREFILL_ROWS forces each in turn.
    for (const char* rows : {"", "64", "128"}) {
      INFO("ZOO_PREFILL_ROWS=" << rows);
      const zoo::test::ScopedEnv env("ZOO_PREFILL_ROWS", *rows ? rows : nullptr);
      dout.fill_bytes(0xff);  // NaN poison: every output must be written
      attention_prefill(a, stream);
      stream.synchronize();
      check_attention(dout, in.ref);
    }
  }
}

TEST_CASE("PrefillAttention through cuDNN's fused attention matches the CPU reference", "[cuda][cudnn]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::string why_not = PrefillAttention::cudnn_unavailable_reason();
  if (!why_not.empty()) ZOO_SKIP("cuDNN attention unavailable: " + why_not);
  const std::uint32_t seed = 1012;  // fixed: a failure reproduces
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Stream stream;
  PrefillAttention attention;
  // Every length through cuDNN (the threshold is for speed, not correctness).
  const zoo::test::ScopedEnv all("ZOO_CUDNN_MIN_TOKENS", "1");
  struct Case {
    std::int64_t tokens, start;
    int q_heads, kv_heads, head_dim;
    std::int64_t q_stride;  // 0: packed
  };
  // Key counts that are and are not multiples of 64/128, GQA 1..8, head_dim 64/96/128/256, prefills
  // after cached tokens (the causal diagonal shifted by `start`), and a strided q (rows of a
  // packed q|k|v projection).
  const Case cases[] = {{1, 0, 4, 4, 64, 0},      {7, 0, 8, 4, 128, 0},    {65, 0, 16, 2, 128, 0},
                        {65, 100, 8, 8, 128, 0},  {130, 37, 4, 2, 256, 0}, {1, 200, 8, 1, 128, 0},
                        {1100, 0, 16, 8, 128, 0}, {300, 0, 8, 2, 64, 1536}, {2048, 777, 32, 8, 128, 0},
                        {1100, 0, 32, 32, 96, 0}, {300, 20, 8, 2, 96, 2304}};
  int through_cudnn = 0;
  for (const auto& cs : cases) {
    INFO("tokens " << cs.tokens << " start " << cs.start << " heads " << cs.q_heads << "/" << cs.kv_heads << " D "
                   << cs.head_dim << " q_stride " << cs.q_stride);
    const std::int64_t T = cs.tokens, D = cs.head_dim, cache_len = cs.start + T + 3;
    const std::int64_t row = cs.q_heads * D, q_stride = cs.q_stride ? cs.q_stride : row;
    const auto in = make_inputs(rng, T, cs.start, cache_len, cs.q_heads, cs.kv_heads, cs.head_dim);
    // q rows at q_stride apart; the gaps hold NaN, which must not be read.
    std::vector<float> q_strided(static_cast<std::size_t>(T * q_stride), std::nanf(""));
    for (std::int64_t t = 0; t < T; ++t)
      std::copy_n(in.q.begin() + t * row, row, q_strided.begin() + t * q_stride);
    DeviceBuffer dq = upload_bf16(q_strided), dk = upload_bf16(in.k), dv = upload_bf16(in.v), dout(T * row * 2);
    const auto a = prefill_args(dq, dk, dv, dout, T, cs.start, cs.q_heads, cs.kv_heads, cs.head_dim, cs.q_stride);
    dout.fill_bytes(0xff);  // NaN poison: every output must be written
    attention.run(a, stream);
    stream.synchronize();
    INFO("engine " << attention.last_engine());
    through_cudnn += std::string(attention.last_engine()) == "cudnn";
    check_attention(dout, in.ref);
    // A second call with the same shape reuses the plan and gives the same bits.
    const auto first = download_bf16(dout, in.ref.size());
    dout.fill_bytes(0xff);
    attention.run(a, stream);
    stream.synchronize();
    CHECK(download_bf16(dout, in.ref.size()) == first);
  }
  // cuDNN may refuse an odd shape (the run falls back to Zoo's kernel, checked above too), but
  // not the common ones: a build whose graph it never accepts must fail here, not pass quietly.
  INFO("ZOO_CUDNN_LOG=1 prints why a shape was refused");
  CHECK(through_cudnn >= 7);
  // ZOO_CUDNN=0 takes Zoo's kernel.
  const zoo::test::ScopedEnv off("ZOO_CUDNN", "0");
  const auto in = make_inputs(rng, 64, 0, 64, 4, 2, 128);
  DeviceBuffer dq = upload_bf16(in.q), dk = upload_bf16(in.k), dv = upload_bf16(in.v), dout(64 * 4 * 128 * 2);
  attention.run(prefill_args(dq, dk, dv, dout, 64, 0, 4, 2, 128), stream);
  stream.synchronize();
  CHECK(std::string(attention.last_engine()) == "zoo");
  check_attention(dout, in.ref);
}

TEST_CASE("attention_decode matches the CPU reference (split sequence, GQA groups, several queries)", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  const std::uint32_t seed = 1011;  // fixed: a failure reproduces
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Stream stream;
  struct Case {
    std::int64_t kv_len;
    int q_tokens, q_heads, kv_heads, head_dim;
    bool device_len;
  };
  const Case cases[] = {{1, 1, 8, 8, 128, false},     {100, 1, 16, 2, 128, false}, {5000, 1, 32, 8, 128, false},
                        {5000, 1, 8, 1, 64, false},   {100, 3, 8, 2, 64, false},   {5000, 4, 16, 4, 128, false},
                        {777, 1, 4, 2, 256, false},   {5000, 1, 32, 8, 128, true}, {100, 2, 16, 1, 128, false},
                        {33, 1, 16, 16, 64, false},  {5000, 1, 32, 32, 96, false}, {100, 3, 8, 2, 96, true}};
  for (const auto& cs : cases) {
    INFO("kv_len " << cs.kv_len << " q_tokens " << cs.q_tokens << " heads " << cs.q_heads << "/" << cs.kv_heads
                   << " D " << cs.head_dim << (cs.device_len ? " (length on the device)" : ""));
    const std::int64_t D = cs.head_dim, cache_len = cs.kv_len + 64;
    const auto in = make_inputs(rng, cs.q_tokens, cs.kv_len - cs.q_tokens, cache_len, cs.q_heads, cs.kv_heads,
                                cs.head_dim);
    DeviceBuffer dq = upload_bf16(in.q), dk = upload_bf16(in.k), dv = upload_bf16(in.v),
                 dout(cs.q_tokens * cs.q_heads * D * 2);
    DeviceBuffer ws(decode_attention_workspace_bytes(cs.q_tokens, cs.q_heads, cs.head_dim));
    ws.fill_bytes(0);
    const std::vector<std::int32_t> len = {static_cast<std::int32_t>(cs.kv_len)};
    DeviceBuffer dlen = upload(len);
    dout.fill_bytes(0xff);
    DecodeAttentionArgs a;
    a.q = dq.as<Bf16>();
    a.k_cache = dk.as<Bf16>();
    a.v_cache = dv.as<Bf16>();
    a.out = dout.as<Bf16>();
    a.q_tokens = cs.q_tokens;
    // With the length on the device, the host value only bounds it (sizes the grid).
    a.kv_len = cs.device_len ? cs.kv_len + 60 : cs.kv_len;
    a.kv_len_device = cs.device_len ? dlen.as<std::int32_t>() : nullptr;
    a.q_heads = cs.q_heads;
    a.kv_heads = cs.kv_heads;
    a.head_dim = cs.head_dim;
    a.workspace = ws.data();
    a.workspace_bytes = ws.size();
    // Every split policy (ZOO_DECODE_ATTN, read per call): the default (splits of short grids
    // merged in a thread-block cluster), 1 (merged by the last block's ticket), 0 (a second kernel);
    // and the default as a device before sm_90 runs it (no cluster: the ticket merge).
    // Each also with the pipelined tile loop forced wherever no cluster merges (ZOO_DECODE_PIPE=1;
    // by default it runs only for grids of many waves).
    for (const char* policy : {"", "1", "0", "pre-hopper"}) {
      for (const char* pipe : {"", "1"}) {
        INFO("ZOO_DECODE_ATTN=" << policy << " ZOO_DECODE_PIPE=" << pipe);
        const bool pre_hopper = std::string_view(policy) == "pre-hopper";
        const zoo::test::ScopedEnv env("ZOO_DECODE_ATTN", *policy && !pre_hopper ? policy : nullptr);
        const zoo::test::ScopedEnv pipe_env("ZOO_DECODE_PIPE", *pipe ? pipe : nullptr);
        // Set for that case only: a run with ZOO_CUDA_PRE_HOPPER=1 throughout (the forced run of
        // tools/gpu/check_cuda.sh) must keep it for the others.
        std::optional<zoo::test::ScopedEnv> arch;
        if (pre_hopper) arch.emplace("ZOO_CUDA_PRE_HOPPER", "1");
        dout.fill_bytes(0xff);
        attention_decode(a, stream);
        stream.synchronize();
        check_attention(dout, in.ref);
      }
    }
  }
}

// A sliding window (and soft-cap), decode and prefill, against the CPU reference. The key and value
// rows that lie before every query's window (down to a 128-row boundary) hold NaN: a kernel that read
// them would carry the NaN into its output (a masked value row is still multiplied by its zero
// weight), so passing shows those rows are skipped, not only masked.
TEST_CASE("attention with a sliding window reads no key before the window (decode and prefill)", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1213);
  Stream stream;
  struct Case {
    std::int64_t tokens, start, window;
    int q_heads, kv_heads, head_dim;
    float softcap;
  };
  // Decode (1-3 tokens) and prefill (longer) steps; windows of one key, shorter than a tile, a few
  // tiles, and longer than the context (nothing skipped); head_dim 64/96/128/256.
  const Case cases[] = {{1, 4999, 100, 32, 8, 128, 0.0f},   {1, 4999, 1, 8, 2, 64, 0.0f},
                        {3, 4997, 17, 16, 8, 256, 50.0f},   {1, 776, 300, 32, 32, 96, 0.0f},
                        {1, 2000, 4096, 16, 4, 128, 30.0f}, {2, 1500, 1024, 16, 8, 256, 0.0f},
                        {300, 4000, 500, 8, 2, 128, 0.0f},  {129, 2000, 64, 8, 8, 64, 20.0f},
                        {70, 3000, 1000, 8, 4, 256, 0.0f},  {1000, 0, 200, 8, 2, 96, 0.0f}};
  for (const auto& cs : cases) {
    INFO("tokens " << cs.tokens << " start " << cs.start << " window " << cs.window << " heads " << cs.q_heads
                   << "/" << cs.kv_heads << " D " << cs.head_dim << " softcap " << cs.softcap);
    const std::int64_t T = cs.tokens, D = cs.head_dim, L = cs.start + T, row = std::int64_t{cs.kv_heads} * D;
    auto in = make_inputs(rng, T, cs.start, L, cs.q_heads, cs.kv_heads, cs.head_dim);
    zoo::kernels::cpu::AttentionOptions options;
    options.scale = 1.0f / std::sqrt(static_cast<float>(D));
    options.softcap = cs.softcap;
    options.window = cs.window;
    cpu::attention_causal_gqa(in.q.data(), in.k.data(), in.v.data(), in.ref.data(), T, cs.start, cs.q_heads,
                              cs.kv_heads, D, options);
    const std::int64_t unseen = std::max<std::int64_t>(0, cs.start - cs.window + 1) / 128 * 128;
    std::fill_n(in.k.begin(), unseen * row, std::numeric_limits<float>::quiet_NaN());
    std::fill_n(in.v.begin(), unseen * row, std::numeric_limits<float>::quiet_NaN());
    DeviceBuffer dq = upload_bf16(in.q), dk = upload_bf16(in.k), dv = upload_bf16(in.v),
                 dout(T * cs.q_heads * D * 2);
    if (T <= 8) {
      DeviceBuffer ws(decode_attention_workspace_bytes(static_cast<int>(T), cs.q_heads, cs.head_dim));
      ws.fill_bytes(0);
      DeviceBuffer dlen = upload(std::vector<std::int32_t>{static_cast<std::int32_t>(L)});
      DecodeAttentionArgs a;
      a.q = dq.as<Bf16>();
      a.k_cache = dk.as<Bf16>();
      a.v_cache = dv.as<Bf16>();
      a.out = dout.as<Bf16>();
      a.q_tokens = static_cast<int>(T);
      a.kv_len = L + 40;  // a graph's bucket: the length itself is on the device
      a.kv_len_device = dlen.as<std::int32_t>();
      a.q_heads = cs.q_heads;
      a.kv_heads = cs.kv_heads;
      a.head_dim = cs.head_dim;
      a.softcap = cs.softcap;
      a.window = cs.window;
      a.workspace = ws.data();
      a.workspace_bytes = ws.size();
      for (const char* policy : {"", "1", "0"}) {
        INFO("ZOO_DECODE_ATTN=" << policy);
        const zoo::test::ScopedEnv env("ZOO_DECODE_ATTN", *policy ? policy : nullptr);
        dout.fill_bytes(0xff);
        attention_decode(a, stream);
        stream.synchronize();
        check_attention(dout, in.ref);
      }
    } else {
      auto a = prefill_args(dq, dk, dv, dout, T, cs.start, cs.q_heads, cs.kv_heads, cs.head_dim);
      a.softcap = cs.softcap;
      a.window = cs.window;
      dout.fill_bytes(0xff);
      attention_prefill(a, stream);
      stream.synchronize();
      check_attention(dout, in.ref);
    }
  }
}

TEST_CASE("attention_decode replays in a CUDA graph at growing lengths", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1012);
  const int Hq = 16, Hk = 4, D = 128;
  const std::int64_t max_len = 3000;
  const auto in = make_inputs(rng, 1, 0, max_len, Hq, Hk, D);  // q and the cache; ref recomputed below
  DeviceBuffer dq = upload_bf16(in.q), dk = upload_bf16(in.k), dv = upload_bf16(in.v), dout(Hq * D * 2);
  DeviceBuffer ws(decode_attention_workspace_bytes(1, Hq, D)), dlen(4);
  ws.fill_bytes(0);
  Stream stream;
  DecodeAttentionArgs a;
  a.q = dq.as<Bf16>();
  a.k_cache = dk.as<Bf16>();
  a.v_cache = dv.as<Bf16>();
  a.out = dout.as<Bf16>();
  a.kv_len = max_len;
  a.kv_len_device = dlen.as<std::int32_t>();
  a.q_heads = Hq;
  a.kv_heads = Hk;
  a.head_dim = D;
  a.workspace = ws.data();
  a.workspace_bytes = ws.size();
  CudaGraph graph;
  graph.begin_capture(stream);
  attention_decode(a, stream);
  graph.end_capture(stream);
  for (std::int32_t len : {1, 129, 2999, 3000}) {
    INFO("length " << len);
    dlen.upload(&len, 4);
    dout.fill_bytes(0xff);
    graph.launch(stream);
    stream.synchronize();
    std::vector<float> ref(Hq * D);
    cpu::attention_causal_gqa(in.q.data(), in.k.data(), in.v.data(), ref.data(), 1, len - 1, Hq, Hk, D,
                              1.0f / std::sqrt(static_cast<float>(D)));
    const auto c = compare(download_bf16(dout, Hq * D), ref, kAttnAtol, 0.0);
    INFO(c.str());
    CHECK(c.ok());
  }
}

TEST_CASE("attention_decode: one workspace serves many calls (split merges leave their tickets at zero)", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(1013);
  Stream stream;
  // The largest shape sizes the shared workspace: 8 query tokens x 32 heads.
  const int max_tokens = 8, max_heads = 32;
  DeviceBuffer ws(decode_attention_workspace_bytes(max_tokens, max_heads, 256));
  ws.fill_bytes(0);
  struct Case {
    std::int64_t kv_len, grid_len;  // grid_len > kv_len: the length is read on the device
    int q_tokens, q_heads, kv_heads, head_dim;
  };
  // Several splits and row groups (8 tokens x group 8 = 4 groups of 16 rows), lengths that leave
  // most of a large grid idle, and one-split calls between multi-split ones.
  const Case cases[] = {{4000, 4000, 1, 32, 8, 128}, {513, 1024, 1, 32, 8, 128}, {129, 8192, 8, 32, 4, 128},
                        {2048, 2048, 8, 16, 2, 64},  {9, 9, 1, 16, 8, 128},      {3001, 4096, 3, 8, 1, 256},
                        {4000, 4000, 1, 32, 8, 128}, {700, 700, 2, 32, 8, 128},  {3001, 4096, 1, 32, 32, 96}};
  for (int round = 0; round < 2; ++round) {
    for (const auto& cs : cases) {
      INFO("round " << round << " kv_len " << cs.kv_len << " grid for " << cs.grid_len << " q_tokens " << cs.q_tokens
                    << " heads " << cs.q_heads << "/" << cs.kv_heads << " D " << cs.head_dim);
      const std::int64_t D = cs.head_dim;
      const auto in = make_inputs(rng, cs.q_tokens, cs.kv_len - cs.q_tokens, cs.kv_len + 8, cs.q_heads, cs.kv_heads,
                                  cs.head_dim);
      DeviceBuffer dq = upload_bf16(in.q), dk = upload_bf16(in.k), dv = upload_bf16(in.v),
                   dout(cs.q_tokens * cs.q_heads * D * 2);
      const std::vector<std::int32_t> len = {static_cast<std::int32_t>(cs.kv_len)};
      DeviceBuffer dlen = upload(len);
      dout.fill_bytes(0xff);
      DecodeAttentionArgs a;
      a.q = dq.as<Bf16>();
      a.k_cache = dk.as<Bf16>();
      a.v_cache = dv.as<Bf16>();
      a.out = dout.as<Bf16>();
      a.q_tokens = cs.q_tokens;
      a.kv_len = cs.grid_len;
      a.kv_len_device = cs.grid_len != cs.kv_len ? dlen.as<std::int32_t>() : nullptr;
      a.q_heads = cs.q_heads;
      a.kv_heads = cs.kv_heads;
      a.head_dim = cs.head_dim;
      a.workspace = ws.data();
      a.workspace_bytes = ws.size();
      DeviceBuffer big_k, big_v;
      if (cs.grid_len > cs.kv_len + 8) {
        // The kernel never reads at or past the true length, but keep the buffers large enough anyway.
        big_k = DeviceBuffer(static_cast<std::size_t>(cs.grid_len) * cs.kv_heads * D * 2);
        big_v = DeviceBuffer(static_cast<std::size_t>(cs.grid_len) * cs.kv_heads * D * 2);
        big_k.fill_bytes(0xff);
        big_v.fill_bytes(0xff);
        ZOO_CUDA_CHECK(cudaMemcpy(big_k.data(), dk.data(), dk.size(), cudaMemcpyDeviceToDevice));
        ZOO_CUDA_CHECK(cudaMemcpy(big_v.data(), dv.data(), dv.size(), cudaMemcpyDeviceToDevice));
        // A device-to-device cudaMemcpy may return before the copy is done, and `stream` (non-blocking)
        // does not wait for the legacy stream: without this the kernel can read the 0xff fill (NaN).
        ZOO_CUDA_CHECK(cudaStreamSynchronize(nullptr));
        a.k_cache = big_k.as<Bf16>();
        a.v_cache = big_v.as<Bf16>();
      }
      attention_decode(a, stream);
      stream.synchronize();
      check_attention(dout, in.ref);
    }
  }
  // The tickets (the workspace's last q_tokens * q_heads ints) are back at zero.
  const std::size_t ticket_bytes = static_cast<std::size_t>(max_tokens) * max_heads * sizeof(int);
  std::vector<int> tickets(max_tokens * max_heads, -1);
  ws.download(tickets.data(), ticket_bytes, ws.size() - ticket_bytes);
  for (int t : tickets) REQUIRE(t == 0);
}

TEST_CASE("attention_decode: a batch of sequences over shuffled KV pages, each as the CPU reference", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(2024);
  Stream stream;
  constexpr std::int64_t P = 16;
  struct Shape {
    int q_heads, kv_heads, head_dim, q_tokens;
  };
  // Lengths: one key, a page boundary either side, a cluster-merged grid, a second-kernel one.
  for (const Shape sh : {Shape{32, 8, 128, 1}, Shape{8, 2, 64, 2}, Shape{16, 8, 256, 1}, Shape{24, 8, 96, 1}}) {
    const std::vector<std::int64_t> lengths = {sh.q_tokens, 15, 16, 17, 33, 777, 5000};
    INFO("heads " << sh.q_heads << "/" << sh.kv_heads << " D " << sh.head_dim << " q_tokens " << sh.q_tokens);
    const int D = sh.head_dim, B = static_cast<int>(lengths.size());
    const std::int64_t row = static_cast<std::int64_t>(sh.kv_heads) * D;
    std::int64_t total_pages = 0, max_pages = 0;
    for (auto L : lengths) {
      total_pages += (L + P - 1) / P;
      max_pages = std::max(max_pages, (L + P - 1) / P);
    }
    std::vector<std::int32_t> order(static_cast<std::size_t>(total_pages));
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
    std::shuffle(order.begin(), order.end(), rng);
    // Cache rows of unused page slots stay NaN-free garbage (zeros); a wrong row shows in the result.
    std::vector<float> k_pool(static_cast<std::size_t>(total_pages * P * row), 0.0f), v_pool(k_pool.size(), 0.0f);
    std::vector<std::int32_t> table(static_cast<std::size_t>(B * max_pages), -1), lens;
    std::vector<float> q_all, ref_all;
    std::int64_t next = 0;
    for (int b = 0; b < B; ++b) {
      const std::int64_t L = lengths[static_cast<std::size_t>(b)];
      const std::int64_t T = sh.q_tokens;
      const auto in = make_inputs(rng, T, L - T, L, sh.q_heads, sh.kv_heads, D);
      for (std::int64_t p = 0; p < (L + P - 1) / P; ++p) table[static_cast<std::size_t>(b * max_pages + p)] = order[next++];
      for (std::int64_t j = 0; j < L; ++j) {
        const std::int64_t slot = table[static_cast<std::size_t>(b * max_pages + j / P)] * P + j % P;
        std::copy_n(&in.k[static_cast<std::size_t>(j * row)], row, &k_pool[static_cast<std::size_t>(slot * row)]);
        std::copy_n(&in.v[static_cast<std::size_t>(j * row)], row, &v_pool[static_cast<std::size_t>(slot * row)]);
      }
      q_all.insert(q_all.end(), in.q.begin(), in.q.end());
      ref_all.insert(ref_all.end(), in.ref.begin(), in.ref.end());
      lens.push_back(static_cast<std::int32_t>(L));
    }
    DeviceBuffer dq = upload_bf16(q_all), dk = upload_bf16(k_pool), dv = upload_bf16(v_pool),
                 dout(q_all.size() * 2), dtable = upload(table), dlens = upload(lens);
    DeviceBuffer ws(decode_attention_workspace_bytes(B * sh.q_tokens, sh.q_heads, D));
    ws.fill_bytes(0);
    DecodeAttentionArgs a;
    a.q = dq.as<Bf16>();
    a.k_cache = dk.as<Bf16>();
    a.v_cache = dv.as<Bf16>();
    a.out = dout.as<Bf16>();
    a.q_tokens = sh.q_tokens;
    a.kv_len = 5000;  // the longest: sizes the grid
    a.kv_len_device = dlens.as<std::int32_t>();
    a.q_heads = sh.q_heads;
    a.kv_heads = sh.kv_heads;
    a.head_dim = D;
    a.workspace = ws.data();
    a.workspace_bytes = ws.size();
    a.batch = B;
    a.page_table = dtable.as<std::int32_t>();
    a.page_stride = max_pages;
    for (const auto& [policy, pipe] : {std::pair{"", ""}, std::pair{"1", ""}, std::pair{"0", ""},
                                       std::pair{"", "1"}, std::pair{"1", "1"}, std::pair{"0", "1"}}) {
      INFO("ZOO_DECODE_ATTN=" << policy << " ZOO_DECODE_PIPE=" << pipe);
      const zoo::test::ScopedEnv env("ZOO_DECODE_ATTN", *policy ? policy : nullptr);
      const zoo::test::ScopedEnv pipe_env("ZOO_DECODE_PIPE", *pipe ? pipe : nullptr);
      for (std::int64_t kv_len : {std::int64_t{5000}, std::int64_t{800}}) {
        // 800: a short-grid bucket (lengths above it are not in this call: drop them)
        const int batch = kv_len == 5000 ? B : B - 1;
        a.kv_len = kv_len;
        a.batch = batch;
        dout.fill_bytes(0xff);
        attention_decode(a, stream);
        stream.synchronize();
        const std::vector<float> want(ref_all.begin(),
                                      ref_all.begin() + static_cast<std::ptrdiff_t>(batch) * sh.q_tokens * sh.q_heads * D);
        check_attention(dout, want);
      }
    }
  }
}

TEST_CASE("attention_prefill over shuffled KV pages: a chunk after a cached prefix, as the CPU reference", "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(77);
  Stream stream;
  constexpr std::int64_t P = 16;
  for (const auto& [T, start, D] : {std::tuple{70, 45, 128}, std::tuple{16, 16, 64}, std::tuple{200, 0, 256},
                                    std::tuple{33, 100, 96}}) {
    INFO("tokens " << T << " start " << start << " D " << D);
    const int Hq = 8, Hk = 2;
    const std::int64_t L = start + T, row = static_cast<std::int64_t>(Hk) * D, pages = (L + P - 1) / P;
    const auto in = make_inputs(rng, T, start, L, Hq, Hk, D);
    std::vector<std::int32_t> table(static_cast<std::size_t>(pages));
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(pages - 1 - i) * 2 + 1;
    std::vector<float> k_pool(static_cast<std::size_t>(2 * pages * P * row), 0.0f), v_pool(k_pool.size(), 0.0f);
    for (std::int64_t j = 0; j < L; ++j) {
      const std::int64_t slot = table[static_cast<std::size_t>(j / P)] * P + j % P;
      std::copy_n(&in.k[static_cast<std::size_t>(j * row)], row, &k_pool[static_cast<std::size_t>(slot * row)]);
      std::copy_n(&in.v[static_cast<std::size_t>(j * row)], row, &v_pool[static_cast<std::size_t>(slot * row)]);
    }
    DeviceBuffer dq = upload_bf16(in.q), dk = upload_bf16(k_pool), dv = upload_bf16(v_pool),
                 dout(in.q.size() * 2), dtable = upload(table);
    PrefillAttentionArgs a;
    a.q = dq.as<Bf16>();
    a.k_cache = dk.as<Bf16>();
    a.v_cache = dv.as<Bf16>();
    a.out = dout.as<Bf16>();
    a.tokens = T;
    a.start = start;
    a.q_heads = Hq;
    a.kv_heads = Hk;
    a.head_dim = D;
    a.pages = dtable.as<std::int32_t>();
    PrefillAttention attention;
    dout.fill_bytes(0xff);
    attention.run(a, stream);
    stream.synchronize();
    CHECK(std::string(attention.last_engine()) == "zoo");
    check_attention(dout, in.ref);
  }
}

TEST_CASE("attention_prefill_tiles: several chunks over their own pages in one launch equal each chunk alone, "
          "bitwise, and tiles split over their keys then merged agree with them",
          "[cuda]") {
  ZOO_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(78);
  Stream stream;
  constexpr std::int64_t P = 16;
  const int Hq = 8, Hk = 2;
  for (const int D : {64, 96, 128, 256}) {
    for (const float softcap : {0.0f, 30.0f}) {
      INFO("D " << D << " softcap " << softcap);
      // (tokens, start) per chunk: a chunk after a cached prefix, a first chunk, a long one, one row.
      const std::vector<std::pair<std::int64_t, std::int64_t>> chunks = {{70, 45}, {16, 0}, {300, 200}, {1, 33}};
      const std::int64_t row = static_cast<std::int64_t>(Hk) * D;
      std::int64_t rows = 0, pool_pages = 0;
      for (const auto& [T, start] : chunks) {
        rows += T;
        pool_pages += (start + T + P - 1) / P;
      }
      // Pages shuffled across the pool (reversed), each chunk its own table in one int32 array.
      const auto k_pool = random_bf16_values(rng, pool_pages * P * row), v_pool = random_bf16_values(rng, pool_pages * P * row);
      const auto q = random_bf16_values(rng, rows * Hq * D, -2.0f, 2.0f);
      std::vector<std::int32_t> tables;
      std::vector<std::int64_t> table_at, row_at;
      std::int64_t next_page = 0, next_row = 0;
      for (const auto& [T, start] : chunks) {
        table_at.push_back(static_cast<std::int64_t>(tables.size()));
        row_at.push_back(next_row);
        next_row += T;
        for (std::int64_t p = 0; p < (start + T + P - 1) / P; ++p)
          tables.push_back(static_cast<std::int32_t>(pool_pages - 1 - next_page++));
      }
      DeviceBuffer dq = upload_bf16(q), dk = upload_bf16(k_pool), dv = upload_bf16(v_pool), dtables = upload(tables),
                   alone(static_cast<std::size_t>(rows * Hq * D) * 2), together(alone.size());
      PrefillAttentionArgs a;
      a.k_cache = dk.as<Bf16>();
      a.v_cache = dv.as<Bf16>();
      a.q_heads = Hq;
      a.kv_heads = Hk;
      a.head_dim = D;
      a.softcap = softcap;
      alone.fill_bytes(0xff);
      together.fill_bytes(0x7f);
      std::vector<std::int32_t> tiles;
      std::vector<std::array<std::int32_t, kPrefillTileInts>> list;
      const std::int64_t tile_rows = attention_prefill_tile_rows(D);
      for (std::size_t c = 0; c < chunks.size(); ++c) {
        const auto [T, start] = chunks[c];
        PrefillAttentionArgs one = a;
        one.q = dq.as<Bf16>() + row_at[c] * Hq * D;
        one.out = alone.as<Bf16>() + row_at[c] * Hq * D;
        one.tokens = T;
        one.start = start;
        one.pages = dtables.as<std::int32_t>() + table_at[c];
        attention_prefill(one, stream);
        for (std::int64_t q0 = 0; q0 < T; q0 += tile_rows)
          list.push_back({static_cast<std::int32_t>(row_at[c]), static_cast<std::int32_t>(T),
                          static_cast<std::int32_t>(start), static_cast<std::int32_t>(table_at[c]),
                          static_cast<std::int32_t>(q0), 0, 0, -1});
      }
      std::stable_sort(list.begin(), list.end(), [](const auto& x, const auto& y) { return x[2] + x[4] > y[2] + y[4]; });
      for (const auto& t : list) tiles.insert(tiles.end(), t.begin(), t.end());
      DeviceBuffer dtiles = upload(tiles);
      a.q = dq.as<Bf16>();
      a.out = together.as<Bf16>();
      a.pages = dtables.as<std::int32_t>();
      attention_prefill_tiles(a, dtiles.as<std::int32_t>(), static_cast<std::int64_t>(list.size()), stream);
      stream.synchronize();
      std::vector<std::uint16_t> x(static_cast<std::size_t>(rows * Hq * D)), y(x.size());
      alone.download(x.data(), x.size() * 2);
      together.download(y.data(), y.size() * 2);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < x.size(); ++i) differ += x[i] != y[i];
      CHECK(differ == 0);
      CHECK(std::find(x.begin(), x.end(), std::uint16_t{0xffff}) == x.end());  // every row written

      // Split-K: each tile of more than 64 keys in 2 or 3 key ranges (multiples of 64), slots
      // merged; a tile with fewer stays whole. Agrees with the chunks alone within bf16 rounding.
      std::vector<std::int32_t> split_tiles, merges;
      std::int32_t slots = 0;
      for (const auto& t : list) {
        const std::int64_t keys = t[2] + t[4] + std::min<std::int64_t>(tile_rows, t[1] - t[4]);
        const std::int64_t blocks64 = (keys + 63) / 64, parts = std::min<std::int64_t>(blocks64, 2 + (t[4] / tile_rows) % 2);
        if (parts < 2) {
          split_tiles.insert(split_tiles.end(), t.begin(), t.end());
          continue;
        }
        merges.insert(merges.end(), {t[0], t[1], t[4], slots, static_cast<std::int32_t>(parts)});
        for (std::int64_t k = 0; k < parts; ++k) {
          auto part = t;
          part[5] = static_cast<std::int32_t>(blocks64 * k / parts * 64);
          part[6] = static_cast<std::int32_t>(blocks64 * (k + 1) / parts * 64);
          part[7] = slots++;
          split_tiles.insert(split_tiles.end(), part.begin(), part.end());
        }
      }
      REQUIRE(slots > 0);
      DeviceBuffer dsplit = upload(split_tiles), dmerges = upload(merges),
                   partial(attention_prefill_partial_bytes(D, Hq, slots)), merged(alone.size());
      merged.fill_bytes(0xff);
      const PrefillSplit split{partial.data(), slots, dmerges.as<std::int32_t>(),
                               static_cast<std::int64_t>(merges.size()) / kPrefillMergeInts};
      a.out = merged.as<Bf16>();
      attention_prefill_tiles(a, dsplit.as<std::int32_t>(),
                              static_cast<std::int64_t>(split_tiles.size()) / kPrefillTileInts, stream, &split);
      stream.synchronize();
      std::vector<float> want(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) want[i] = zoo::bf16_to_f32(x[i]);
      check_attention(merged, want);
    }
  }
}
