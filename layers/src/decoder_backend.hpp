#pragma once
// What the decoder's Model delegates to: a CPU (float32) or CUDA (bf16) backend. Owned through a
// shared_ptr so each session keeps the backend (weights, device state) alive after the Model.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zoo/batch.hpp"
#include "zoo/layers/decoder.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

// A row table handed over by Model::add_row_table, read at load().
struct RowTableSource {
  std::string name;
  TensorView rows;  // [rows, hidden]
};

class DecoderBackend : public std::enable_shared_from_this<DecoderBackend> {
 public:
  virtual ~DecoderBackend() = default;
  virtual void load(const WeightSource& weights, const std::vector<RowTableSource>& tables,
                    const ProgressFn& progress) = 0;
  virtual std::unique_ptr<Session> new_session() = 0;
  // nullptr: the backend runs one sequence per session only.
  virtual std::unique_ptr<Runner> new_runner(const RunnerOptions&) { return nullptr; }
  virtual nlohmann::json runtime_stats() const { return nlohmann::json::object(); }
};

std::shared_ptr<DecoderBackend> make_cpu_backend(const DecoderSpec& spec, const ModelArgs& args);
std::shared_ptr<DecoderBackend> make_cuda_backend(const DecoderSpec& spec, const ModelArgs& args);

// The checks every forward step gets before any work, in both backends: at least one token, room
// in the KV cache, ids inside the vocabulary, embedding overrides and table rows that fit the step,
// `table_rows[i]` the row count of table i.
void check_step(const DecoderSpec& spec, const ForwardStep& step, std::int64_t position, std::int64_t max_context,
                const std::vector<std::int64_t>& table_rows);

}  // namespace zoo::layers
