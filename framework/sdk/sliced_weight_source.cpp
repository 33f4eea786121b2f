#include "zoo/sliced_weight_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "zoo/error.hpp"

namespace zoo {

TensorView row_range(const TensorView& whole, std::int64_t begin, std::int64_t count) {
  if (whole.shape.empty() || begin < 0 || count < 0 || begin + count > whole.shape[0])
    throw std::out_of_range(
        fmt::format("row_range: rows [{}, {}) of shape {}", begin, begin + count, shape_str(whole.shape)));
  std::size_t row_bytes = dtype_size(whole.dtype);
  for (std::size_t d = 1; d < whole.shape.size(); ++d) row_bytes *= static_cast<std::size_t>(whole.shape[d]);
  TensorView part = whole;
  part.data = static_cast<const std::byte*>(whole.data) + static_cast<std::size_t>(begin) * row_bytes;
  part.shape[0] = count;
  return part;
}

SlicedWeightSource::SlicedWeightSource(std::shared_ptr<const WeightSource> base, std::vector<SliceRule> rules)
    : base_(std::move(base)), rules_(std::move(rules)) {
  if (!base_) throw std::invalid_argument("SlicedWeightSource: no base source");
  for (const auto& rule : rules_) {
    if (rule.fused.empty() || rule.parts.empty())
      throw std::invalid_argument("SlicedWeightSource: a rule needs a fused suffix and parts");
    for (const auto& part : rule.parts)
      if (part.suffix.empty() || part.rows <= 0)
        throw std::invalid_argument("SlicedWeightSource: part '" + part.suffix + "' of " + rule.fused +
                                    " needs a suffix and a positive row count");
  }
}

std::optional<SlicedWeightSource::Match> SlicedWeightSource::match(std::string_view name) const {
  for (const auto& rule : rules_)
    for (std::size_t i = 0; i < rule.parts.size(); ++i) {
      const std::string& suffix = rule.parts[i].suffix;
      if (!name.ends_with(suffix)) continue;
      std::string stored(name.substr(0, name.size() - suffix.size()));
      stored += rule.fused;
      if (base_->contains(stored)) return Match{std::move(stored), &rule, i};
    }
  return std::nullopt;
}

TensorInfo SlicedWeightSource::checked(const Match& m) const {
  TensorInfo info = *base_->info(m.stored);
  std::int64_t total = 0;
  for (const auto& part : m.rule->parts) total += part.rows;
  if (info.shape.empty() || info.shape[0] != total) {
    std::vector<std::string> parts;
    for (const auto& part : m.rule->parts) parts.push_back(fmt::format("{} {}", part.suffix, part.rows));
    throw InputError(fmt::format("{} in {}: shape {} does not split into {} rows ({})", m.stored, base_->describe(),
                                 shape_str(info.shape), total, fmt::join(parts, " + ")));
  }
  return info;
}

std::vector<std::string> SlicedWeightSource::names() const {
  std::vector<std::string> out;
  for (auto& name : base_->names()) {
    const SliceRule* fused = nullptr;
    for (const auto& rule : rules_)
      if (std::string_view(name).ends_with(rule.fused)) fused = &rule;
    if (!fused) {
      out.push_back(std::move(name));
      continue;
    }
    const std::string prefix = name.substr(0, name.size() - fused->fused.size());
    for (const auto& part : fused->parts) out.push_back(prefix + part.suffix);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<TensorInfo> SlicedWeightSource::info(std::string_view name) const {
  const auto m = match(name);
  if (!m) return base_->info(name);
  TensorInfo info = checked(*m);
  const std::int64_t stored_rows = info.shape[0];
  info.shape[0] = m->rule->parts[m->part].rows;
  info.nbytes = info.nbytes / static_cast<std::size_t>(stored_rows) * static_cast<std::size_t>(info.shape[0]);
  return info;
}

TensorView SlicedWeightSource::view(std::string_view name) const {
  const auto m = match(name);
  if (!m) return base_->view(name);
  checked(*m);
  TensorView whole = base_->view(m->stored);
  std::int64_t begin = 0;
  for (std::size_t i = 0; i < m->part; ++i) begin += m->rule->parts[i].rows;
  return row_range(whole, begin, m->rule->parts[m->part].rows);
}

std::string SlicedWeightSource::stored_name(std::string_view name) const {
  if (const auto m = match(name)) return base_->stored_name(m->stored);
  return base_->stored_name(name);
}

std::string SlicedWeightSource::describe() const {
  return fmt::format("{} (with {} fused tensor kind{} sliced)", base_->describe(), rules_.size(),
                     rules_.size() == 1 ? "" : "s");
}

}  // namespace zoo
