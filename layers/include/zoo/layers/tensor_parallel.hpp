#pragma once
// One rank's share of a decoder under tensor parallelism (Megatron style, as transformers'
// `base_model_tp_plan` states it): q/k/v and gate/up split by rows (column-parallel: heads, kv
// heads, intermediate units), o_proj and down_proj by columns (row-parallel: each rank's product
// is a partial sum that an all-reduce completes), the head by vocabulary. What a rank's model
// needs: its sizes as a DecoderSpec and the rules that make a ShardedWeightSource present its
// slices of the checkpoint. The backends' reduce points and the rank threads build on it.
#include <cstdint>
#include <vector>

#include "zoo/layers/decoder.hpp"
#include "zoo/sharded_weight_source.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

struct DecoderShard {
  // The rank's sizes: num_heads / ranks query heads, num_kv_heads / ranks kv heads (one, the rank's
  // group's, when there are fewer kv heads than ranks), intermediate_size / ranks. vocab_size stays
  // whole: every rank embeds every token.
  DecoderSpec spec;
  std::vector<ShardRule> rules;  // for ShardedWeightSource over the checkpoint
  // The head rows (logits) this rank computes; the ranks' ranges tile [0, vocab_size) in order.
  // The head is read whole (a tied head is the embedding table every rank needs anyway).
  std::int64_t vocab_begin = 0, vocab_end = 0;
  // Row-parallel biases (o_proj, down_proj) are added by one rank only, after the reduce they would
  // otherwise enter `ranks` times.
  bool adds_row_parallel_bias = false;
  int rank = 0, ranks = 1;
  // Ranks holding the same kv heads (ranks / num_kv_heads where there are fewer kv heads than
  // ranks, else 1): what a gather of k or v, or a sum over the whole k projection, counts once.
  int kv_replicas = 1;
};

// Rank `rank` of `ranks`. An InputError naming the spec's family and the counts when the heads,
// the intermediate size or the vocabulary do not split over the ranks (kv heads may be fewer than
// the ranks when they divide them: replicated), and for what the split does not do yet:
// mixture-of-experts layers. A q/k norm over the whole projection splits its weight by heads like
// the projection; its mean of squares is the backend's sum over the ranks.
DecoderShard shard_decoder(const DecoderSpec& spec, int rank, int ranks);

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI
