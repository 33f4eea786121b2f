#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zoo/dtype.hpp"

namespace zoo {

using Shape = std::vector<std::int64_t>;

std::int64_t numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2, 3]"

enum class DeviceKind : std::uint8_t { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  // "cpu", "cuda", "cuda:N"; throws InputError on anything else.
  static Device parse(std::string_view text);
  std::string str() const;
  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool operator==(const Device&) const = default;
};

// A non-owning view of contiguous, row-major tensor memory on some device.
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::F32;
  Shape shape;
  Device device;

  std::int64_t numel() const { return zoo::numel(shape); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
};

// An owning, host-resident tensor. Storage is 64-byte aligned so kernels can vectorize.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);  // zero-filled

  static HostTensor from_f32(Shape shape, std::span<const float> values);
  static HostTensor from_i64(Shape shape, std::span<const std::int64_t> values);
  // Copies any host view into an owning tensor of the same dtype.
  static HostTensor copy_of(const TensorView& view);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t numel() const { return zoo::numel(shape_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return blocks_.empty(); }

  void* data() { return blocks_.data(); }
  const void* data() const { return blocks_.data(); }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(blocks_.data());
  }
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(blocks_.data());
  }
  template <class T>
  std::span<T> span() {
    return {as<T>(), static_cast<std::size_t>(numel())};
  }
  template <class T>
  std::span<const T> span() const {
    return {as<T>(), static_cast<std::size_t>(numel())};
  }
  TensorView view() const { return {blocks_.data(), dtype_, shape_, Device{}}; }
  // Same bytes, another shape with the same element count.
  void reshape(Shape shape);

 private:
  struct alignas(64) Block {
    std::byte bytes[64];
  };
  DType dtype_ = DType::F32;
  Shape shape_;
  std::vector<Block> blocks_;
};

// Converts any floating or integer host view to float32 values (used for weights and comparisons).
void to_f32(const TensorView& src, std::span<float> dst);
std::vector<float> to_f32(const TensorView& src);
HostTensor to_f32_tensor(const TensorView& src);

}  // namespace zoo
