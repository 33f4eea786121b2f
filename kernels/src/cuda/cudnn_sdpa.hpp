#pragma once
// cuDNN's fused flash attention for prefill (built only when CMake found cuDNN: ZOO_WITH_CUDNN).
//
// The attention is stated as a cuDNN operation graph (the pattern its runtime-fusion engines turn
// into one flash-attention kernel; on Hopper those kernels use wgmma, TMA and warp specialization,
// the FlashAttention-3 recipe): S = Q K^T, S * scale, the causal mask (a key at position j is seen
// by the query at position start + i when j <= start + i), softmax, O = P V with P in bf16. It is
// the kernel torch's SDPA picks on an H200, so Zoo's prefill attention matches it by construction
// instead of by a hand-written Hopper kernel. One execution plan per shape, built on first use.
#include <memory>
#include <string>

#include "zoo/kernels/cuda/attention.hpp"

namespace zoo::kernels::cuda::detail {

class CudnnSdpa {
 public:
  CudnnSdpa();
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // Why this process cannot use cuDNN's attention (no library, a version without the fused engines
  // Zoo relies on, no device of compute capability 8.0+); empty when it can.
  static const std::string& unavailable_reason();

  // Runs `a` on `stream` and returns true, or returns false having launched nothing when cuDNN has
  // no engine for this shape (the caller then runs its own kernel). Throws on CUDA/cuDNN failures
  // other than "not supported".
  bool run(const PrefillAttentionArgs& a, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zoo::kernels::cuda::detail
