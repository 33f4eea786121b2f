// Embeddings summed from rows of a table (a plugin's row table, e.g. one embedding per codebook).
#include <stdexcept>

#include "device_utils.cuh"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {
namespace {
using namespace detail;

// One block per output position; the sum is float32 in row order, rounded to bf16 once.
__global__ void sum_table_rows_kernel(const bf16* __restrict__ table, std::int64_t table_rows, int hidden,
                                      const std::int32_t* __restrict__ ids, int per_position,
                                      const std::int32_t* __restrict__ positions, bf16* __restrict__ out) {
  const std::int64_t i = blockIdx.x;
  const std::int64_t pos = positions[i];
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
    float sum = 0.0f;
    for (int j = 0; j < per_position; ++j) {
      const std::int64_t id = ids[i * per_position + j];
      if (id >= 0 && id < table_rows) sum += to_f32(table[id * hidden + c]);
    }
    out[pos * hidden + c] = to_bf16(sum);
  }
}

}  // namespace

void sum_table_rows(const Bf16* table, std::int64_t table_rows, std::int64_t hidden, const std::int32_t* ids,
                    std::int64_t per_position, const std::int32_t* positions, std::int64_t count, Bf16* out,
                    cudaStream_t stream) {
  if (table_rows <= 0 || hidden <= 0 || per_position <= 0 || count < 0 || hidden > (1 << 30))
    throw std::invalid_argument("sum_table_rows: bad shape");
  if (count == 0) return;
  const int threads = hidden >= 1024 ? 1024 : static_cast<int>((hidden + 31) / 32 * 32);
  sum_table_rows_kernel<<<static_cast<unsigned>(count), threads, 0, stream>>>(
      dev(table), table_rows, static_cast<int>(hidden), ids, static_cast<int>(per_position), positions, dev(out));
  ZOO_CUDA_CHECK_LAUNCH();
}

}  // namespace zoo::kernels::cuda
