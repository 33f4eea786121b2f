#include "zoo/tensor.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstring>

#include "zoo/error.hpp"

namespace zoo {

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Device Device::parse(std::string_view text) {
  if (text == "cpu") return {DeviceKind::CPU, 0};
  if (text == "cuda") return {DeviceKind::CUDA, 0};
  if (text.starts_with("cuda:")) {
    auto digits = text.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0) return {DeviceKind::CUDA, index};
  }
  throw InputError(fmt::format("unknown device '{}' (expected cpu, cuda or cuda:N)", text));
}

std::string Device::str() const { return kind == DeviceKind::CPU ? "cpu" : fmt::format("cuda:{}", index); }

HostTensor::HostTensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (auto d : shape_)
    if (d < 0) throw std::invalid_argument("HostTensor: negative dimension " + shape_str(shape_));
  blocks_.resize((nbytes() + sizeof(Block) - 1) / sizeof(Block));
  if (!blocks_.empty()) std::memset(blocks_.data(), 0, blocks_.size() * sizeof(Block));
}

HostTensor HostTensor::from_f32(Shape shape, std::span<const float> values) {
  HostTensor t(DType::F32, std::move(shape));
  if (static_cast<std::int64_t>(values.size()) != t.numel())
    throw std::invalid_argument("HostTensor::from_f32: value count does not match the shape");
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size_bytes());
  return t;
}

HostTensor HostTensor::from_i64(Shape shape, std::span<const std::int64_t> values) {
  HostTensor t(DType::I64, std::move(shape));
  if (static_cast<std::int64_t>(values.size()) != t.numel())
    throw std::invalid_argument("HostTensor::from_i64: value count does not match the shape");
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size_bytes());
  return t;
}

HostTensor HostTensor::copy_of(const TensorView& view) {
  HostTensor t(view.dtype, view.shape);
  if (t.nbytes()) std::memcpy(t.data(), view.data, t.nbytes());
  return t;
}

void HostTensor::reshape(Shape shape) {
  if (zoo::numel(shape) != numel())
    throw std::invalid_argument("HostTensor::reshape: " + shape_str(shape_) + " -> " + shape_str(shape));
  shape_ = std::move(shape);
}

namespace {

template <class T>
void widen(const std::byte* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    T value;
    std::memcpy(&value, src + i * sizeof(T), sizeof(T));  // source may be unaligned (mmapped)
    dst[i] = static_cast<float>(value);
  }
}

}  // namespace

void to_f32(const TensorView& src, std::span<float> dst) {
  const auto n = static_cast<std::size_t>(src.numel());
  if (dst.size() != n) throw std::invalid_argument("to_f32: destination size does not match");
  if (!src.device.is_cpu()) throw std::invalid_argument("to_f32: source is not on the host");
  const auto* bytes = static_cast<const std::byte*>(src.data);
  switch (src.dtype) {
    case DType::F32:
      if (n) std::memcpy(dst.data(), bytes, n * 4);
      break;
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, 2);
        dst[i] = bf16_to_f32(bits);
      }
      break;
    case DType::F16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, 2);
        dst[i] = f16_to_f32(bits);
      }
      break;
    case DType::F64: widen<double>(bytes, dst.data(), n); break;
    case DType::I64: widen<std::int64_t>(bytes, dst.data(), n); break;
    case DType::I32: widen<std::int32_t>(bytes, dst.data(), n); break;
    case DType::I16: widen<std::int16_t>(bytes, dst.data(), n); break;
    case DType::I8: widen<std::int8_t>(bytes, dst.data(), n); break;
    case DType::U8: widen<std::uint8_t>(bytes, dst.data(), n); break;
    case DType::BOOL: widen<std::uint8_t>(bytes, dst.data(), n); break;
  }
}

std::vector<float> to_f32(const TensorView& src) {
  std::vector<float> out(static_cast<std::size_t>(src.numel()));
  to_f32(src, out);
  return out;
}

HostTensor to_f32_tensor(const TensorView& src) {
  HostTensor out(DType::F32, src.shape);
  to_f32(src, out.span<float>());
  return out;
}

}  // namespace zoo
