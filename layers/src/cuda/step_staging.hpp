#pragma once
// What a step sends to and gets back from the device, staged in pinned memory. A replayed decode
// graph reads its inputs from fixed device addresses, so each step's values go up through these
// fixed host buffers with async copies, and the picks come back the same way.
#include <cstddef>
#include <cstdint>

#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI::cuda_backend {

namespace cu = zoo::kernels::cuda;

// Steps of up to this many tokens stage their ids and positions here; longer ones upload from
// pageable memory (they are never graphs).
inline constexpr std::int64_t kStagedTokens = 256;
// A one-token step's summed table rows (TableRows) stage up to this many ids here.
inline constexpr std::int64_t kStagedTableIds = 512;

struct StepStaging {
  std::int32_t ids[kStagedTokens];
  std::int32_t positions[kStagedTokens];
  std::int32_t kv_len;                          // a graph's true kv length (its grid is the bucket's)
  std::int32_t table_ids[kStagedTableIds + 1];  // the ids, then the one position
  cu::SampleParams sample_params;               // the request, with its draw
  cu::SampleOutput sample_out;                  // the picked token
};

// Sampling the head on the device (OutputRequest::head_sample): at most this many segments are
// picked there; more fall back to returning the head output.
inline constexpr std::int64_t kMaxHeadSegments = 256;

// The same layout in pinned memory and in device memory: the request and its uniforms go up in
// one copy, the picks come back in one.
struct HeadSampleStaging {
  cu::SegmentSampleParams params;
  double u[kMaxHeadSegments];
  cu::SampleOutput out[kMaxHeadSegments];

  // Where a member lives in a device copy at `base`.
  static const cu::SegmentSampleParams* params_at(const void* base) {
    return reinterpret_cast<const cu::SegmentSampleParams*>(at(base, offsetof(HeadSampleStaging, params)));
  }
  static const double* u_at(const void* base) {
    return reinterpret_cast<const double*>(at(base, offsetof(HeadSampleStaging, u)));
  }
  static cu::SampleOutput* out_at(void* base) {
    return reinterpret_cast<cu::SampleOutput*>(const_cast<std::byte*>(at(base, offsetof(HeadSampleStaging, out))));
  }

 private:
  static const std::byte* at(const void* base, std::size_t offset) { return static_cast<const std::byte*>(base) + offset; }
};

}  // namespace zoo::layers::cuda_backend
