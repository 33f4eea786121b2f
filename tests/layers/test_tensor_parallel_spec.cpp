// One rank's share of a decoder (zoo/layers/tensor_parallel.hpp) against real fixtures: each rank's
// DecoderSpec asks for exactly the shapes its ShardedWeightSource presents, the ranks' slices put
// back together are the whole tensors (kv heads replicated where fewer than the ranks), and splits
// that do not divide, or that the decoder cannot split yet, are refused by name. The split math
// itself is tested against one rank in test_engine "[tensor_parallel]".
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "zoo/checkpoint.hpp"
#include "zoo/error.hpp"
#include "zoo/layers/hf_config.hpp"
#include "zoo/layers/tensor_parallel.hpp"

using namespace zoo;
using zoo::layers::DecoderShard;
using zoo::layers::DecoderSpec;
using zoo::layers::shard_decoder;

namespace {

std::filesystem::path fixture(const char* name) {
  return std::filesystem::path(ZOO_SOURCE_DIR) / "tests/fixtures" / name;
}

DecoderSpec spec_of(const char* name) {
  std::ifstream in(fixture(name) / "config.json");
  return layers::read_hf_decoder_config(nlohmann::json::parse(in), name, std::string(name) + "/config.json");
}

// Row r of a [rows, cols] float tensor (any float dtype: compared as bytes).
std::string row_bytes(const TensorView& t, std::int64_t r) {
  const std::size_t row = t.nbytes() / static_cast<std::size_t>(t.shape[0]);
  return {static_cast<const char*>(t.data) + r * row, row};
}
// Columns [c0, c0 + n) of row r.
std::string col_bytes(const TensorView& t, std::int64_t r, std::int64_t c0, std::int64_t n) {
  const std::size_t elem = dtype_size(t.dtype);
  return {static_cast<const char*>(t.data) + (r * t.shape[1] + c0) * elem,
          static_cast<std::size_t>(n) * elem};
}

}  // namespace

TEST_CASE("tensor parallel shards: each rank's spec asks for the shapes its weights have",
          "[tensor_parallel]") {
  for (const char* name : {"qwen3-tiny", "llama-tiny"}) {
    const DecoderSpec spec = spec_of(name);
    auto base = open_checkpoint(fixture(name));
    for (const int ranks : {1, 2, 4}) {
      INFO(name << " over " << ranks << " ranks");
      std::int64_t vocab_next = 0, heads = 0, inter = 0;
      for (int r = 0; r < ranks; ++r) {
        const DecoderShard shard = shard_decoder(spec, r, ranks);
        REQUIRE_NOTHROW(shard.spec.check("rank"));
        CHECK(shard.adds_row_parallel_bias == (r == 0));
        CHECK(shard.vocab_begin == vocab_next);
        vocab_next = shard.vocab_end;
        heads += shard.spec.num_heads;
        inter += shard.spec.intermediate_size;
        const ShardedWeightSource source(base, shard.rules, r, ranks);
        for (const auto& req : layers::decoder_requirements(shard.spec)) {
          INFO(req.name);
          const auto info = source.info(req.name);
          if (!info) {
            CHECK(req.optional);
            continue;
          }
          CHECK(info->shape == req.shape);
        }
      }
      CHECK(vocab_next == spec.vocab_size);
      CHECK(heads == spec.num_heads);
      CHECK(inter == spec.intermediate_size);
    }
  }
}

TEST_CASE("tensor parallel shards: the ranks' slices make the whole tensors", "[tensor_parallel]") {
  const DecoderSpec spec = spec_of("qwen3-tiny");  // 4 heads, 2 kv heads of 16, intermediate 160
  auto base = open_checkpoint(fixture("qwen3-tiny"));
  const std::string q = spec.layer_tensor(1, spec.names.q_proj), k = spec.layer_tensor(1, spec.names.k_proj),
                    o = spec.layer_tensor(1, spec.names.o_proj),
                    down = spec.layer_tensor(1, spec.names.down_proj);
  const TensorView wq = base->view(q), wk = base->view(k), wo = base->view(o), wdown = base->view(down);
  for (const int ranks : {2, 4}) {
    INFO(ranks << " ranks");
    std::int64_t q_row = 0, o_col = 0, down_col = 0;
    for (int r = 0; r < ranks; ++r) {
      const ShardedWeightSource source(base, shard_decoder(spec, r, ranks).rules, r, ranks);
      const TensorView sq = source.view(q), sk = source.view(k), so = source.view(o),
                       sdown = source.view(down);
      for (std::int64_t i = 0; i < sq.shape[0]; ++i) CHECK(row_bytes(sq, i) == row_bytes(wq, q_row + i));
      q_row += sq.shape[0];
      // Kv heads: 2 over 4 ranks is one each, ranks 0-1 holding head 0 and ranks 2-3 head 1 (the
      // kv head of their query heads).
      const std::int64_t kv_head = ranks == 4 ? r / 2 : r;
      REQUIRE(sk.shape[0] == spec.head_dim);
      for (std::int64_t i = 0; i < sk.shape[0]; ++i)
        CHECK(row_bytes(sk, i) == row_bytes(wk, kv_head * spec.head_dim + i));
      for (std::int64_t i = 0; i < so.shape[0]; ++i)
        CHECK(col_bytes(so, i, 0, so.shape[1]) == col_bytes(wo, i, o_col, so.shape[1]));
      o_col += so.shape[1];
      for (std::int64_t i = 0; i < sdown.shape[0]; ++i)
        CHECK(col_bytes(sdown, i, 0, sdown.shape[1]) == col_bytes(wdown, i, down_col, sdown.shape[1]));
      down_col += sdown.shape[1];
    }
    CHECK(q_row == wq.shape[0]);
    CHECK(o_col == wo.shape[1]);
    CHECK(down_col == wdown.shape[1]);
  }
}

TEST_CASE("tensor parallel shards: splits that do not divide, or not yet split, are refused by name",
          "[tensor_parallel]") {
  const DecoderSpec spec = spec_of("qwen3-tiny");
  const auto refused = [](const DecoderSpec& s, int ranks, const char* words) {
    INFO(words);
    CHECK_THROWS_WITH(shard_decoder(s, 0, ranks), Catch::Contains(words));
    CHECK_THROWS_AS(shard_decoder(s, 0, ranks), InputError);
  };
  refused(spec, 3, "its 4 attention heads do not split over 3 ranks");
  refused(spec, 8, "its 4 attention heads do not split over 8 ranks");
  DecoderSpec odd_mlp = spec;
  odd_mlp.intermediate_size = 162;
  refused(odd_mlp, 4, "its 162 intermediate units do not split over 4 ranks");
  DecoderSpec odd_vocab = spec;
  odd_vocab.vocab_size = 385;
  refused(odd_vocab, 2, "its 385 vocabulary rows do not split over 2 ranks");
  DecoderSpec three_kv = spec;
  three_kv.num_heads = 6;
  three_kv.num_kv_heads = 3;
  refused(three_kv, 2, "its 3 kv heads do not split over 2 ranks");
  // A q/k norm over the whole projection splits its weights by heads like the projection (the
  // backend sums its squares over the ranks).
  DecoderSpec whole = spec;
  whole.qk_norm = layers::QkNorm::whole;
  const DecoderShard whole_shard = shard_decoder(whole, 1, 4);
  CHECK(whole_shard.kv_replicas == 2);
  const auto splits = [&](const std::string& suffix) {
    return std::any_of(whole_shard.rules.begin(), whole_shard.rules.end(),
                       [&](const ShardRule& rule) { return rule.suffix == suffix && rule.dim == 0; });
  };
  CHECK(splits("self_attn.q_norm.weight"));
  CHECK(splits("self_attn.k_norm.weight"));
  DecoderSpec moe = spec;
  moe.layers.assign(static_cast<std::size_t>(spec.num_layers),
                    layers::LayerSpec{.mlp = layers::MlpKind::moe});
  moe.moe = {.experts = 4, .top_k = 2, .intermediate_size = 32};
  refused(moe, 2, "mixture-of-experts layers are not split yet");
  CHECK_NOTHROW(shard_decoder(moe, 0, 1));  // one rank splits nothing
}
