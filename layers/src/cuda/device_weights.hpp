#pragma once
// The decoder's weights on the device, bf16, in one allocation: q|k|v and gate|up (and their
// biases) packed by placement into the [qd + 2 kvd, H] and [2I, H] projections the GEMMs read, the
// RoPE table and the row tables beside them.
#include <cstdint>
#include <string>
#include <vector>

#include "../decoder_backend.hpp"
#include "zoo/kernels/cuda/common.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {

namespace cu = zoo::kernels::cuda;
using cu::Bf16;

// Device addresses of one layer's weights inside the single weight allocation.
// Absent parameters (biases, q/k norm, the norms a placement lacks, the MLP kind a layer does not
// have) are null. A mixture-of-experts layer's experts are stacked: experts_gate_up [E][2I][H]
// (each expert's gate rows, then its up rows), experts_down [E][H][I].
struct LayerPtrs {
  Bf16 *input_norm, *qkv, *qkv_bias, *o, *o_bias, *q_norm, *k_norm, *post_norm, *gate_up, *gate_up_bias, *down,
      *down_bias, *post_attn_out_norm, *post_mlp_norm, *router, *experts_gate_up, *experts_down;
};

// A row table (Model::add_row_table) in the weight allocation, bf16.
struct DeviceTable {
  std::string name;
  Bf16* rows = nullptr;
  std::int64_t count = 0;
};

struct DeviceWeights {
  cu::DeviceBuffer storage;
  Bf16 *embed = nullptr, *final_norm = nullptr, *head = nullptr;
  std::vector<float*> inv_freq;  // the RoPE tables (DecoderSpec::ropes)
  std::vector<LayerPtrs> layers;
  std::vector<DeviceTable> tables;
  std::vector<std::int64_t> table_rows;  // tables[i].count, for check_step
  std::size_t bytes = 0;
};

// Places every tensor `spec` reads and the row tables, uploads them on `stream` (converting F32
// and F16 checkpoints to bf16 on the way) and waits for the upload.
DeviceWeights upload_decoder_weights(const DecoderSpec& spec, const WeightSource& source,
                                     const std::vector<RowTableSource>& tables, cudaStream_t stream,
                                     const ProgressFn& progress);

}  // namespace zoo::layers::cuda_backend
