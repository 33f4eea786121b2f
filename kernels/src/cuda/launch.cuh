#pragma once
// Programmatic dependent launch (PDL, compute capability 9.0+) for the kernels of a decode step.
//
// A decode step at batch 1 is a chain of ~8 small kernels per layer, each waiting for the previous
// one: the launch latency of every kernel and the first memory round trip of its weights sit on the
// critical path. With PDL a kernel may start while its predecessor still runs; it does what does
// not depend on the predecessor (start streaming its weights), then waits in
// `grid_dependency_wait()` until the predecessor has completed and its writes are visible.
//
// The contract of a kernel launched with `launch_pdl`:
//   - before `grid_dependency_wait()` it reads only memory no kernel of the chain writes (weights),
//     and writes nothing;
//   - every block calls `grid_dependency_wait()` before it exits (also blocks with no work), so
//     that the grid completes only after its predecessor did and the ordering stays transitive
//     along the chain;
//   - it may call `allow_dependent_launch()` at any point (the earlier, the more overlap): the
//     next PDL kernel then starts its own preamble.
// Launched without the attribute (ZOO_PDL=0, devices before sm_90, ZOO_CUDA_PRE_HOPPER=1) the wait and the trigger are
// no-ops and the stream serializes the kernels as usual. Captured into a CUDA graph, the launch
// becomes a programmatic edge.
#include <cuda_runtime.h>

#include <cstdlib>
#include <utility>

#include "zoo/kernels/cuda/common.hpp"
#include "zoo/kernels/env.hpp"

namespace zoo::kernels::cuda::detail {

__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// ZOO_PDL=0 launches every kernel plainly (the "before" of an A/B run in one build). Read per
// launch, like the other switches: a graph keeps what it captured.
inline bool pdl_enabled() {
  return env_flag("ZOO_PDL", true) && hopper_paths();
}

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-serialization attribute
// when PDL is enabled. The kernel must follow the contract above.
// With a `cluster` shape other than 1 x 1 x 1 the grid is launched as thread-block clusters.
template <class... Params, class... Args>
void launch_pdl_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                        dim3 cluster, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attributes[2];
  unsigned count = 0;
  if (pdl_enabled()) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster.x;
    attributes[count].val.clusterDim.y = cluster.y;
    attributes[count].val.clusterDim.z = cluster.z;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  ZOO_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}
template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                Args&&... args) {
  launch_pdl_cluster(kernel, grid, block, smem, stream, dim3(1, 1, 1), std::forward<Args>(args)...);
}

}  // namespace zoo::kernels::cuda::detail
