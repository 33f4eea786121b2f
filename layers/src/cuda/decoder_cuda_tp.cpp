// Tensor parallelism on CUDA: one CudaBackend per rank over its share of the spec and its slices
// of the checkpoint (ShardedWeightSource), each runner a group of rank runners on threads of their
// own (RankGroupRunner). The ranks take devices base, base + 1, ... where the machine has them, and
// share the base device otherwise (so the sharded math is tested on one GPU). On separate GPUs
// with NCCL built their collectives are NCCL's (inside the decode graphs); otherwise they go through
// the host (host_staged_collectives: correct, not fast, and never in a graph).
#include <fmt/format.h>

#include "../parallel/rank_group.hpp"
#include "../parallel/rank_shares.hpp"
#include "../runner_session.hpp"
#include "decoder_cuda.hpp"
#include "zoo/error.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {
namespace {

class CudaTensorParallelBackend : public DecoderBackend {
 public:
  CudaTensorParallelBackend(const DecoderSpec& spec, const ModelArgs& args) : max_context_(args.max_context) {
    const int ranks = args.tensor_parallel;
    for (int r = 0; r < ranks; ++r) shards_.push_back(shard_decoder(spec, r, ranks));
    int devices = 0;
    ZOO_CUDA_CHECK(cudaGetDeviceCount(&devices));
    const int base = args.device.index;
    shared_device_ = devices < base + ranks;
    nccl_ = !shared_device_ && nccl_built();
    for (int r = 0; r < ranks; ++r) {
      ModelArgs rank_args = args;
      rank_args.device.index = shared_device_ ? base : base + r;
      ranks_.push_back(std::make_shared<CudaBackend>(shards_[static_cast<std::size_t>(r)].spec, rank_args,
                                                     &shards_[static_cast<std::size_t>(r)]));
    }
  }

  void load(const WeightSource& source, const std::vector<RowTableSource>& tables,
            const ProgressFn& progress) override {
    load_rank_shares(ranks_, shards_, source, tables, progress);
  }

  std::unique_ptr<Session> new_session() override {
    return std::make_unique<RunnerSession>(make_runner(session_options(max_context_)));
  }
  std::unique_ptr<Runner> new_runner(const RunnerOptions& options) override { return make_runner(options); }

  nlohmann::json runtime_stats() const override {
    nlohmann::json stats = ranks_.front()->runtime_stats();
    double weights = 0;
    for (const auto& rank : ranks_) weights += rank->runtime_stats()["weights_gb"].get<double>();
    stats["weights_gb"] = weights;
    stats["tensor_parallel"] = ranks_.size();
    stats["ranks_share_a_device"] = shared_device_;
    stats["collectives"] = nccl_ ? "nccl" : "host";
    return stats;
  }

 private:
  // What the group's collectives live in; outlives the rank runners (RankGroupRunner's `keep`).
  // The host group gathers taps whatever carries the device collectives.
  struct Links {
    explicit Links(int ranks) : group(ranks) {}
    InProcessGroup group;
    std::vector<std::unique_ptr<DeviceCollectives>> collectives;  // per rank
  };

  std::unique_ptr<Runner> make_runner(RunnerOptions options) {
    const auto ranks = static_cast<int>(ranks_.size());
    // Every rank's pool must hold the same pages (the ranks make the same calls in the same order,
    // and rank 0's pool admits for all): one page count for all, from the memory of the device the
    // ranks would size it from, shared between ranks on one device.
    if (options.kv_pages == 0 && options.kv_bytes == 0) {
      ZOO_CUDA_CHECK(cudaSetDevice(ranks_.front()->device_));
      const double bytes = kv_device_budget(options, shared_device_ ? ranks : 1);
      if (bytes <= 0)
        throw InputError(fmt::format("{}: no device memory left for the KV cache of {} ranks",
                                     shards_.front().spec.family, ranks));
      options.kv_bytes = static_cast<std::int64_t>(bytes);
      options.kv_memory_fraction = 0;
    }
    auto links = std::make_shared<Links>(ranks);
    if (nccl_) {
      std::vector<int> devices;
      for (const auto& rank : ranks_) devices.push_back(rank->device_);
      links->collectives = nccl_collectives(devices);
    }
    std::vector<std::unique_ptr<KvRunner>> runners;
    for (int r = 0; r < ranks; ++r) {
      Communicator& comm = links->group.rank(r);
      if (!nccl_) links->collectives.push_back(host_staged_collectives(comm));
      const auto i = static_cast<std::size_t>(r);
      ZOO_CUDA_CHECK(cudaSetDevice(ranks_[i]->device_));
      runners.push_back(
          make_cuda_runner(ranks_[i], options, CudaRank{&shards_[i], &comm, links->collectives[i].get()}));
    }
    auto abort = [group = &links->group](const std::string& why) { group->abort(why); };
    return std::make_unique<RankGroupRunner>(std::move(links), std::move(runners), std::move(abort));
  }

  std::int64_t max_context_;
  std::vector<DecoderShard> shards_;  // filled once: the ranks point into it
  std::vector<std::shared_ptr<CudaBackend>> ranks_;
  bool shared_device_ = false;
  bool nccl_ = false;  // the ranks' collectives are NCCL's (else staged through the host)
};

}  // namespace

std::shared_ptr<DecoderBackend> make_cuda_tensor_parallel_backend(const DecoderSpec& spec, const ModelArgs& args) {
  return std::make_shared<CudaTensorParallelBackend>(spec, args);
}

}  // namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend
