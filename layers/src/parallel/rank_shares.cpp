// What tensor-parallel ranks of both backends share (rank_shares.hpp).
#include "rank_shares.hpp"

#include <algorithm>
#include <span>

namespace zoo::layers::inline ZOO_LAYERS_ABI {

int split_replicas(Value value, const DecoderShard& shard) {
  switch (value) {
    case Value::q_proj:
    case Value::q_norm:
    case Value::q_rope:
    case Value::attn:
    case Value::gate_proj:
    case Value::up_proj:
    case Value::act:
      return 1;
    case Value::k_proj:
    case Value::k_norm:
    case Value::k_rope:
    case Value::v_proj:
      return shard.kv_replicas;
    default:
      return 0;
  }
}

void gather_columns(Communicator& comm, const float* piece, std::int64_t rows, std::int64_t cols, int replicas,
                    std::vector<float>& scratch, float* out) {
  const int ranks = comm.size();
  const auto n = static_cast<std::size_t>(rows * cols);
  scratch.resize(n * static_cast<std::size_t>(ranks));
  comm.all_gather(std::span(piece, n), scratch);
  const int distinct = ranks / replicas;
  const std::int64_t width = cols * distinct;
  for (int d = 0; d < distinct; ++d)
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(&scratch[static_cast<std::size_t>(d * replicas) * n + static_cast<std::size_t>(r * cols)], cols,
                  out + r * width + d * cols);
}

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI
