// Host-staged device collectives (device_collectives.hpp).
#include "device_collectives.hpp"

#include <span>
#include <stdexcept>
#include <vector>

#include "zoo/dtype.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {
namespace {

namespace cu = zoo::kernels::cuda;

class HostStaged : public DeviceCollectives {
 public:
  explicit HostStaged(Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  bool capturable() const override { return false; }

  void all_reduce(cu::Bf16* data, std::int64_t count, cudaStream_t stream) override {
    const auto n = static_cast<std::size_t>(count);
    bits_.resize(n);
    ZOO_CUDA_CHECK(cudaMemcpyAsync(bits_.data(), data, n * 2, cudaMemcpyDeviceToHost, stream));
    ZOO_CUDA_CHECK(cudaStreamSynchronize(stream));
    values_.resize(n);
    for (std::size_t i = 0; i < n; ++i) values_[i] = bf16_to_f32(bits_[i]);
    comm_.all_reduce_sum(values_);
    for (std::size_t i = 0; i < n; ++i) bits_[i] = f32_to_bf16(values_[i]);
    ZOO_CUDA_CHECK(cudaMemcpyAsync(data, bits_.data(), n * 2, cudaMemcpyHostToDevice, stream));
    ZOO_CUDA_CHECK(cudaStreamSynchronize(stream));  // bits_ is pageable and reused
  }

  void all_gather(const float* piece, std::int64_t count, float* out, cudaStream_t stream) override {
    const auto n = static_cast<std::size_t>(count);
    values_.resize(n);
    ZOO_CUDA_CHECK(cudaMemcpyAsync(values_.data(), piece, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
    ZOO_CUDA_CHECK(cudaStreamSynchronize(stream));
    gathered_.resize(n * static_cast<std::size_t>(comm_.size()));
    comm_.all_gather(values_, gathered_);
    ZOO_CUDA_CHECK(
        cudaMemcpyAsync(out, gathered_.data(), gathered_.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    ZOO_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

 private:
  Communicator& comm_;
  std::vector<std::uint16_t> bits_;
  std::vector<float> values_, gathered_;
};

}  // namespace

std::unique_ptr<DeviceCollectives> host_staged_collectives(Communicator& comm) {
  return std::make_unique<HostStaged>(comm);
}

#if !defined(ZOO_WITH_NCCL)
bool nccl_built() {
  return false;
}
std::vector<std::unique_ptr<DeviceCollectives>> nccl_collectives(const std::vector<int>&) {
  throw std::logic_error("nccl_collectives: this build of Zoo has no NCCL");
}
#endif

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend
