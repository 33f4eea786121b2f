#include "zoo/layers/tensor_parallel.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <tuple>

#include "zoo/error.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

DecoderShard shard_decoder(const DecoderSpec& spec, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw std::invalid_argument(fmt::format("shard_decoder: rank {} of {}", rank, ranks));
  const std::string label = fmt::format("{}: tensor parallelism over {} ranks", spec.family, ranks);
  if (spec.moe_layers() > 0 && ranks > 1)
    throw InputError(label + ": mixture-of-experts layers are not split yet");
  // Query heads, the intermediate size and the vocabulary must divide: a replicated query head or
  // MLP unit would enter the all-reduce once per copy.
  const auto divides = [&](std::int64_t count, const char* what) {
    if (count % ranks != 0)
      throw InputError(fmt::format("{}: its {} {} do not split over {} ranks", label, count, what, ranks));
  };
  divides(spec.num_heads, "attention heads");
  divides(spec.intermediate_size, "intermediate units");
  divides(spec.vocab_size, "vocabulary rows");
  const auto [kv_begin, kv_end] = shard_units(spec.num_kv_heads, rank, ranks,
                                              fmt::format("{}: its {} kv heads", label, spec.num_kv_heads));

  DecoderShard shard;
  shard.spec = spec;
  shard.spec.num_heads = spec.num_heads / ranks;
  shard.spec.num_kv_heads = kv_end - kv_begin;
  shard.spec.intermediate_size = spec.intermediate_size / ranks;
  shard.vocab_begin = spec.vocab_size / ranks * rank;
  shard.vocab_end = shard.vocab_begin + spec.vocab_size / ranks;
  shard.adds_row_parallel_bias = rank == 0;
  shard.rank = rank;
  shard.ranks = ranks;
  shard.kv_replicas = spec.num_kv_heads < ranks ? ranks / static_cast<int>(spec.num_kv_heads) : 1;
  if (ranks == 1) return shard;

  const DecoderTensorNames& n = spec.names;
  const auto rule = [&](const std::string& module, const char* kind, int dim, std::int64_t units,
                        const char* unit) {
    shard.rules.push_back({fmt::format("{}.{}", module, kind), dim, units, unit});
  };
  for (const auto& [module, units, unit] :
       {std::tuple{n.q_proj, spec.num_heads, "heads"}, std::tuple{n.k_proj, spec.num_kv_heads, "kv heads"},
        std::tuple{n.v_proj, spec.num_kv_heads, "kv heads"}}) {
    rule(module, "weight", 0, units, unit);
    if (spec.qkv_bias) rule(module, "bias", 0, units, unit);
  }
  if (spec.qk_norm == QkNorm::whole) {
    rule(n.q_norm, "weight", 0, spec.num_heads, "heads");
    rule(n.k_norm, "weight", 0, spec.num_kv_heads, "kv heads");
  }
  rule(n.o_proj, "weight", 1, spec.num_heads, "heads");
  for (const std::string& module : {n.gate_proj, n.up_proj}) {
    rule(module, "weight", 0, 0, "intermediate units");
    if (spec.mlp_bias) rule(module, "bias", 0, 0, "intermediate units");
  }
  rule(n.down_proj, "weight", 1, 0, "intermediate units");
  return shard;
}

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI
