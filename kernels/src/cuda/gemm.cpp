#include "zoo/kernels/cuda/gemm.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "cublaslt_handles.hpp"
#include "gemv.hpp"
#include "zoo/kernels/env.hpp"
#include "zoo/kernels/cuda/ops.hpp"

namespace zoo::kernels::cuda {
namespace {

using detail::DescPtr;
using detail::LayoutPtr;
using detail::make_layout;

// bf16 operands: at least 2-byte aligned.
std::uint32_t alignment_of(std::uint64_t a) { return detail::alignment_of(a, 2); }
std::uint32_t alignment_of(const void* p) { return alignment_of(reinterpret_cast<std::uintptr_t>(p)); }

struct PlanKey {
  std::int64_t m, n, k;
  cudaDataType_t out_type;
  std::uint32_t align;
  bool bias = false;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& key) const {
    return detail::hash_fields({static_cast<std::size_t>(key.m), static_cast<std::size_t>(key.n),
                                static_cast<std::size_t>(key.k), static_cast<std::size_t>(key.out_type), key.align,
                                key.bias ? 1u : 0u});
  }
};

struct Plan {
  DescPtr desc;
  LayoutPtr a, b, c;
  cublasLtMatmulAlgo_t algo{};
};

// The number of k splits an algorithm runs (1: none; 0 or an unreadable attribute count as none).
std::uint32_t splits_of(const cublasLtMatmulAlgo_t& algo) {
  std::uint32_t splits = 1;
  std::size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits,
                                           &written) != CUBLAS_STATUS_SUCCESS)
    return 1;
  return splits;
}

// ZOO_GEMV: unset -> the default; 0 -> cuBLASLt for every m (the before/after switch of the
// benchmarks); 1..8 -> the GEMV kernel up to that many rows.
std::int64_t gemv_rows_from_env() {
  return env_int("ZOO_GEMV", 0, detail::kGemvMaxRows).value_or(Gemm::kDefaultGemvMaxRows);
}

// ZOO_GEMV_SILU=0: the gate|up projection and silu_and_mul stay two kernels at m = 1 too.
bool fuse_silu_from_env() {
  return env_flag("ZOO_GEMV_SILU", true);
}

// grouped_linear's cuBLAS handle and its two pointer staging slots, made at the first call.
struct Grouped {
  // The device arrays of A, B and C pointers (cuBLAS reads them from device memory) and their
  // pinned source. `done` is recorded after the GEMM that read them, so once it has completed the
  // slot may be rewritten (also from another stream).
  struct Slot {
    PinnedBuffer host;
    DeviceBuffer device;
    Event done{false};
    bool pending = false;
  };
  cublasHandle_t handle = nullptr;
  Slot slots[2];
  int next = 0;
  bool grouped_call = true;  // false once cuBLAS refused the grouped call: a GEMM per group
  // The per-problem arguments, host memory (kept to allocate once).
  std::vector<cublasOperation_t> trans_a, trans_b;
  std::vector<int> m, n, k, lda, ldb, ldc, group_size;
  std::vector<float> alpha, beta;

  Grouped() { ZOO_CUBLAS_CHECK(cublasCreate(&handle)); }
  ~Grouped() {
    // The buffers go back to CUDA below: let GEMMs still reading them finish first.
    for (auto& slot : slots)
      if (slot.pending) (void)cudaEventSynchronize(slot.done.get());
    if (handle) (void)cublasDestroy(handle);
  }
  Grouped(const Grouped&) = delete;
  Grouped& operator=(const Grouped&) = delete;
};

}  // namespace

struct Gemm::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::unordered_map<PlanKey, Plan, PlanKeyHash> plans;
  int multiprocessors = device_properties().multiprocessors;
  std::int64_t gemv_max_rows = gemv_rows_from_env();
  bool fuse_silu = fuse_silu_from_env();
  std::size_t gemv_calls = 0;
  std::unique_ptr<Grouped> grouped;
  bool invariant = false;
  // ZOO_GEMM_ANCHOR_ROWS (1..65536, read at construction): the rows the batch-invariant algorithm is
  // chosen for (benchmarks of its cost at small and large m).
  std::int64_t anchor_rows = env_int("ZOO_GEMM_ANCHOR_ROWS", 1, 65536).value_or(Gemm::kInvariantAnchorRows);
  // Batch-invariant mode: the algorithm of each shape but m (the key with m = 0).
  std::unordered_map<PlanKey, cublasLtMatmulAlgo_t, PlanKeyHash> anchors;

  explicit Impl(std::size_t workspace_bytes) : workspace(workspace_bytes) {
    ZOO_CUBLAS_CHECK(cublasLtCreate(&handle));
  }
  ~Impl() {
    if (handle) (void)cublasLtDestroy(handle);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // The descriptor and layouts of `key`, without an algorithm.
  Plan describe(const PlanKey& key) const {
    // Row-major Y[m,n] = X[m,k] W[n,k]^T is column-major Y^T[n,m] = W^T' X^T with
    // A = W seen as a column-major [k, n] matrix (transposed: op(A) is [n, k]) and B = X seen as
    // column-major [k, m]: the "TN" layout cuBLASLt is fastest with.
    Plan p;
    cublasLtMatmulDesc_t desc = nullptr;
    ZOO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    p.desc.reset(desc);
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    ZOO_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    ZOO_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    if (key.bias) {
      // The bias is added to the float32 accumulator before the output is rounded: one rounding,
      // like torch's bf16 Linear (which uses this epilogue).
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = CUDA_R_16BF;
      ZOO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
      ZOO_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    }
    p.a = make_layout(CUDA_R_16BF, key.k, key.n, key.k);
    p.b = make_layout(CUDA_R_16BF, key.k, key.m, key.k);
    p.c = make_layout(key.out_type, key.n, key.m, key.n);
    return p;
  }

  std::string shape(const PlanKey& key) const {
    return "m=" + std::to_string(key.m) + " n=" + std::to_string(key.n) + " k=" + std::to_string(key.k);
  }

  // Whether cuBLASLt runs `algo` for the plan `p` within the workspace.
  bool runs(const Plan& p, const cublasLtMatmulAlgo_t& algo) const {
    cublasLtMatmulHeuristicResult_t check{};
    return cublasLtMatmulAlgoCheck(handle, p.desc.get(), p.a.get(), p.b.get(), p.c.get(), p.c.get(), &algo,
                                   &check) == CUBLAS_STATUS_SUCCESS &&
           check.workspaceSize <= workspace.size();
  }

  // Batch-invariant mode: the algorithm every m of this shape runs, the heuristic's first at
  // kInvariantAnchorRows rows that does not split k and also runs a single row.
  const cublasLtMatmulAlgo_t& anchor(const PlanKey& key) {
    PlanKey any = key;
    any.m = 0;
    if (auto it = anchors.find(any); it != anchors.end()) return it->second;
    PlanKey at = key, one = key;
    at.m = anchor_rows;
    one.m = 1;
    const Plan p = describe(at), p1 = describe(one);
    std::vector<cublasLtMatmulAlgo_t> algos;
    detail::heuristic_algos(handle, p.desc.get(), p.a, p.b, p.c, workspace.size(), key.align, 16, algos);
    const auto found = std::find_if(algos.begin(), algos.end(), [&](const cublasLtMatmulAlgo_t& a) {
      return splits_of(a) <= 1 && runs(p1, a);
    });
    if (found == algos.end())
      throw std::runtime_error("Gemm: cuBLASLt offers no algorithm without a k split for " + shape(at) +
                               " that also runs one row (batch-invariant mode)");
    return anchors.emplace(any, *found).first->second;
  }

  const Plan& plan(const PlanKey& key) {
    if (auto it = plans.find(key); it != plans.end()) return it->second;
    Plan p = describe(key);
    if (invariant) {
      p.algo = anchor(key);
      if (!runs(p, p.algo))
        throw std::runtime_error("Gemm: the batch-invariant algorithm of this shape does not run " +
                                 shape(key));
    } else if (!detail::best_algo(handle, p.desc.get(), p.a, p.b, p.c, workspace.size(), key.align, p.algo)) {
      throw std::runtime_error("Gemm: cuBLASLt has no algorithm for " + shape(key));
    }
    return plans.emplace(key, std::move(p)).first->second;
  }

  void run(const Bf16* x, const Bf16* w, void* y, cudaDataType_t out_type, std::int64_t m, std::int64_t n,
           std::int64_t k, cudaStream_t stream, bool accumulate, const Bf16* bias = nullptr) {
    if (m < 0 || n < 0 || k < 0) throw std::invalid_argument("Gemm: negative dimension");
    if (bias && (accumulate || k == 0)) throw std::invalid_argument("Gemm: a bias with accumulate or k = 0");
    if (m == 0 || n == 0) return;
    if (k == 0) {
      // cuBLASLt rejects k == 0; the product is all zeros.
      if (!accumulate) {
        const std::size_t bytes = static_cast<std::size_t>(m * n) * (out_type == CUDA_R_32F ? 4 : 2);
        ZOO_CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, stream));
      }
      return;
    }
    if (!bias && !invariant && m <= gemv_max_rows && detail::gemv_supported(x, w, m, n, k)) {
      detail::gemv(x, w, y, out_type == CUDA_R_32F, m, n, k, accumulate, multiprocessors, stream);
      ++gemv_calls;
      return;
    }
    std::uint32_t align = alignment_of(x);
    align = std::min(align, alignment_of(w));
    align = std::min(align, alignment_of(y));
    // Rows start at multiples of the leading dimensions too.
    align = std::min(align, alignment_of(static_cast<std::uint64_t>(k) * 2));
    align = std::min(align, alignment_of(static_cast<std::uint64_t>(n) * (out_type == CUDA_R_32F ? 4 : 2)));
    if (bias) align = std::min(align, alignment_of(bias));
    // Batch-invariant: a row's place in X (its address's alignment beyond 16 bytes) must not pick
    // another algorithm.
    if (invariant) align = std::min<std::uint32_t>(align, 16);
    const Plan& p = plan(PlanKey{m, n, k, out_type, align, bias != nullptr});
    if (bias)
      ZOO_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    ZOO_CUBLAS_CHECK(cublasLtMatmul(handle, p.desc.get(), &alpha, w, p.a.get(), x, p.b.get(), &beta, y, p.c.get(), y,
                                    p.c.get(), &p.algo, workspace.data(), workspace.size(), stream));
  }
};

Gemm::Gemm(std::size_t workspace_bytes) : impl_(std::make_unique<Impl>(workspace_bytes)) {}
Gemm::~Gemm() = default;
Gemm::Gemm(Gemm&&) noexcept = default;
Gemm& Gemm::operator=(Gemm&&) noexcept = default;

void Gemm::linear(const Bf16* x, const Bf16* w, Bf16* y, std::int64_t m, std::int64_t n, std::int64_t k,
                  cudaStream_t stream, bool accumulate) {
  impl_->run(x, w, y, CUDA_R_16BF, m, n, k, stream, accumulate);
}

void Gemm::linear_bias(const Bf16* x, const Bf16* w, const Bf16* bias, Bf16* y, std::int64_t m, std::int64_t n,
                       std::int64_t k, cudaStream_t stream) {
  if (bias == nullptr) return linear(x, w, y, m, n, k, stream);
  impl_->run(x, w, y, CUDA_R_16BF, m, n, k, stream, false, bias);
}

void Gemm::linear(const Bf16* x, const Bf16* w, float* y, std::int64_t m, std::int64_t n, std::int64_t k,
                  cudaStream_t stream, bool accumulate) {
  impl_->run(x, w, y, CUDA_R_32F, m, n, k, stream, accumulate);
}

void Gemm::linear_act_mul(GatedActivation act, const Bf16* x, const Bf16* w, Bf16* gate_up, Bf16* out, std::int64_t m,
                          std::int64_t inter, std::int64_t k, cudaStream_t stream) {
  if (m == 1 && !impl_->invariant && impl_->gemv_max_rows >= 1 && impl_->fuse_silu && inter >= 1 &&
      detail::gemv_supported(x, w, 1, 2 * inter, k)) {
    detail::gemv_act_mul(act, x, w, out, inter, k, impl_->multiprocessors, stream);
    ++impl_->gemv_calls;
    return;
  }
  linear(x, w, gate_up, m, 2 * inter, k, stream);
  act_and_mul(act, gate_up, out, m, inter, stream);
}

void Gemm::grouped_linear(const Bf16* x, const Bf16* w, std::int64_t w_stride, const std::int32_t* host_counts,
                          int groups, Bf16* y, std::int64_t n, std::int64_t k, cudaStream_t stream) {
  if (groups < 0 || n < 0 || k < 0 || w_stride < 0)
    throw std::invalid_argument("Gemm::grouped_linear: negative size or stride");
  if (n > INT_MAX || k > INT_MAX) throw std::invalid_argument("Gemm::grouped_linear: n or k beyond int");
  if (groups > 0 && host_counts == nullptr) throw std::invalid_argument("Gemm::grouped_linear: no counts");
  std::int64_t rows = 0;
  int problems = 0;
  for (int g = 0; g < groups; ++g) {
    if (host_counts[g] < 0) throw std::invalid_argument("Gemm::grouped_linear: negative count");
    rows += host_counts[g];
    problems += host_counts[g] > 0;
  }
  if (rows == 0 || n == 0) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  ZOO_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    throw std::logic_error("Gemm::grouped_linear cannot be captured in a CUDA graph");
  if (k == 0) {  // cuBLAS rejects k == 0; the products are zeros
    ZOO_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<std::size_t>(rows * n) * sizeof(Bf16), stream));
    return;
  }
  if (!impl_->grouped) impl_->grouped = std::make_unique<Grouped>();
  Grouped& gr = *impl_->grouped;
  Grouped::Slot& slot = gr.slots[gr.next];
  gr.next ^= 1;
  // The GEMM that last read this slot's pointers (two calls back) must be done with them.
  if (slot.pending) slot.done.synchronize();
  slot.pending = false;
  const std::size_t bytes = 3 * static_cast<std::size_t>(problems) * sizeof(void*);
  if (slot.host.size() < bytes) {
    slot.host = PinnedBuffer(2 * bytes);
    slot.device = DeviceBuffer(2 * bytes);
  }
  // Row-major Y = X W^T is column-major Y^T [n, c] = W^T' X^T: A = W seen column-major [k, n],
  // transposed; B = X seen column-major [k, c]; C = Y seen column-major [n, c] (gemm.cpp's "TN").
  auto** ptrs = slot.host.as<const void*>();
  const void** a_ptrs = ptrs;
  const void** b_ptrs = ptrs + problems;
  const void** c_ptrs = ptrs + 2 * problems;
  for (auto* v : {&gr.m, &gr.n, &gr.k, &gr.lda, &gr.ldb, &gr.ldc, &gr.group_size}) v->clear();
  gr.trans_a.assign(problems, CUBLAS_OP_T);
  gr.trans_b.assign(problems, CUBLAS_OP_N);
  gr.alpha.assign(problems, 1.0f);
  gr.beta.assign(problems, 0.0f);
  std::int64_t offset = 0;
  int p = 0;
  for (int g = 0; g < groups; ++g) {
    const int count = host_counts[g];
    if (count == 0) continue;
    a_ptrs[p] = w + g * w_stride;
    b_ptrs[p] = x + offset * k;
    c_ptrs[p] = y + offset * n;
    gr.m.push_back(static_cast<int>(n));
    gr.n.push_back(count);
    gr.k.push_back(static_cast<int>(k));
    gr.lda.push_back(static_cast<int>(k));
    gr.ldb.push_back(static_cast<int>(k));
    gr.ldc.push_back(static_cast<int>(n));
    gr.group_size.push_back(1);
    offset += count;
    ++p;
  }
  ZOO_CUBLAS_CHECK(cublasSetStream(gr.handle, stream));
  bool done = false;
  if (gr.grouped_call) {
    ZOO_CUDA_CHECK(cudaMemcpyAsync(slot.device.data(), slot.host.data(), bytes, cudaMemcpyHostToDevice, stream));
    auto** dev_ptrs = slot.device.as<void*>();
    const cublasStatus_t status = cublasGemmGroupedBatchedEx(
        gr.handle, gr.trans_a.data(), gr.trans_b.data(), gr.m.data(), gr.n.data(), gr.k.data(), gr.alpha.data(),
        dev_ptrs, CUDA_R_16BF, gr.lda.data(), dev_ptrs + problems, CUDA_R_16BF, gr.ldb.data(), gr.beta.data(),
        dev_ptrs + 2 * problems, CUDA_R_16BF, gr.ldc.data(), problems, gr.group_size.data(), CUBLAS_COMPUTE_32F);
    slot.done.record(stream);  // also after a refusal: the upload above read the pinned staging
    slot.pending = true;
    if (status == CUBLAS_STATUS_NOT_SUPPORTED) gr.grouped_call = false;
    else {
      ZOO_CUBLAS_CHECK(status);
      done = true;
    }
  }
  if (!done) {
    const float alpha = 1.0f, beta = 0.0f;
    for (int i = 0; i < problems; ++i)
      ZOO_CUBLAS_CHECK(cublasGemmEx(gr.handle, CUBLAS_OP_T, CUBLAS_OP_N, gr.m[i], gr.n[i], gr.k[i], &alpha, a_ptrs[i],
                                    CUDA_R_16BF, gr.lda[i], b_ptrs[i], CUDA_R_16BF, gr.ldb[i], &beta,
                                    const_cast<void*>(c_ptrs[i]), CUDA_R_16BF, gr.ldc[i], CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
  }
}

void Gemm::linear_silu_mul(const Bf16* x, const Bf16* w, Bf16* gate_up, Bf16* act, std::int64_t m,
                           std::int64_t inter, std::int64_t k, cudaStream_t stream) {
  linear_act_mul(GatedActivation::silu, x, w, gate_up, act, m, inter, k, stream);
}

std::size_t Gemm::cached_plans() const { return impl_->plans.size(); }

void Gemm::set_gemv_max_rows(std::int64_t rows) {
  if (rows < 0 || rows > detail::kGemvMaxRows)
    throw std::invalid_argument("Gemm: gemv rows must be 0.." + std::to_string(detail::kGemvMaxRows) + ", got " +
                                std::to_string(rows));
  impl_->gemv_max_rows = rows;
}
std::int64_t Gemm::gemv_max_rows() const { return impl_->gemv_max_rows; }
std::size_t Gemm::gemv_calls() const { return impl_->gemv_calls; }

void Gemm::set_batch_invariant(bool on) {
  if (impl_->invariant == on) return;
  impl_->invariant = on;
  impl_->plans.clear();  // planned by the other rule
}
bool Gemm::batch_invariant() const {
  return impl_->invariant;
}

}  // namespace zoo::kernels::cuda
