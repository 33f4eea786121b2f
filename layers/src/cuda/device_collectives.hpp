#pragma once
// What a CUDA rank of a tensor-parallel group needs from its peers inside a step, on device
// buffers and in stream order: the sum of the row-parallel projections' partial outputs (bf16, in
// place) and the vocabulary pieces of the head side by side (float32). A transport implements it:
// host-staged over zoo::Communicator (any ranks, one GPU or several; not capturable, so such a
// group runs its steps eagerly), or NCCL across GPUs (the transport, with the two-GPU
// machine).
#include <cstdint>
#include <memory>
#include <vector>

#include "zoo/communicator.hpp"
#include "zoo/kernels/cuda/common.hpp"
#include "zoo/layers/abi.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[0 .. count) = its sum over the ranks (float32 sums in rank order, rounded to bf16 once).
  virtual void all_reduce(kernels::cuda::Bf16* data, std::int64_t count, cudaStream_t stream) = 0;
  // out[r * count .. (r + 1) * count) = rank r's piece.
  virtual void all_gather(const float* piece, std::int64_t count, float* out, cudaStream_t stream) = 0;
  // Whether the calls can be captured into a CUDA graph.
  virtual bool capturable() const = 0;
};

// Through the host: each call waits for the stream, copies down, meets the other ranks in `comm`
// (the same bits on every rank) and copies back. `comm` outlives it.
std::unique_ptr<DeviceCollectives> host_staged_collectives(Communicator& comm);

// Whether this build has NCCL (ZOO_WITH_NCCL).
bool nccl_built();
// One NCCL rank per device of `devices` (distinct GPUs of this process), in rank order; NCCL's
// own bootstrap (ncclCommInitAll here; a unique id across processes later). Throws where this
// build has no NCCL or NCCL fails.
std::vector<std::unique_ptr<DeviceCollectives>> nccl_collectives(const std::vector<int>& devices);

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend
