// A complete, deliberately tiny Zoo model plugin: a bigram language model. Its only weight is a
// table `bigram.logits` [vocab, vocab]; the logits after token t are row t of that table.
//
// It shows every piece a real plugin has: the descriptor, the factory, requirements declared before
// anything is read, loading through the WeightSource, sessions with a position, and the outputs a
// ForwardStep asks for. See docs/plugins.md in the Zoo sources.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <zoo/error.hpp>
#include <zoo/plugin_abi.hpp>

#ifndef BIGRAM_PLUGIN_VERSION
#define BIGRAM_PLUGIN_VERSION "0.0.0"
#endif

namespace bigram {
namespace {

constexpr const char* kTable = "bigram.logits";

class BigramModel;

class BigramSession : public zoo::Session {
 public:
  explicit BigramSession(const BigramModel& model) : model_(model) {}
  zoo::ForwardResult forward(const zoo::ForwardStep& step, zoo::DiagnosticHook* hook) override;
  std::int64_t position() const override { return position_; }
  void reset() override { position_ = 0; }

 private:
  const BigramModel& model_;
  std::int64_t position_ = 0;
};

class BigramModel : public zoo::Model {
 public:
  BigramModel(const zoo::ModelArgs& args, std::int64_t vocab) : args_(args), vocab_(vocab) {}

  zoo::ModelInfo info() const override {
    return {"bigram", "bigram_lm", vocab_, vocab_, 0, fmt::format("bigram LM, vocab {}", vocab_)};
  }
  std::vector<zoo::TensorRequirement> requirements() const override {
    return {{kTable, {vocab_, vocab_}, {zoo::DType::F32, zoo::DType::BF16, zoo::DType::F16}, false}};
  }
  const zoo::WeightSource& weight_source() const override { return *args_.weights; }

  void load(const zoo::ProgressFn& progress) override {
    const zoo::TensorView view = args_.weights->view(kTable);
    if (view.shape != zoo::Shape{vocab_, vocab_}) {
      throw zoo::ValidationError(
          fmt::format("{}: expected [{}, {}], found {}", kTable, vocab_, vocab_, zoo::shape_str(view.shape)));
    }
    table_ = zoo::to_f32_tensor(view);  // computes in float32 whatever the checkpoint stores
    if (progress) progress(view.nbytes(), view.nbytes());
  }

  std::unique_ptr<zoo::Session> new_session() override {
    if (table_.empty()) throw zoo::ValidationError("bigram: new_session() called before load()");
    return std::make_unique<BigramSession>(*this);
  }

  std::int64_t vocab() const { return vocab_; }
  const float* row(std::int64_t id) const { return table_.as<float>() + id * vocab_; }

 private:
  zoo::ModelArgs args_;
  std::int64_t vocab_;
  zoo::HostTensor table_;
};

zoo::ForwardResult BigramSession::forward(const zoo::ForwardStep& step, zoo::DiagnosticHook* hook) {
  const std::int64_t vocab = model_.vocab();
  if (step.ids.empty()) throw zoo::InputError("bigram: a forward step needs at least one id");
  if (!step.override_positions.empty()) throw zoo::InputError("bigram: embedding overrides are not supported");
  if (!step.outputs.score_ids.empty()) throw zoo::InputError("bigram: scoring given ids is not supported");
  for (const std::int64_t id : step.ids) {
    if (id < 0 || id >= vocab) throw zoo::InputError(fmt::format("bigram: token id {} outside [0, {})", id, vocab));
  }
  const std::size_t first = step.outputs.all_positions ? 0 : step.ids.size() - 1;
  const auto rows = static_cast<std::int64_t>(step.ids.size() - first);

  zoo::ForwardResult result;
  if (step.outputs.logits) result.logits = zoo::HostTensor(zoo::DType::F32, {rows, vocab});
  // The "hidden state" of a bigram model is the identity of the current token.
  if (step.outputs.hidden) result.hidden = zoo::HostTensor(zoo::DType::F32, {rows, vocab});
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t id = step.ids[first + static_cast<std::size_t>(r)];
    if (step.outputs.logits) std::copy_n(model_.row(id), vocab, result.logits.as<float>() + r * vocab);
    if (step.outputs.hidden) result.hidden.as<float>()[r * vocab + id] = 1.0f;
  }
  // Tap points cost nothing unless a hook asks for them.
  if (hook != nullptr && step.outputs.logits && hook->wants("logits")) hook->record("logits", result.logits.view());
  position_ += static_cast<std::int64_t>(step.ids.size());
  return result;
}

std::unique_ptr<zoo::Model> create(const zoo::ModelArgs& args, zoo::Host& host) {
  const auto vocab = args.config.value("vocab_size", std::int64_t{0});
  if (vocab <= 0) throw zoo::InputError("bigram: config.json needs a positive \"vocab_size\"");
  if (!args.weights) throw zoo::InputError("bigram: no weights given");
  if (!args.device.is_cpu()) {
    throw zoo::InputError(fmt::format("bigram: runs on cpu only, not {}", args.device.str()));
  }
  host.log(zoo::LogLevel::Debug, fmt::format("bigram: vocab {} from {}", vocab, args.weights->describe()));
  return std::make_unique<BigramModel>(args, vocab);
}

// Plain C data: the host reads it before it touches anything C++ in this library.
const char* const kModelTypes[] = {"bigram_lm", nullptr};
const char* const kArchitectures[] = {"BigramForCausalLM", nullptr};

const ZooPluginDescriptor* describe() {
  static const ZooPluginDescriptor descriptor{ZOO_PLUGIN_ABI_VERSION, "bigram", BIGRAM_PLUGIN_VERSION, kModelTypes,
                                              kArchitectures};
  return &descriptor;
}

}  // namespace
}  // namespace bigram

ZOO_DEFINE_PLUGIN(bigram::describe, bigram::create)
