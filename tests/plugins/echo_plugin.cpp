// A minimal valid plugin for the plugin-host tests. Model type "echo_lm": the model needs one
// tensor, `echo.weight` [vocab_size, hidden_size] F32, and its logits are the one-hot of each id.
// Config keys: vocab_size (required, > 0), hidden_size (default 4), and `delegate`: build the real
// model through Host::create_model(delegate, ...) and wrap it, as a plugin reusing another one would.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "zoo/error.hpp"
#include "zoo/plugin_abi.hpp"

namespace {

using namespace zoo;

class EchoModel;

class EchoSession : public Session {
 public:
  explicit EchoSession(const EchoModel& model) : model_(model) {}
  ForwardResult forward(const ForwardStep& step, DiagnosticHook* hook) override;
  std::int64_t position() const override { return position_; }
  void reset() override { position_ = 0; }

 private:
  const EchoModel& model_;
  std::int64_t position_ = 0;
};

class EchoModel : public Model {
 public:
  EchoModel(const ModelArgs& args, std::int64_t vocab, std::int64_t hidden)
      : weights_(args.weights), vocab_(vocab), hidden_(hidden) {}

  ModelInfo info() const override {
    return {"echo", "echo_lm", vocab_, hidden_, 0, fmt::format("echo model, vocab {}", vocab_)};
  }
  std::vector<TensorRequirement> requirements() const override {
    return {{"echo.weight", {vocab_, hidden_}, {DType::F32}, false}};
  }
  const WeightSource& weight_source() const override { return *weights_; }
  void load(const ProgressFn& progress) override {
    const TensorView view = weights_->view("echo.weight");
    if (view.dtype != DType::F32 || view.shape != Shape{vocab_, hidden_}) {
      throw ValidationError(fmt::format("echo.weight: expected F32 [{}, {}], got {} {}", vocab_, hidden_,
                                        dtype_name(view.dtype), shape_str(view.shape)));
    }
    table_ = HostTensor::copy_of(view);
    if (progress) progress(table_.nbytes(), table_.nbytes());
  }
  std::unique_ptr<Session> new_session() override {
    if (table_.empty()) throw ValidationError("echo: new_session() before load()");
    return std::make_unique<EchoSession>(*this);
  }

  std::int64_t vocab() const { return vocab_; }
  std::int64_t hidden() const { return hidden_; }
  const HostTensor& table() const { return table_; }

 private:
  std::shared_ptr<const WeightSource> weights_;
  std::int64_t vocab_;
  std::int64_t hidden_;
  HostTensor table_;
};

ForwardResult EchoSession::forward(const ForwardStep& step, DiagnosticHook* hook) {
  if (step.ids.empty()) throw InputError("echo: forward step without ids");
  if (!step.outputs.score_ids.empty()) throw InputError("echo: scoring given ids is not supported");
  const std::size_t first = step.outputs.all_positions ? 0 : step.ids.size() - 1;
  const auto rows = static_cast<std::int64_t>(step.ids.size() - first);
  ForwardResult result;
  if (step.outputs.logits) result.logits = HostTensor(DType::F32, {rows, model_.vocab()});
  if (step.outputs.hidden) result.hidden = HostTensor(DType::F32, {rows, model_.hidden()});
  for (std::size_t i = first; i < step.ids.size(); ++i) {
    const std::int64_t id = step.ids[i];
    if (id < 0 || id >= model_.vocab()) throw InputError(fmt::format("echo: id {} out of range", id));
    const auto row = static_cast<std::int64_t>(i - first);
    if (step.outputs.logits) result.logits.as<float>()[row * model_.vocab() + id] = 1.0f;
    if (step.outputs.hidden) {
      for (std::int64_t h = 0; h < model_.hidden(); ++h) {
        result.hidden.as<float>()[row * model_.hidden() + h] = model_.table().as<float>()[id * model_.hidden() + h];
      }
    }
  }
  if (hook != nullptr && hook->wants("logits") && !result.logits.empty()) hook->record("logits", result.logits.view());
  position_ += static_cast<std::int64_t>(step.ids.size());
  return result;
}

// Forwards everything to a model another plugin built; holding the shared_ptr keeps that plugin's
// library loaded for as long as this model lives.
class DelegatingModel : public Model {
 public:
  explicit DelegatingModel(std::shared_ptr<Model> inner) : inner_(std::move(inner)) {}
  ModelInfo info() const override {
    ModelInfo info = inner_->info();
    info.summary = "echo wrapping " + info.plugin;
    info.plugin = "echo";
    return info;
  }
  std::vector<TensorRequirement> requirements() const override { return inner_->requirements(); }
  const WeightSource& weight_source() const override { return inner_->weight_source(); }
  void load(const ProgressFn& progress) override { inner_->load(progress); }
  std::unique_ptr<Session> new_session() override { return inner_->new_session(); }

 private:
  std::shared_ptr<Model> inner_;
};

std::unique_ptr<Model> create(const ModelArgs& args, Host& host) {
  const nlohmann::json& config = args.config;
  if (config.contains("delegate")) {
    ModelArgs inner = args;
    inner.config.erase("delegate");
    host.log(LogLevel::Debug, fmt::format("echo: delegating to {}", config["delegate"].dump()));
    return std::make_unique<DelegatingModel>(host.create_model(config["delegate"].get<std::string>(), inner));
  }
  const std::int64_t vocab = config.value("vocab_size", std::int64_t{0});
  const std::int64_t hidden = config.value("hidden_size", std::int64_t{4});
  if (vocab <= 0 || hidden <= 0) {
    throw InputError(fmt::format("echo: config needs positive vocab_size and hidden_size, got {} and {}", vocab, hidden));
  }
  if (!args.weights) throw InputError("echo: no weight source given");
  return std::make_unique<EchoModel>(args, vocab, hidden);
}

const char* const kModelTypes[] = {"echo_lm", nullptr};
const char* const kArchitectures[] = {"EchoForCausalLM", nullptr};

const ZooPluginDescriptor* describe() {
  static const ZooPluginDescriptor descriptor{ZOO_PLUGIN_ABI_VERSION, "echo", "1.2.3", kModelTypes, kArchitectures};
  return &descriptor;
}

}  // namespace

ZOO_DEFINE_PLUGIN(describe, create)
