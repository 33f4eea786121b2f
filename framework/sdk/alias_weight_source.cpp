#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "zoo/alias_weight_source.hpp"
#include "zoo/error.hpp"
#include "zoo/weight_source.hpp"

namespace zoo {

AliasRule AliasRule::exact(std::string requested, std::string stored) {
  return {Kind::Exact, std::move(requested), std::move(stored), false};
}

AliasRule AliasRule::with_prefix(std::string requested_prefix, std::string stored_prefix) {
  return {Kind::Prefix, std::move(requested_prefix), std::move(stored_prefix), false};
}

AliasRule AliasRule::drop(std::string stored, bool is_prefix) { return {Kind::Drop, {}, std::move(stored), is_prefix}; }

AliasWeightSource::AliasWeightSource(std::shared_ptr<const WeightSource> base, std::vector<AliasRule> rules)
    : base_(std::move(base)), rules_(std::move(rules)) {
  if (!base_) throw std::invalid_argument("AliasWeightSource: no base source");
}

std::string AliasWeightSource::stored_name(std::string_view name) const {
  for (const auto& rule : rules_) {
    switch (rule.kind) {
      case AliasRule::Kind::Exact:
        if (name == rule.requested) return rule.stored;
        break;
      case AliasRule::Kind::Prefix:
        if (name.starts_with(rule.requested)) return rule.stored + std::string(name.substr(rule.requested.size()));
        break;
      case AliasRule::Kind::Drop:
        break;
    }
  }
  return std::string(name);
}

bool AliasWeightSource::dropped(std::string_view stored) const {
  return std::any_of(rules_.begin(), rules_.end(), [&](const AliasRule& rule) {
    return rule.kind == AliasRule::Kind::Drop && (rule.prefix ? stored.starts_with(rule.stored) : stored == rule.stored);
  });
}

std::optional<std::string> AliasWeightSource::requested_name(std::string_view stored) const {
  if (dropped(stored)) return std::nullopt;
  for (const auto& rule : rules_) {
    std::string candidate;
    if (rule.kind == AliasRule::Kind::Exact && stored == rule.stored)
      candidate = rule.requested;
    else if (rule.kind == AliasRule::Kind::Prefix && stored.starts_with(rule.stored))
      candidate = rule.requested + std::string(stored.substr(rule.stored.size()));
    else
      continue;
    // A rule earlier in the list may claim the candidate for another stored name; only a name
    // that resolves back to this tensor can be shown.
    if (stored_name(candidate) == stored) return candidate;
  }
  if (stored_name(stored) == stored) return std::string(stored);
  return std::nullopt;  // shadowed: every name that would reach it resolves elsewhere
}

std::vector<std::string> AliasWeightSource::names() const {
  std::vector<std::string> out;
  for (const auto& stored : base_->names()) {
    if (dropped(stored)) continue;
    // Several requested names may share one stored tensor (tied weights): list each of them.
    bool mapped = false;
    for (const auto& rule : rules_) {
      std::string candidate;
      if (rule.kind == AliasRule::Kind::Exact && stored == rule.stored)
        candidate = rule.requested;
      else if (rule.kind == AliasRule::Kind::Prefix && std::string_view(stored).starts_with(rule.stored))
        candidate = rule.requested + stored.substr(rule.stored.size());
      else
        continue;
      if (stored_name(candidate) == stored) {
        out.push_back(std::move(candidate));
        mapped = true;
      }
    }
    if (!mapped)
      if (auto name = requested_name(stored)) out.push_back(std::move(*name));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<TensorInfo> AliasWeightSource::info(std::string_view name) const {
  const auto stored = stored_name(name);
  if (dropped(stored)) return std::nullopt;
  return base_->info(stored);
}

TensorView AliasWeightSource::view(std::string_view name) const {
  const auto stored = stored_name(name);
  const bool hidden = dropped(stored);
  if (hidden || !base_->contains(stored)) {
    const auto why = hidden ? " (hidden by a drop rule)" : "";
    if (stored == name) throw InputError(fmt::format("{} not found in {}{}", name, base_->describe(), why));
    throw InputError(fmt::format("{} (stored as {}) not found in {}{}", name, stored, base_->describe(), why));
  }
  return base_->view(stored);
}

std::string AliasWeightSource::describe() const {
  return fmt::format("{} (with {} alias rule{})", base_->describe(), rules_.size(), rules_.size() == 1 ? "" : "s");
}

}  // namespace zoo
