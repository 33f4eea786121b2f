#pragma once
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zoo/tensor.hpp"

namespace zoo {

struct TensorInfo {
  std::string stored_name;  // the name inside the file
  std::string file;         // the file that holds it
  DType dtype = DType::F32;
  Shape shape;
  std::size_t nbytes = 0;
};

// Where a model's tensors come from. Models only ever ask a WeightSource for tensors by name.
// Views point at mapped file bytes: nothing is copied.
class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // Every tensor name this source answers to, sorted.
  virtual std::vector<std::string> names() const = 0;
  virtual std::optional<TensorInfo> info(std::string_view name) const = 0;
  // Throws InputError "NAME (stored as S) not found in DESCRIPTION" when absent.
  virtual TensorView view(std::string_view name) const = 0;
  // What this source is, for messages: "checkpoint models/my-model".
  virtual std::string describe() const = 0;
  // The stored name a requested name resolves to (itself for plain sources).
  virtual std::string stored_name(std::string_view name) const { return std::string(name); }
  // The checkpoint's __metadata__ merged over all files.
  virtual std::map<std::string, std::string> metadata() const { return {}; }

  bool contains(std::string_view name) const { return info(name).has_value(); }
};

// A directory holding model.safetensors or model.safetensors.index.json (plus config.json), a
// single .safetensors file, or an index file. Throws InputError naming the path on any problem,
// including an index that names a missing shard.
std::shared_ptr<const WeightSource> open_checkpoint(const std::filesystem::path& path);

// The (tensor, shard file) pairs of a model.safetensors.index.json's weight_map, checked: JSON
// (depth-limited), an object with a "weight_map" object of strings, every shard a relative path
// inside the checkpoint directory (no "..", not absolute). InputError naming `label` otherwise.
std::vector<std::pair<std::string, std::string>> parse_shard_index(std::string_view text, const std::string& label);

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
