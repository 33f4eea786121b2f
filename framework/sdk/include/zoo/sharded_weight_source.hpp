#pragma once
// One rank's weights under tensor parallelism (Megatron style): a WeightSource that presents each
// tensor a rule names as this rank's slice of it, so a model built over it on each rank holds only
// its share. Column-parallel linears (q/k/v, gate/up, a head split by vocabulary) split their rows
// (output features): a slice is a pointer into the mapped checkpoint, nothing is copied.
// Row-parallel linears (o_proj, down_proj) split their columns (input features): the rank's columns
// are copied once, into memory of this source, so a rank never holds a whole tensor it shards.
// Tensors no rule names (norms, embeddings, row-parallel biases) pass through whole.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zoo/weight_source.hpp"

namespace zoo {

struct ShardRule {
  std::string suffix;      // names ending so, e.g. "self_attn.q_proj.weight"
  int dim = 0;             // 0: rows (column-parallel), 1: columns (row-parallel; 2-D tensors)
  std::int64_t units = 0;  // the split dimension is this many equal units (heads); 0: its extent
  std::string unit_name;   // for messages: "heads", "kv heads"
};

// The [begin, end) of units of `units` that rank `rank` of `ranks` holds: units / ranks
// consecutive ones, or, when there are fewer units than ranks and they divide the ranks (kv heads
// replicated), unit rank / (ranks / units). Otherwise an InputError "WHAT do not split over N
// ranks ..." (`what`: "NAME: its 6 heads").
std::pair<std::int64_t, std::int64_t> shard_units(std::int64_t units, int rank, int ranks,
                                                  const std::string& what);

class ShardedWeightSource : public WeightSource {
 public:
  ShardedWeightSource(std::shared_ptr<const WeightSource> base, std::vector<ShardRule> rules, int rank,
                      int ranks);

  std::vector<std::string> names() const override { return base_->names(); }
  // A sharded tensor's info has this rank's extent along the split dimension.
  std::optional<TensorInfo> info(std::string_view name) const override;
  TensorView view(std::string_view name) const override;
  std::string describe() const override;
  std::string stored_name(std::string_view name) const override { return base_->stored_name(name); }
  std::map<std::string, std::string> metadata() const override { return base_->metadata(); }

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }

 private:
  struct Slice {
    const ShardRule* rule = nullptr;
    std::int64_t begin = 0, count = 0;  // along the rule's dimension, in elements
  };
  std::optional<Slice> slice_of(std::string_view name, const TensorInfo& info) const;

  std::shared_ptr<const WeightSource> base_;
  std::vector<ShardRule> rules_;
  int rank_, ranks_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, HostTensor, std::less<>> copies_;  // column slices, made on first view
};

}  // namespace zoo
