#include "cudnn_sdpa.hpp"

#include <cudnn.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "zoo/kernels/env.hpp"

namespace zoo::kernels::cuda::detail {
namespace {

// A failure that only means "cuDNN has no engine for this graph": the caller falls back.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string last_error() {
  char text[512] = {};
  cudnnGetLastErrorString(text, sizeof text);
  return text;
}

void check(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const std::string message = std::string("cuDNN ") + what + ": " + cudnnGetErrorString(status) + " " + last_error();
  // 3000..3999: CUDNN_STATUS_NOT_SUPPORTED and its refinements (graph pattern, shape, layout, ...).
  if (status / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000) throw Unsupported(message);
  throw std::runtime_error(message);
}

// Owner of one backend descriptor.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { check(cudnnBackendCreateDescriptor(type, &d_), "create"); }
  ~Desc() {
    if (d_) (void)cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}
  Desc& operator=(Desc&&) = delete;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  template <class T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, std::int64_t n = 1) {
    check(cudnnBackendSetAttribute(d_, name, type, n, values), "set attribute");
    return *this;
  }
  Desc& set(cudnnBackendAttributeName_t name, const Desc& other) {
    const cudnnBackendDescriptor_t raw = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw);
  }
  Desc& finalize(const char* what = "finalize") {
    check(cudnnBackendFinalize(d_), what);
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// Tensor ids of the variant pack; virtual tensors take ids from kFirstVirtual up.
enum : std::int64_t { kQ = 1, kK, kV, kO, kScale, kNegInf, kStart, kFirstVirtual = 100 };

using Dims = std::array<std::int64_t, 4>;

// The operation graph of one shape and its execution plan. Every descriptor the plan was built
// from stays alive with it.
struct Plan {
  std::deque<Desc> parts;  // a deque: the graph code holds references to earlier tensors
  std::deque<Desc> ops;
  std::unique_ptr<Desc> plan;
  std::int64_t workspace = 0;
  std::string why_not;  // set when cuDNN has no engine for this shape

  std::int64_t next_uid = kFirstVirtual;

  const Desc& tensor(std::int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides, bool is_virtual,
                     bool by_value = false) {
    Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const std::int64_t alignment = 16;
    const bool v = is_virtual, b = by_value;
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4)
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &v);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &b);
    t.finalize("tensor");
    parts.push_back(std::move(t));
    return parts.back();
  }
  const Desc& virtual_tensor(cudnnDataType_t type, const Dims& dims) {
    const Dims strides{dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    return tensor(next_uid++, type, dims, strides, true);
  }
  const Desc& scalar(std::int64_t uid, cudnnDataType_t type) { return tensor(uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t precision, const Desc& x, const Desc* b, const Desc* t,
                 const Desc& y, std::int64_t axis = -1) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    pw.finalize("pointwise");
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw).set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y).finalize("pointwise operation");
    parts.push_back(std::move(pw));
    ops.push_back(std::move(op));
  }
  void matmul(const Desc& a, const Desc& b, const Desc& c) {
    Desc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute).finalize("matmul");
    Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm)
        .finalize("matmul operation");
    parts.push_back(std::move(mm));
    ops.push_back(std::move(op));
  }
  void reduction(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
    Desc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute)
        .finalize("reduction");
    Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red)
        .finalize("reduction operation");
    parts.push_back(std::move(red));
    ops.push_back(std::move(op));
  }
};

struct Key {
  std::int64_t tokens, start, q_stride, out_stride;
  int q_heads, kv_heads, head_dim;
  std::uint32_t scale_bits;
  auto tie() const { return std::tie(tokens, start, q_stride, out_stride, q_heads, kv_heads, head_dim, scale_bits); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

// How long the last build spent where, for ZOO_CUDNN_LOG.
struct BuildTimes {
  double graph_ms = 0, heuristics_ms = 0, plan_ms = 0;
  std::int64_t configs = 0, picked = -1;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The graph of the header comment, for one shape. Throws Unsupported when cuDNN refuses it.
void build(Plan& p, cudnnHandle_t handle, const Key& k, BuildTimes& times) {
  auto t0 = std::chrono::steady_clock::now();
  const std::int64_t T = k.tokens, S = k.start + k.tokens, Hq = k.q_heads, Hk = k.kv_heads, D = k.head_dim;
  const std::int64_t kv_row = Hk * D;  // elements between cache positions
  // Q and O as [1, Hq, T, D] over their [T, Hq, D] rows; K as K^T [1, Hk, D, S] and V as
  // [1, Hk, S, D] over the cache's [positions, Hk, D] rows (query head h reads kv head h / (Hq/Hk)).
  const Desc& q = p.tensor(kQ, CUDNN_DATA_BFLOAT16, {1, Hq, T, D}, {T * k.q_stride, D, k.q_stride, 1}, false);
  const Desc& kt = p.tensor(kK, CUDNN_DATA_BFLOAT16, {1, Hk, D, S}, {S * kv_row, D, 1, kv_row}, false);
  const Desc& v = p.tensor(kV, CUDNN_DATA_BFLOAT16, {1, Hk, S, D}, {S * kv_row, D, kv_row, 1}, false);
  const Desc& o = p.tensor(kO, CUDNN_DATA_BFLOAT16, {1, Hq, T, D}, {T * k.out_stride, D, k.out_stride, 1}, false);
  const Desc& scale = p.scalar(kScale, CUDNN_DATA_FLOAT);
  const Desc& neg_inf = p.scalar(kNegInf, CUDNN_DATA_FLOAT);

  const Dims scores{1, Hq, T, S}, rows{1, Hq, T, 1};
  const Desc& s = p.virtual_tensor(CUDNN_DATA_FLOAT, scores);
  p.matmul(q, kt, s);
  const Desc& scaled = p.virtual_tensor(CUDNN_DATA_FLOAT, scores);
  p.pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s, &scale, nullptr, scaled);

  // Causal: query i (at position start + i) keeps key j where start + i >= j.
  const Desc& col = p.virtual_tensor(CUDNN_DATA_INT32, scores);
  p.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scaled, nullptr, nullptr, col, 3);
  const Desc* row = &p.virtual_tensor(CUDNN_DATA_INT32, scores);
  p.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scaled, nullptr, nullptr, *row, 2);
  if (k.start > 0) {
    const Desc& start = p.scalar(kStart, CUDNN_DATA_INT32);
    const Desc& shifted = p.virtual_tensor(CUDNN_DATA_INT32, scores);
    p.pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, *row, &start, nullptr, shifted);
    row = &shifted;
  }
  const Desc& keep = p.virtual_tensor(CUDNN_DATA_BOOLEAN, scores);
  p.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, *row, &col, nullptr, keep);
  const Desc& masked = p.virtual_tensor(CUDNN_DATA_FLOAT, scores);
  p.pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scaled, &neg_inf, &keep, masked);

  // Softmax: max, exp(x - max), sum, divide; P in bf16 (the second matmul's input type).
  const Desc& mx = p.virtual_tensor(CUDNN_DATA_FLOAT, rows);
  p.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, mx);
  const Desc& centered = p.virtual_tensor(CUDNN_DATA_FLOAT, scores);
  p.pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, masked, &mx, nullptr, centered);
  const Desc& e = p.virtual_tensor(CUDNN_DATA_FLOAT, scores);
  p.pointwise(CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, centered, nullptr, nullptr, e);
  const Desc& sum = p.virtual_tensor(CUDNN_DATA_FLOAT, rows);
  p.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  // The log-sum-exp (max + log sum), left virtual: nothing reads it, but cuDNN 9.19's pattern
  // matcher only recognizes the softmax of its fused attention with these two ops in place (the
  // graph torch's SDPA builds has them; without them no engine is offered).
  const Desc& log_sum = p.virtual_tensor(CUDNN_DATA_FLOAT, rows);
  p.pointwise(CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, sum, nullptr, nullptr, log_sum);
  const Desc& lse = p.virtual_tensor(CUDNN_DATA_FLOAT, rows);
  p.pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx, &log_sum, nullptr, lse);
  const Desc& prob = p.virtual_tensor(CUDNN_DATA_BFLOAT16, scores);
  p.pointwise(CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, &sum, nullptr, prob);
  p.matmul(prob, v, o);

  std::vector<cudnnBackendDescriptor_t> raw;
  for (const auto& op : p.ops) raw.push_back(op.get());
  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(), static_cast<std::int64_t>(raw.size()))
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle)
      .finalize("operation graph");
  times.graph_ms = ms_since(t0);
  t0 = std::chrono::steady_clock::now();

  Desc heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode)
      .finalize("engine heuristics");
  std::int64_t count = 0;
  check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                 &count, nullptr),
        "engine count");
  std::vector<Desc> configs;
  std::vector<cudnnBackendDescriptor_t> config_raw;
  for (std::int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    config_raw.push_back(configs.back().get());
  }
  std::int64_t got = 0;
  if (count > 0)
    check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                   count, &got, config_raw.data()),
          "engine configs");
  times.heuristics_ms = ms_since(t0);
  times.configs = got;
  t0 = std::chrono::steady_clock::now();
  // The first configuration that finalizes into a plan, in the heuristic's order.
  std::string reasons;
  for (std::int64_t i = 0; i < got; ++i) {
    try {
      auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle)
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<std::size_t>(i)])
          .finalize("execution plan");
      times.plan_ms = ms_since(t0);
      times.picked = i;
      std::int64_t n = 0;
      check(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                     &p.workspace),
            "workspace size");
      p.plan = std::move(plan);
      p.parts.push_back(std::move(graph));
      p.parts.push_back(std::move(heuristics));
      for (auto& c : configs) p.parts.push_back(std::move(c));
      return;
    } catch (const Unsupported& e) {
      reasons += (reasons.empty() ? "[" : "; [") + std::to_string(i) + "] " + e.what();
    }
  }
  throw Unsupported("no engine among " + std::to_string(got) + " configurations: " + reasons);
}

std::string probe_availability() {
  const std::size_t version = cudnnGetVersion();
  // 9.16 is the first release whose fused attention engines need no padding-mask workaround for
  // key counts that are not a multiple of 128 (cudnn-frontend applies one up to 9.15).
  if (version < 91600)
    return "cuDNN " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100) + " is older than 9.16";
  if (device_properties().major < 8) return "the device is older than compute capability 8.0";
  return {};
}

}  // namespace

struct CudnnSdpa::Impl {
  std::mutex mutex;  // plans and the workspace are shared by every caller of this object
  cudnnHandle_t handle = nullptr;
  std::map<Key, Plan> plans;
  DeviceBuffer workspace;
  bool log = env_flag("ZOO_CUDNN_LOG", false);

  ~Impl() {
    if (handle) (void)cudnnDestroy(handle);
  }
};

CudnnSdpa::CudnnSdpa() : impl_(std::make_unique<Impl>()) {}
CudnnSdpa::~CudnnSdpa() = default;

const std::string& CudnnSdpa::unavailable_reason() {
  static const std::string reason = probe_availability();
  return reason;
}

bool CudnnSdpa::run(const PrefillAttentionArgs& a, cudaStream_t stream) {
  if (!unavailable_reason().empty()) return false;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  ZOO_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return false;  // plans and workspace are made outside graphs
  const float scale = attention_scale(a.scale, a.head_dim);
  Key key{a.tokens, a.start, a.q_row_stride(), a.out_row_stride(), a.q_heads, a.kv_heads, a.head_dim, 0};
  std::memcpy(&key.scale_bits, &scale, sizeof scale);

  std::lock_guard lock(impl_->mutex);
  if (!impl_->handle) check(cudnnCreate(&impl_->handle), "create handle");
  auto [it, fresh] = impl_->plans.try_emplace(key);
  Plan& plan = it->second;
  if (fresh) {
    const auto t0 = std::chrono::steady_clock::now();
    BuildTimes times;
    try {
      build(plan, impl_->handle, key, times);
    } catch (const std::runtime_error& e) {
      // Any refusal while building (not only NOT_SUPPORTED: a release may reject an attribute
      // with BAD_PARAM) leaves this shape to Zoo's kernel; ZOO_CUDNN_LOG=1 says why.
      plan.why_not = e.what();
      plan.plan.reset();
    }
    if (impl_->log) {
      std::fprintf(stderr,
                   "zoo: cuDNN attention, %lld tokens after %lld, heads %d/%d, head_dim %d: %s in %.1f ms (graph %.1f, "
                   "heuristics %.1f, plan %.1f; config %lld of %lld)\n",
                   static_cast<long long>(a.tokens), static_cast<long long>(a.start), a.q_heads, a.kv_heads,
                   a.head_dim,
                   plan.plan ? ("plan, workspace " + std::to_string(plan.workspace) + " bytes").c_str()
                             : plan.why_not.c_str(),
                   ms_since(t0), times.graph_ms, times.heuristics_ms, times.plan_ms,
                   static_cast<long long>(times.picked), static_cast<long long>(times.configs));
    }
  }
  if (!plan.plan) return false;
  if (impl_->workspace.size() < static_cast<std::size_t>(plan.workspace)) {
    // Earlier calls on this stream may still read the old buffer.
    ZOO_CUDA_CHECK(cudaStreamSynchronize(stream));
    impl_->workspace = DeviceBuffer(static_cast<std::size_t>(plan.workspace));
  }

  float neg_inf = -std::numeric_limits<float>::infinity();
  float scale_value = scale;
  std::int32_t start = static_cast<std::int32_t>(a.start);
  std::vector<std::int64_t> uids{kQ, kK, kV, kO, kScale, kNegInf};
  std::vector<void*> pointers{const_cast<Bf16*>(a.q), const_cast<Bf16*>(a.k_cache), const_cast<Bf16*>(a.v_cache),
                              a.out, &scale_value, &neg_inf};
  if (a.start > 0) {
    uids.push_back(kStart);
    pointers.push_back(&start);
  }
  void* workspace = impl_->workspace.data();
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), static_cast<std::int64_t>(uids.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(),
           static_cast<std::int64_t>(pointers.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace)
      .finalize("variant pack");
  check(cudnnSetStream(impl_->handle, stream), "set stream");
  check(cudnnBackendExecute(impl_->handle, plan.plan->get(), pack.get()), "execute");
  return true;
}

}  // namespace zoo::kernels::cuda::detail
