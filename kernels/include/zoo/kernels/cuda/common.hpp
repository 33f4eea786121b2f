#pragma once
// CUDA plumbing shared by every CUDA op: error checks, RAII owners of device resources, graphs.
// Only the runtime API header is included (g++ compiles it with the CUDA include directory,
// which CUDA::cudart brings along); cuBLAS types stay inside the .cpp files.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace zoo::kernels::cuda {

// A bf16 value as stored in memory (same layout as __nv_bfloat16). A distinct type so that a
// bf16 device pointer cannot be passed where float or f16 data is expected.
struct Bf16 {
  std::uint16_t bits;
};
static_assert(sizeof(Bf16) == 2);

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(int status, const char* expr, const char* file, int line);

inline void check_cuda(cudaError_t status, const char* expr, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_error(status, expr, file, line);
}
inline void check_cublas(int status, const char* expr, const char* file, int line) {
  if (status != 0) throw_cublas_error(status, expr, file, line);  // 0 == CUBLAS_STATUS_SUCCESS
}

}  // namespace zoo::kernels::cuda

// Throw std::runtime_error("file:line: expr: <error name>: <error string>") on failure.
#define ZOO_CUDA_CHECK(expr) ::zoo::kernels::cuda::check_cuda((expr), #expr, __FILE__, __LINE__)
#define ZOO_CUBLAS_CHECK(expr) \
  ::zoo::kernels::cuda::check_cublas(static_cast<int>(expr), #expr, __FILE__, __LINE__)
// After a kernel launch: launch errors (bad configuration, too much shared memory) only show up
// through cudaGetLastError, which is legal during stream capture.
#define ZOO_CUDA_CHECK_LAUNCH() ZOO_CUDA_CHECK(cudaGetLastError())

namespace zoo::kernels::cuda {

// True when a CUDA driver and at least one device are usable. Never throws; the answer is
// computed once per process.
bool cuda_available();
// Why cuda:`device` cannot be used ("device cuda:N requested, but ..."), or "" when it can: the
// one check every CUDA model part makes before it allocates.
std::string cuda_device_problem(int device);

struct DeviceProperties {
  int device = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  std::size_t total_memory = 0;
  std::size_t l2_cache_bytes = 0;
  std::size_t shared_memory_per_block_optin = 0;  // the most one block may ask for after opt-in
  std::size_t shared_memory_per_multiprocessor = 0;
};
// Properties of `device` (-1: the current device). Cached per device after the first call.
const DeviceProperties& device_properties(int device = -1);
// Whether the kernels may take their sm_90+ paths on `device` (-1: the current one): thread-block
// clusters and programmatic dependent launch. False on Ampere and Ada (compute capability 8.x),
// and everywhere under ZOO_CUDA_PRE_HOPPER=1, which runs a Hopper GPU exactly as those devices
// run (the only way to test the non-Hopper paths on an H200). Read per call, like every switch.
bool hopper_paths(int device = -1);
int current_device();

// Owns a cudaMalloc allocation. Move-only; a moved-from or default buffer holds nothing.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() { return ptr_; }
  const void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }
  template <class T>
  T* as() {
    return static_cast<T*>(ptr_);
  }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(ptr_);
  }

  // Synchronous copies (for setup and tests); offsets and sizes in bytes, checked against size().
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  // Stream-ordered copies; `host` should be pinned for them to be truly asynchronous.
  void upload_async(const void* host, std::size_t bytes, cudaStream_t stream, std::size_t offset = 0);
  void download_async(void* host, std::size_t bytes, cudaStream_t stream, std::size_t offset = 0) const;
  // Fills every byte with `value` (synchronous).
  void fill_bytes(int value);

 private:
  void check_range(std::size_t bytes, std::size_t offset) const;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Owns page-locked host memory (cudaMallocHost): the source/target of asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() { return ptr_; }
  const void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  template <class T>
  T* as() {
    return static_cast<T*>(ptr_);
  }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A non-blocking stream (does not synchronize with the legacy default stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  void synchronize() const;
  // Milliseconds between two recorded, completed timing events.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  cudaEvent_t event_ = nullptr;
};

// A captured CUDA graph and its executable instance. Re-capturing the same sequence of launches
// with new arguments updates the instance in place when the topology allows it, and
// re-instantiates otherwise, so a decode step can be replayed with one launch.
class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(CudaGraph&& other) noexcept;
  CudaGraph& operator=(CudaGraph&& other) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Work issued to `stream` between begin_capture and end_capture is recorded, not run.
  void begin_capture(cudaStream_t stream);
  // Ends the capture and updates (or creates) the executable graph. Returns true when the
  // existing instance could be updated in place.
  bool end_capture(cudaStream_t stream);
  void launch(cudaStream_t stream) const;
  bool ready() const { return exec_ != nullptr; }
  void reset();

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

}  // namespace zoo::kernels::cuda
