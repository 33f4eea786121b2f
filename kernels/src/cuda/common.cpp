#include "zoo/kernels/cuda/common.hpp"

#include <cublas_api.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "zoo/kernels/env.hpp"

namespace zoo::kernels::cuda {

void throw_cuda_error(cudaError_t status, const char* expr, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                           cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

void throw_cublas_error(int status, const char* expr, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                           cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
}

bool cuda_available() {
  static const bool available = [] {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      // No driver or no device: the error is sticky for this query only; clear it so later
      // cudaGetLastError calls do not report it.
      (void)cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  return available;
}

std::string cuda_device_problem(int device) {
  if (!cuda_available()) return "device cuda:" + std::to_string(device) + " requested, but no CUDA device is usable";
  int count = 0;
  ZOO_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    return "device cuda:" + std::to_string(device) + " requested, but only " + std::to_string(count) +
           " CUDA device(s) exist";
  return "";
}

int current_device() {
  int device = 0;
  ZOO_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

const DeviceProperties& device_properties(int device) {
  if (device < 0) device = current_device();
  static std::mutex mutex;
  static std::map<int, DeviceProperties> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(device); it != cache.end()) return it->second;
  DeviceProperties p;
  p.device = device;
  cudaDeviceProp prop{};
  ZOO_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  p.name = prop.name;
  p.major = prop.major;
  p.minor = prop.minor;
  p.multiprocessors = prop.multiProcessorCount;
  p.total_memory = prop.totalGlobalMem;
  p.l2_cache_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  p.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  p.shared_memory_per_multiprocessor = prop.sharedMemPerMultiprocessor;
  return cache.emplace(device, std::move(p)).first->second;
}

bool hopper_paths(int device) {
  return device_properties(device).major >= 9 && !env_flag("ZOO_CUDA_PRE_HOPPER", false);
}

// ---------------------------------------------------------------------------------------------
DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) ZOO_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)cudaFree(ptr_);  // destructors must not throw; a failing free has no remedy
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::check_range(std::size_t bytes, std::size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw std::out_of_range("DeviceBuffer: " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                            " exceed the buffer's " + std::to_string(bytes_) + " bytes");
}

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  check_range(bytes, offset);
  if (!bytes) return;
  ZOO_CUDA_CHECK(cudaMemcpy(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the DMA lands, and work on a non-blocking
  // stream does not wait for the legacy stream: make "synchronous" mean it.
  ZOO_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  check_range(bytes, offset);
  if (bytes)
    ZOO_CUDA_CHECK(cudaMemcpy(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::upload_async(const void* host, std::size_t bytes, cudaStream_t stream, std::size_t offset) {
  check_range(bytes, offset);
  if (bytes)
    ZOO_CUDA_CHECK(
        cudaMemcpyAsync(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice, stream));
}

void DeviceBuffer::download_async(void* host, std::size_t bytes, cudaStream_t stream, std::size_t offset) const {
  check_range(bytes, offset);
  if (bytes)
    ZOO_CUDA_CHECK(
        cudaMemcpyAsync(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost, stream));
}

void DeviceBuffer::fill_bytes(int value) {
  if (!bytes_) return;
  ZOO_CUDA_CHECK(cudaMemset(ptr_, value, bytes_));
  ZOO_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // cudaMemset is asynchronous for device memory
}

// ---------------------------------------------------------------------------------------------
PinnedBuffer::PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) ZOO_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) (void)cudaFreeHost(ptr_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) (void)cudaFreeHost(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

// ---------------------------------------------------------------------------------------------
Stream::Stream() { ZOO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_) (void)cudaStreamDestroy(stream_);
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const { ZOO_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

// ---------------------------------------------------------------------------------------------
Event::Event(bool timing) {
  ZOO_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() {
  if (event_) (void)cudaEventDestroy(event_);
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(cudaStream_t stream) { ZOO_CUDA_CHECK(cudaEventRecord(event_, stream)); }
void Event::synchronize() const { ZOO_CUDA_CHECK(cudaEventSynchronize(event_)); }

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0.0f;
  ZOO_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

// ---------------------------------------------------------------------------------------------
CudaGraph::~CudaGraph() { reset(); }

CudaGraph::CudaGraph(CudaGraph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

CudaGraph& CudaGraph::operator=(CudaGraph&& other) noexcept {
  if (this != &other) {
    reset();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void CudaGraph::reset() {
  if (exec_) (void)cudaGraphExecDestroy(std::exchange(exec_, nullptr));
  if (graph_) (void)cudaGraphDestroy(std::exchange(graph_, nullptr));
}

void CudaGraph::begin_capture(cudaStream_t stream) {
  // Thread-local mode: other threads may keep using CUDA (e.g. loading weights) meanwhile.
  ZOO_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
}

bool CudaGraph::end_capture(cudaStream_t stream) {
  cudaGraph_t captured = nullptr;
  ZOO_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
  if (graph_) (void)cudaGraphDestroy(graph_);
  graph_ = captured;
  if (exec_) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(exec_, graph_, &info) == cudaSuccess) return true;
    // The topology changed (or a node cannot be updated): the failed update leaves an error
    // that must be cleared before building a new instance.
    (void)cudaGetLastError();
    (void)cudaGraphExecDestroy(std::exchange(exec_, nullptr));
  }
  ZOO_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  return false;
}

void CudaGraph::launch(cudaStream_t stream) const {
  if (!exec_) throw std::logic_error("CudaGraph::launch: nothing was captured");
  ZOO_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

}  // namespace zoo::kernels::cuda
