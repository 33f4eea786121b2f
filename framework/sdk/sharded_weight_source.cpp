#include "zoo/sharded_weight_source.hpp"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "zoo/error.hpp"
#include "zoo/sliced_weight_source.hpp"

namespace zoo {

std::pair<std::int64_t, std::int64_t> shard_units(std::int64_t units, int rank, int ranks,
                                                  const std::string& what) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw std::invalid_argument(fmt::format("shard_units: rank {} of {}", rank, ranks));
  if (units >= ranks && units % ranks == 0) {
    const std::int64_t each = units / ranks;
    return {rank * each, (rank + 1) * each};
  }
  if (units > 0 && units < ranks && ranks % units == 0) {
    const std::int64_t unit = rank / (ranks / units);
    return {unit, unit + 1};
  }
  throw InputError(fmt::format(
      "{} do not split over {} ranks (the ranks must divide them, or they the ranks)", what, ranks));
}

ShardedWeightSource::ShardedWeightSource(std::shared_ptr<const WeightSource> base,
                                         std::vector<ShardRule> rules, int rank, int ranks)
    : base_(std::move(base)), rules_(std::move(rules)), rank_(rank), ranks_(ranks) {
  if (!base_) throw std::invalid_argument("ShardedWeightSource: no base source");
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw std::invalid_argument(fmt::format("ShardedWeightSource: rank {} of {}", rank, ranks));
  for (const auto& rule : rules_)
    if (rule.suffix.empty() || (rule.dim != 0 && rule.dim != 1) || rule.units < 0)
      throw std::invalid_argument("ShardedWeightSource: a rule needs a suffix, dim 0 or 1 and units >= 0");
}

std::optional<ShardedWeightSource::Slice> ShardedWeightSource::slice_of(std::string_view name,
                                                                        const TensorInfo& info) const {
  for (const auto& rule : rules_) {
    if (!name.ends_with(rule.suffix)) continue;
    const auto rank = static_cast<int>(info.shape.size());
    if (rule.dim >= rank || (rule.dim == 1 && rank != 2))
      throw InputError(fmt::format("{}: shape {} cannot be split along dimension {} for tensor parallelism",
                                   name, shape_str(info.shape), rule.dim));
    const std::int64_t extent = info.shape[static_cast<std::size_t>(rule.dim)];
    const std::int64_t units = rule.units > 0 ? rule.units : extent;
    if (extent % units != 0)
      throw InputError(fmt::format("{}: {} {} do not divide its dimension {} of {}", name, units,
                                   rule.unit_name.empty() ? "units" : rule.unit_name, rule.dim, extent));
    const auto [begin, end] = shard_units(
        units, rank_, ranks_,
        fmt::format("{}: its {} {}", name, units, rule.unit_name.empty() ? "units" : rule.unit_name));
    const std::int64_t unit = extent / units;
    return Slice{&rule, begin * unit, (end - begin) * unit};
  }
  return std::nullopt;
}

std::optional<TensorInfo> ShardedWeightSource::info(std::string_view name) const {
  auto info = base_->info(name);
  if (!info) return info;
  if (const auto s = slice_of(name, *info)) {
    info->shape[static_cast<std::size_t>(s->rule->dim)] = s->count;
    info->nbytes = static_cast<std::size_t>(numel(info->shape)) * dtype_size(info->dtype);
  }
  return info;
}

TensorView ShardedWeightSource::view(std::string_view name) const {
  TensorView whole = base_->view(name);
  const auto info = base_->info(name);
  const auto s = info ? slice_of(name, *info) : std::nullopt;
  if (!s) return whole;
  if (s->rule->dim == 0) return row_range(whole, s->begin, s->count);  // a pointer into the stored bytes
  const std::size_t elem = dtype_size(whole.dtype);
  const std::lock_guard lock(mutex_);
  auto it = copies_.find(name);
  if (it == copies_.end()) {  // columns: this rank's, copied row by row
    const std::int64_t rows = whole.shape[0], cols = whole.shape[1];
    HostTensor copy(whole.dtype, {rows, s->count});
    auto* dst = static_cast<std::byte*>(copy.data());
    const auto* src = static_cast<const std::byte*>(whole.data);
    const std::size_t take = static_cast<std::size_t>(s->count) * elem;
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + static_cast<std::size_t>(r) * take,
                  src + (static_cast<std::size_t>(r * cols + s->begin)) * elem, take);
    it = copies_.emplace(std::string(name), std::move(copy)).first;
  }
  return it->second.view();
}

std::string ShardedWeightSource::describe() const {
  return fmt::format("{} (rank {} of {})", base_->describe(), rank_, ranks_);
}

}  // namespace zoo
