#pragma once
// What a tensor-parallel rank of either backend does the same way: which tapped values it holds a
// share of, gathering such a share into the whole tensor on the host, and loading every rank's
// slices of the checkpoint.
#include <cstdint>
#include <memory>
#include <vector>

#include "../decoder_backend.hpp"
#include "../graph/decoder_graph.hpp"
#include "zoo/communicator.hpp"
#include "zoo/layers/tensor_parallel.hpp"
#include "zoo/sharded_weight_source.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

// 0 for a value every rank holds whole, else how many ranks hold the same columns of it (1, or
// the kv replicas for k and v).
int split_replicas(Value value, const DecoderShard& shard);

// Every rank's [rows, cols] piece side by side into `out`, [rows, ranks / replicas * cols]: each
// distinct piece once (the first of each run of `replicas` ranks holding the same columns).
// `scratch` holds the gathered pieces.
void gather_columns(Communicator& comm, const float* piece, std::int64_t rows, std::int64_t cols, int replicas,
                    std::vector<float>& scratch, float* out);

// Loads rank r's backend from its slices of `source` (a ShardedWeightSource over shards[r]), the
// progress of all of them as one.
template <class Backend>
void load_rank_shares(const std::vector<std::shared_ptr<Backend>>& ranks, const std::vector<DecoderShard>& shards,
                      const WeightSource& source, const std::vector<RowTableSource>& tables,
                      const ProgressFn& progress) {
  // Not owned: the sharded sources live only while the ranks take their slices.
  const std::shared_ptr<const WeightSource> base(std::shared_ptr<const WeightSource>(), &source);
  const std::size_t count = ranks.size();
  for (std::size_t r = 0; r < count; ++r) {
    const ShardedWeightSource sharded(base, shards[r].rules, static_cast<int>(r), static_cast<int>(count));
    ProgressFn rank_progress;
    if (progress)
      rank_progress = [&, r](std::size_t done, std::size_t total) { progress(r * total + done, count * total); };
    ranks[r]->load(sharded, tables, rank_progress);
  }
}

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI
