// Device collectives over NCCL (device_collectives.hpp): one communicator per rank, the ranks on
// separate GPUs of this process, each used from its rank's own thread and stream. The calls only
// enqueue work, so they run inside captured decode graphs too.
#include <fmt/format.h>
#include <nccl.h>

#include <cstdlib>
#include <stdexcept>

#include "device_collectives.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {
namespace {

namespace cu = zoo::kernels::cuda;

void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) throw std::runtime_error(fmt::format("NCCL {}: {}", what, ncclGetErrorString(result)));
}

class Nccl : public DeviceCollectives {
 public:
  Nccl(ncclComm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  ~Nccl() override { ncclCommDestroy(comm_); }
  Nccl(const Nccl&) = delete;
  Nccl& operator=(const Nccl&) = delete;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool capturable() const override { return true; }

  void all_reduce(cu::Bf16* data, std::int64_t count, cudaStream_t stream) override {
    check(ncclAllReduce(data, data, static_cast<std::size_t>(count), ncclBfloat16, ncclSum, comm_, stream),
          "all-reduce");
  }
  void all_gather(const float* piece, std::int64_t count, float* out, cudaStream_t stream) override {
    check(ncclAllGather(piece, out, static_cast<std::size_t>(count), ncclFloat32, comm_, stream), "all-gather");
  }

 private:
  ncclComm_t comm_;
  int rank_, size_;
};

}  // namespace

bool nccl_built() { return true; }

std::vector<std::unique_ptr<DeviceCollectives>> nccl_collectives(const std::vector<int>& devices) {
  // NVLink multicast (NVLS) stays off unless asked for: it reserves device memory per communicator
  // and is refused on some lent machines.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  std::vector<ncclComm_t> comms(devices.size());
  check(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()), "init");
  std::vector<std::unique_ptr<DeviceCollectives>> out;
  for (std::size_t r = 0; r < comms.size(); ++r)
    out.push_back(std::make_unique<Nccl>(comms[r], static_cast<int>(r), static_cast<int>(comms.size())));
  return out;
}

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend
