// GemmF32 (conv.hpp): float32 cuBLASLt matmuls with CUBLAS_COMPUTE_32F, so no TF32 and no
// reduced-precision tensor-core path is ever chosen. Same TN mapping as Gemm (gemm.cpp): row-major
// Y[m, n] = X[m, k] W[n, k]^T is column-major Y^T = W^T' X^T.
#include <cublasLt.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "cublaslt_handles.hpp"
#include "zoo/kernels/cuda/conv.hpp"

namespace zoo::kernels::cuda {
void add_bias_rows_f32(float* y, const float* bias, std::int64_t rows, std::int64_t n, cudaStream_t stream);  // conv.cu

namespace {

using detail::DescPtr;
using detail::LayoutPtr;

LayoutPtr make_layout(std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
  return detail::make_layout(CUDA_R_32F, rows, cols, ld);
}

// float32 operands: at least 4-byte aligned.
std::uint32_t alignment_of(std::uint64_t a) { return detail::alignment_of(a, 4); }

struct Key {
  std::int64_t m, n, k;
  std::uint32_t align;
  bool bias;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& key) const {
    return detail::hash_fields({static_cast<std::size_t>(key.m), static_cast<std::size_t>(key.n),
                                static_cast<std::size_t>(key.k), key.align, key.bias ? 1u : 0u});
  }
};

struct Plan {
  DescPtr desc;
  LayoutPtr a, b, c;
  cublasLtMatmulAlgo_t algo{};
  bool epilogue_bias = false;  // false with a bias: no algorithm took the epilogue, a kernel adds it
};

}  // namespace

struct GemmF32::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::unordered_map<Key, Plan, KeyHash> plans;

  explicit Impl(std::size_t bytes) : workspace(bytes) { ZOO_CUBLAS_CHECK(cublasLtCreate(&handle)); }
  ~Impl() {
    if (handle) (void)cublasLtDestroy(handle);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Returns false when the heuristic has no algorithm for this descriptor.
  bool try_plan(const Key& key, bool with_bias, Plan& p) {
    cublasLtMatmulDesc_t desc = nullptr;
    ZOO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    p.desc.reset(desc);
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    ZOO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    ZOO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    if (with_bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = CUDA_R_32F;
      ZOO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
      ZOO_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    }
    p.a = make_layout(key.k, key.n, key.k);
    p.b = make_layout(key.k, key.m, key.k);
    p.c = make_layout(key.n, key.m, key.n);
    if (!detail::best_algo(handle, desc, p.a, p.b, p.c, workspace.size(), key.align, p.algo)) return false;
    p.epilogue_bias = with_bias;
    return true;
  }

  const Plan& plan(const Key& key) {
    if (auto it = plans.find(key); it != plans.end()) return it->second;
    Plan p;
    if (!(key.bias && try_plan(key, true, p)) && !try_plan(key, false, p))
      throw std::runtime_error("GemmF32: cuBLASLt has no float32 algorithm for m=" + std::to_string(key.m) +
                               " n=" + std::to_string(key.n) + " k=" + std::to_string(key.k));
    return plans.emplace(key, std::move(p)).first->second;
  }
};

GemmF32::GemmF32(std::size_t workspace_bytes) : impl_(std::make_unique<Impl>(workspace_bytes)) {}
GemmF32::~GemmF32() = default;
GemmF32::GemmF32(GemmF32&&) noexcept = default;
GemmF32& GemmF32::operator=(GemmF32&&) noexcept = default;
std::size_t GemmF32::cached_plans() const { return impl_->plans.size(); }

void GemmF32::linear(const float* x, const float* w, const float* bias, float* y, std::int64_t m, std::int64_t n,
                     std::int64_t k, cudaStream_t stream, bool accumulate) {
  if (m < 0 || n < 0 || k < 0) throw std::invalid_argument("GemmF32: negative dimension");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // cuBLASLt rejects k = 0; the product is zero
    if (!accumulate) ZOO_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<std::size_t>(m * n) * sizeof(float), stream));
    if (bias) add_bias_rows_f32(y, bias, m, n, stream);
    return;
  }
  std::uint32_t align = 256;
  for (const void* p : {static_cast<const void*>(x), static_cast<const void*>(w), static_cast<const void*>(y)})
    align = std::min(align, alignment_of(reinterpret_cast<std::uintptr_t>(p)));
  align = std::min(align, alignment_of(static_cast<std::uint64_t>(k) * 4));
  align = std::min(align, alignment_of(static_cast<std::uint64_t>(n) * 4));
  if (bias) align = std::min(align, alignment_of(reinterpret_cast<std::uintptr_t>(bias)));
  const Plan& p = impl_->plan(Key{m, n, k, align, bias != nullptr});
  if (p.epilogue_bias)
    ZOO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  ZOO_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, p.desc.get(), &alpha, w, p.a.get(), x, p.b.get(), &beta, y, p.c.get(),
                                  y, p.c.get(), &p.algo, impl_->workspace.data(), impl_->workspace.size(), stream));
  if (bias && !p.epilogue_bias) add_bias_rows_f32(y, bias, m, n, stream);
}

}  // namespace zoo::kernels::cuda
