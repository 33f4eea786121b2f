#pragma once
// cuBLASLt plumbing shared by Gemm (bf16, gemm.cpp) and GemmF32 (float32, gemm_f32.cpp): RAII
// owners of the descriptor objects, a layout factory, the alignment the heuristic may assume, the
// heuristic query itself, and the hash mix of a plan key.
#include <cublasLt.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "zoo/kernels/cuda/common.hpp"

namespace zoo::kernels::cuda::detail {

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { (void)cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { (void)cublasLtMatrixLayoutDestroy(l); }
};
struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { (void)cublasLtMatmulPreferenceDestroy(p); }
};
using DescPtr = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using LayoutPtr = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;
using PreferencePtr = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter>;

inline LayoutPtr make_layout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  ZOO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld));
  return LayoutPtr(layout);
}

// Largest power of two (<= 256, >= element_bytes) dividing `a` (an address or a row pitch in
// bytes): what the heuristic may assume about an operand.
inline std::uint32_t alignment_of(std::uint64_t a, std::uint32_t element_bytes) {
  std::uint32_t align = 256;
  while (align > element_bytes && (a % align) != 0) align /= 2;
  return align;
}

// cuBLASLt's choices, best first (at most `count`), for D = C = the `c` layout, within
// `workspace_bytes` and assuming every operand aligned to `align` bytes; empty when it has none.
inline void heuristic_algos(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const LayoutPtr& a,
                            const LayoutPtr& b, const LayoutPtr& c, std::uint64_t workspace_bytes,
                            std::uint32_t align, int count, std::vector<cublasLtMatmulAlgo_t>& algos) {
  algos.clear();
  cublasLtMatmulPreference_t pref_raw = nullptr;
  ZOO_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref_raw));
  PreferencePtr pref(pref_raw);
  ZOO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &workspace_bytes, sizeof workspace_bytes));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    ZOO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref_raw, attr, &align, sizeof align));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(count));
  int found = 0;
  const auto status = cublasLtMatmulAlgoGetHeuristic(handle, desc, a.get(), b.get(), c.get(), c.get(),
                                                     pref_raw, count, results.data(), &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return;
  ZOO_CUBLAS_CHECK(status);
  for (int i = 0; i < found; ++i)
    if (results[static_cast<std::size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
      algos.push_back(results[static_cast<std::size_t>(i)].algo);
}

// cuBLASLt's first choice (heuristic_algos); false when it has none for this problem.
inline bool best_algo(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const LayoutPtr& a,
                      const LayoutPtr& b, const LayoutPtr& c, std::uint64_t workspace_bytes,
                      std::uint32_t align, cublasLtMatmulAlgo_t& algo) {
  std::vector<cublasLtMatmulAlgo_t> algos;
  heuristic_algos(handle, desc, a, b, c, workspace_bytes, align, 1, algos);
  if (algos.empty()) return false;
  algo = algos.front();
  return true;
}

// A plan key's hash: its fields (as integers) folded with boost::hash_combine's mix.
inline std::size_t hash_fields(std::initializer_list<std::size_t> fields) {
  std::size_t h = 0;
  for (const std::size_t v : fields) h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace zoo::kernels::cuda::detail
