// A batch runner's sequences and their KV pages (kv_sequences.hpp).
#include "kv_sequences.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "decoder_backend.hpp"
#include "zoo/error.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

std::vector<KvSequences::Group> KvSequences::layer_groups(const DecoderSpec& c) {
  std::vector<Group> groups;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const LayerSpec layer = c.layer(l);
    const std::int64_t window = layer.attention == AttentionKind::sliding ? layer.window : 0;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.window == window; });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{window, {}, nullptr});
    it->layers.push_back(l);
  }
  return groups;
}

namespace {

std::int64_t pool_pages(const DecoderSpec& c, const RunnerOptions& options, std::int64_t context,
                        std::int64_t page_bytes, double budget_bytes) {
  const std::int64_t per_sequence = (context + kKvPageTokens - 1) / kKvPageTokens;
  if (options.kv_pages > 0) return options.kv_pages;
  if (options.kv_bytes > 0) {
    const std::int64_t pages = options.kv_bytes / page_bytes;
    if (pages < per_sequence)
      throw InputError(fmt::format("{}: a KV cache of {:.3f} GB holds {} pages of {} tokens, fewer than one sequence at "
                                   "the context limit {} needs ({})",
                                   c.family, static_cast<double>(options.kv_bytes) / 1e9, pages, kKvPageTokens, context,
                                   per_sequence));
    return pages;
  }
  const auto affordable = static_cast<std::int64_t>(budget_bytes / static_cast<double>(page_bytes));
  if (options.kv_memory_fraction > 0) {
    if (affordable < per_sequence)
      throw InputError(fmt::format("{}: a memory fraction of {} leaves {:.3f} GB for the KV cache: {} pages of {} "
                                   "tokens, fewer than one sequence at the context limit {} needs ({})",
                                   c.family, options.kv_memory_fraction, std::max(0.0, budget_bytes) / 1e9,
                                   std::max<std::int64_t>(affordable, 0), kKvPageTokens, context, per_sequence));
    return affordable;
  }
  const std::int64_t sequences = std::max<std::int64_t>(options.max_sequences, 1);
  return std::clamp<std::int64_t>(std::min(per_sequence * sequences, affordable), per_sequence, std::int64_t{1} << 30);
}

// The most pages a sliding-window group's sequences hold at once: each keeps the window behind its
// newest token (a partly filled page at either end) and takes a page for its next decode token,
// and one of them may take a whole-context step (a Session's prefill, the engine's biggest chunk),
// so that any step that fits the full-attention pool fits here too.
std::int64_t window_pages(std::int64_t window, std::int64_t sequences, std::int64_t context) {
  const std::int64_t per_sequence = (window - 1 + kKvPageTokens - 1) / kKvPageTokens + 2;
  return std::max<std::int64_t>(sequences, 1) * per_sequence + (context + kKvPageTokens - 1) / kKvPageTokens;
}

std::int64_t context_limit(const DecoderSpec& c, const RunnerOptions& options, std::int64_t model_max_context) {
  const std::int64_t context = options.max_context > 0 ? options.max_context : model_max_context;
  if (context > model_max_context)
    throw InputError(fmt::format("{}: context limit {} exceeds the model's {}", c.family, context, model_max_context));
  if (options.max_sequences <= 0)
    throw InputError(fmt::format("{}: a runner needs at least one sequence (max_sequences {})", c.family,
                                 options.max_sequences));
  return context;
}

}  // namespace

KvSequences::KvSequences(const DecoderSpec& spec, const RunnerOptions& options, std::int64_t model_max_context,
                         std::int64_t page_bytes, double budget_bytes)
    : spec_(spec), max_sequences_(options.max_sequences), max_context_(context_limit(spec, options, model_max_context)),
      groups_(layer_groups(spec)), layer_group_(static_cast<std::size_t>(spec.num_layers)),
      layer_index_(static_cast<std::size_t>(spec.num_layers)) {
  const std::int64_t pages = pool_pages(spec, options, max_context_, page_bytes, budget_bytes);
  // Sliding-window groups keep only their windows: their pools stop at what the sequences can hold
  // (vLLM's hybrid KV cache does the same). Where the pool was sized by bytes, the full-attention
  // groups get what that leaves (up to what max_sequences sequences at the context limit need).
  std::vector<std::int64_t> capacity(groups_.size(), pages);
  std::int64_t spare_layer_pages = 0, full_layers = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto layers = static_cast<std::int64_t>(groups_[g].layers.size());
    if (groups_[g].window == 0) {
      full_layers += layers;
      continue;
    }
    capacity[g] = std::min(pages, window_pages(groups_[g].window, max_sequences_, max_context_));
    spare_layer_pages += (pages - capacity[g]) * layers;
  }
  if (options.kv_pages == 0 && full_layers > 0 && spare_layer_pages > 0) {
    const std::int64_t per_sequence = (max_context_ + kKvPageTokens - 1) / kKvPageTokens;
    const std::int64_t wanted = options.kv_bytes > 0 || options.kv_memory_fraction > 0
                                    ? std::int64_t{1} << 30
                                    : per_sequence * max_sequences_;
    const std::int64_t full = std::max(pages, std::min(pages + spare_layer_pages / full_layers, wanted));
    for (std::size_t g = 0; g < groups_.size(); ++g)
      if (groups_[g].window == 0) capacity[g] = full;
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].pool = std::make_unique<KvPagePool>(capacity[g]);
    for (std::size_t i = 0; i < groups_[g].layers.size(); ++i) {
      layer_group_[static_cast<std::size_t>(groups_[g].layers[i])] = g;
      layer_index_[static_cast<std::size_t>(groups_[g].layers[i])] = static_cast<std::int64_t>(i);
    }
  }
}

SequenceId KvSequences::open_sequence() {
  if (static_cast<std::int64_t>(sequences_.size()) >= max_sequences_)
    throw InputError(fmt::format("{}: {} sequences are open, the runner's limit", spec_.family, max_sequences_));
  std::vector<KvPageTable> tables;
  for (auto& g : groups_) tables.emplace_back(*g.pool, g.window);
  sequences_.emplace(next_id_, std::move(tables));
  hold(next_id_, {});
  return next_id_++;
}

void KvSequences::hold(SequenceId id, std::vector<std::int32_t> ids) {
  std::int64_t slot = next_slot_;
  if (free_slots_.empty()) {
    ++next_slot_;
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  held_.emplace(id, Held{slot, std::move(ids)});
}

std::span<const std::int32_t> KvSequences::token_ids(SequenceId id) const {
  const auto it = held_.find(id);
  if (it == held_.end()) throw std::logic_error(fmt::format("{}: unknown sequence {}", spec_.family, id));
  return it->second.ids;
}

std::int64_t KvSequences::slot(SequenceId id) const {
  const auto it = held_.find(id);
  if (it == held_.end()) throw std::logic_error(fmt::format("{}: unknown sequence {}", spec_.family, id));
  return it->second.slot;
}

std::vector<SequenceId> KvSequences::open_sequences() const {
  std::vector<SequenceId> ids;
  for (const auto& [id, tables] : sequences_) ids.push_back(id);
  return ids;
}

SequenceId KvSequences::fork_sequence(SequenceId id, std::int64_t tokens) {
  const auto& parent = tables(id);
  if (static_cast<std::int64_t>(sequences_.size()) >= max_sequences_)
    throw InputError(fmt::format("{}: {} sequences are open, the runner's limit", spec_.family, max_sequences_));
  const std::int64_t have = parent.front().tokens();
  if (tokens > have)
    throw InputError(fmt::format("{}: a fork of {} tokens from sequence {}, which holds {}", spec_.family, tokens, id, have));
  std::vector<KvPageTable> child;
  for (const auto& table : parent) {
    if (tokens < 0) {
      child.push_back(table.fork());
      continue;
    }
    try {
      child.push_back(table.fork(tokens));
    } catch (const std::out_of_range&) {
      throw InputError(fmt::format("{}: a fork of {} tokens from sequence {} reaches positions its sliding window "
                                   "(of {}) gave back",
                                   spec_.family, tokens, id, table.window()));
    }
  }
  sequences_.emplace(next_id_, std::move(child));
  const auto ids = token_ids(id);
  hold(next_id_, std::vector<std::int32_t>(ids.begin(), ids.begin() + (tokens < 0 ? have : tokens)));
  return next_id_++;
}

void KvSequences::close_sequence(SequenceId id) {
  if (sequences_.erase(id) == 0) throw std::logic_error(fmt::format("{}: close of unknown sequence {}", spec_.family, id));
  const auto it = held_.find(id);
  free_slots_.push_back(it->second.slot);
  held_.erase(it);
}

const std::vector<KvPageTable>& KvSequences::tables(SequenceId id) const {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) throw std::logic_error(fmt::format("{}: unknown sequence {}", spec_.family, id));
  return it->second;
}
std::vector<KvPageTable>& KvSequences::tables(SequenceId id) {
  return const_cast<std::vector<KvPageTable>&>(std::as_const(*this).tables(id));
}

std::vector<std::int64_t> KvSequences::pages_needed(SequenceId id, std::int64_t count) const {
  std::vector<std::int64_t> needed;
  for (const auto& table : tables(id)) needed.push_back(table.pages_for(count));
  return needed;
}

KvPoolStats KvSequences::stats(std::int64_t page_bytes) const {
  KvPoolStats stats;
  stats.page_bytes = page_bytes;
  for (const auto& g : groups_)
    stats.groups.push_back({g.window, static_cast<std::int64_t>(g.layers.size()), g.pool->capacity(), g.pool->used_pages()});
  return stats;
}

void KvSequences::check(const ForwardBatch& batch, const std::vector<std::int64_t>& table_rows) const {
  if (batch.slices.empty()) throw InputError(spec_.family + ": a batch needs at least one slice");
  std::vector<SequenceId> seen;
  int head_table = -1;
  for (const auto& slice : batch.slices) {
    if (!slice.step) throw std::logic_error(spec_.family + ": a slice without a step");
    if (std::find(seen.begin(), seen.end(), slice.sequence) != seen.end())
      throw InputError(fmt::format("{}: sequence {} appears twice in one batch", spec_.family, slice.sequence));
    seen.push_back(slice.sequence);
    const std::int64_t have = tokens(slice.sequence);
    if (slice.start != have)
      throw InputError(fmt::format("{}: sequence {} holds {} tokens, but its slice starts at {}", spec_.family,
                                   slice.sequence, have, slice.start));
    check_step(spec_, *slice.step, have, max_context_, table_rows);
    const int table = slice.step->outputs.head_table;
    if (table >= 0 && head_table >= 0 && table != head_table)
      throw InputError(fmt::format("{}: slices of one batch ask for different head tables", spec_.family));
    if (table >= 0) head_table = table;
  }
  // Every page the step takes, per group: all or nothing.
  std::vector<std::int64_t> needed(groups_.size(), 0);
  for (const auto& slice : batch.slices) {
    const auto n = static_cast<std::int64_t>(slice.step->ids.size());
    const auto& seq = tables(slice.sequence);
    for (std::size_t g = 0; g < groups_.size(); ++g) needed[g] += seq[g].pages_for(n);
  }
  for (std::size_t g = 0; g < groups_.size(); ++g)
    if (needed[g] > groups_[g].pool->free_pages())
      throw KvPoolExhausted(fmt::format("{}: the step needs {} KV pages{}, {} of {} are free", spec_.family, needed[g],
                                        groups_[g].window ? fmt::format(" (window {})", groups_[g].window) : "",
                                        groups_[g].pool->free_pages(), groups_[g].pool->capacity()));
}

void KvSequences::append(const ForwardBatch& batch, const std::function<void(std::size_t, const PageCopy&)>& copy) {
  for (const auto& slice : batch.slices) {
    auto& seq = tables(slice.sequence);
    const auto n = static_cast<std::int64_t>(slice.step->ids.size());
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const KvPageTable::Append appended = seq[g].append(n);
      if (!appended.ok) throw std::logic_error(spec_.family + ": KV pages ran out after the check");
      if (appended.copy) copy(g, *appended.copy);
    }
    auto& ids = held_.at(slice.sequence).ids;
    for (const std::int64_t id : slice.step->ids) ids.push_back(static_cast<std::int32_t>(id));
  }
}

}  // namespace zoo::layers
