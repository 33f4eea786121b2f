#include "zoo/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "zoo/safetensors.hpp"

namespace zoo {

TraceRecorder::TraceRecorder(PointSelection selection) : selection_(std::move(selection)) {}

bool TraceRecorder::wants(std::string_view name) const { return selection_.matches(name); }

const HostTensor* TraceRecorder::find(std::string_view name) const {
  for (const auto& [key, tensor] : tensors_)
    if (key == name) return &tensor;
  return nullptr;
}

void TraceRecorder::record(std::string_view name, const TensorView& tensor) {
  if (!tensor.device.is_cpu())
    throw std::invalid_argument(fmt::format("TraceRecorder: tap '{}' is not a host tensor", name));
  for (auto& [key, existing] : tensors_) {
    if (key != name) continue;
    const Shape& old_shape = existing.shape();
    const bool same_tail = old_shape.size() == tensor.shape.size() && !old_shape.empty() &&
                           std::equal(old_shape.begin() + 1, old_shape.end(), tensor.shape.begin() + 1);
    if (existing.dtype() != tensor.dtype || !same_tail)
      throw std::invalid_argument(fmt::format(
          "TraceRecorder: tap '{}' recorded again as {} {} but holds {} {}: only dim 0 may differ", name,
          dtype_name(tensor.dtype), shape_str(tensor.shape), dtype_name(existing.dtype()), shape_str(old_shape)));
    Shape joined = old_shape;
    joined[0] += tensor.shape[0];
    HostTensor grown(existing.dtype(), joined);
    auto* out = static_cast<std::byte*>(grown.data());
    if (existing.nbytes()) std::memcpy(out, existing.data(), existing.nbytes());
    if (tensor.nbytes()) std::memcpy(out + existing.nbytes(), tensor.data, tensor.nbytes());
    existing = std::move(grown);
    return;
  }
  tensors_.emplace_back(std::string(name), HostTensor::copy_of(tensor));
}

void TraceRecorder::write(const std::filesystem::path& path, const std::map<std::string, std::string>& metadata) const {
  std::vector<std::pair<std::string, TensorView>> views;
  views.reserve(tensors_.size());
  for (const auto& [name, tensor] : tensors_) views.emplace_back(name, tensor.view());
  write_safetensors(path, views, metadata);
}

std::string default_trace_points() { return "input_ids,embed,layer.*.output,final_norm,logits"; }

std::string default_trace_points(const std::vector<std::string>& extra_points) {
  std::string points = default_trace_points();
  for (const auto& extra : extra_points)
    if (!extra.empty()) points += "," + extra;
  return points;
}

}  // namespace zoo
