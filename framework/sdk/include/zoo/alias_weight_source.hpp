#pragma once
// A WeightSource that presents another under other names (alias_weight_source.cpp): how a plugin
// reuses a model whose checkpoint stores the same tensors under other names.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zoo/weight_source.hpp"

namespace zoo {

// One rule of an AliasWeightSource. Requested names are what a model asks for, stored names what
// the checkpoint holds. A prefix rule is anchored at the start of the name. A drop rule hides
// stored names that match `stored` (exactly, or as a prefix when `prefix` is set).
struct AliasRule {
  enum class Kind { Exact, Prefix, Drop };
  Kind kind = Kind::Exact;
  std::string requested;  // empty for Drop
  std::string stored;
  bool prefix = false;    // Drop only: `stored` is a prefix

  static AliasRule exact(std::string requested, std::string stored);
  static AliasRule with_prefix(std::string requested_prefix, std::string stored_prefix);
  static AliasRule drop(std::string stored, bool is_prefix);
};

// Presents a base source under other names. The first matching rule wins; names no rule maps pass
// through unchanged. Mapping is idempotent: a name already in stored form that no rule's requested
// side matches resolves to itself. Views are the base's views.
class AliasWeightSource : public WeightSource {
 public:
  AliasWeightSource(std::shared_ptr<const WeightSource> base, std::vector<AliasRule> rules);

  std::vector<std::string> names() const override;
  std::optional<TensorInfo> info(std::string_view name) const override;
  TensorView view(std::string_view name) const override;
  std::string describe() const override;
  std::string stored_name(std::string_view name) const override;
  std::map<std::string, std::string> metadata() const override { return base_->metadata(); }

  const WeightSource& base() const { return *base_; }
  const std::vector<AliasRule>& rules() const { return rules_; }

 private:
  std::optional<std::string> requested_name(std::string_view stored) const;  // nullopt: dropped
  bool dropped(std::string_view stored) const;

  std::shared_ptr<const WeightSource> base_;
  std::vector<AliasRule> rules_;
};

}  // namespace zoo
