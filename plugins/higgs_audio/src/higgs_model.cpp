// Higgs Audio v3 as a Zoo model: the text body is the qwen3 plugin's model, fed through an alias
// WeightSource over this checkpoint (nothing copied); this plugin adds audio-slot embeddings and the
// tied multi-codebook audio head.
#include <fmt/format.h>

#include <algorithm>

#include "codec.hpp"
#include "codec_encoder.hpp"
#include "delay_pattern.hpp"
#include "higgs_config.hpp"
#include "tts_synthesize.hpp"
#include "zoo/alias_weight_source.hpp"
#include "zoo/codec.hpp"
#include "zoo/error.hpp"
#include "zoo/kernels/cpu_ops.hpp"
#include "zoo/kernels/env.hpp"
#include "zoo/plugin_abi.hpp"
#include "zoo/row_tables.hpp"
#include "zoo/speech.hpp"

namespace zoo::higgs {
namespace {

namespace ops = zoo::kernels::cpu;

std::shared_ptr<const WeightSource> backbone_view(std::shared_ptr<const WeightSource> checkpoint) {
  return std::make_shared<AliasWeightSource>(
      std::move(checkpoint),
      std::vector<AliasRule>{AliasRule::exact("model.embed_tokens.weight", kTextEmbedding),
                             AliasRule::exact("model.norm.weight", kBodyNorm),
                             AliasRule::with_prefix("model.layers.", kBodyPrefix)});
}

// The audio table [K * V, H] is both the slot embedding (a slot is sum_c E[code_c + c * V]) and the
// tied head. It lives in the body model as a row table (its RowTables extension), on the body's device:
// slots are summed there and only the K x V head logits come back per step.
struct AudioTable {
  int index = -1;  // the body's row table
  std::int64_t K = 0, V = 0, H = 0;

  // The table rows of one slot: code_c + c * V for each codebook c.
  void slot_ids(const std::vector<std::int64_t>& codes, std::vector<std::int64_t>& out) const {
    for (std::int64_t c = 0; c < K; ++c) out.push_back(codes[c] + c * V);
  }
};

// The Higgs contract over the body's: a step's outputs become the body's (the audio table as a row
// table head, no text logits), and the body's results become audio logits [K, V] as extra
// "audio_logits" (or the K codes the body picked on its device). Sessions and runners share it.
class AudioHeadContract {
 public:
  explicit AudioHeadContract(const AudioTable& table) : table_(table) {}

  OutputRequest body_outputs(const OutputRequest& outputs, DiagnosticHook* hook) const {
    // There are no text logits to pick a token from (the audio codebooks are sampled by the TTS
    // loop): say so rather than return nothing.
    if (outputs.sample || !outputs.score_ids.empty())
      throw InputError("higgs_audio: cannot sample or score text tokens (OutputRequest::sample, score_ids): it "
                       "predicts audio codes; use `zoo tts`");
    if (outputs.all_positions && outputs.logits)
      throw InputError("higgs_audio: audio logits come for the last position only (OutputRequest::all_positions)");
    // A hook that taps the audio logits needs them on the host, and so does a trace without logits.
    const bool taps = hook && (hook->wants("audio_logits") || hook->wants("audio_argmax"));
    OutputRequest body{.hidden = outputs.hidden, .logits = false, .all_positions = false,
                       .head_table = outputs.logits || taps ? table_.index : -1};
    if (outputs.head_sample && outputs.logits && !taps) {
      if (outputs.head_sample->segments != table_.K)
        throw InputError(fmt::format("higgs_audio: head sampling picks one code per codebook: {} segments, want {}",
                                     outputs.head_sample->segments, table_.K));
      body.head_sample = outputs.head_sample;
    }
    return body;
  }

  ForwardResult result(ForwardResult body, const OutputRequest& outputs, DiagnosticHook* hook) const {
    ForwardResult result;
    if (outputs.hidden) result.hidden = std::move(body.hidden);
    if (!body.head_sampled.empty()) {
      result.head_sampled = std::move(body.head_sampled);
      return result;
    }
    const HostTensor* head = body.find_extra(kAudioTable);
    if (head == nullptr) {
      if (outputs.logits) throw std::logic_error("higgs_audio: the body returned no audio head output");
      return result;
    }
    if (head->numel() != table_.K * table_.V) throw std::logic_error("higgs_audio: the audio head output has the wrong size");
    HostTensor logits = HostTensor::from_f32({table_.K, table_.V}, {head->as<float>(), static_cast<std::size_t>(head->numel())});
    if (hook && hook->wants("audio_logits")) hook->record("audio_logits", logits.view());
    if (hook && hook->wants("audio_argmax")) {
      HostTensor argmax(DType::I64, {table_.K});
      for (std::int64_t c = 0; c < table_.K; ++c)
        argmax.as<std::int64_t>()[c] = ops::argmax({logits.as<float>() + c * table_.V, static_cast<std::size_t>(table_.V)});
      hook->record("audio_argmax", argmax.view());
    }
    if (outputs.logits) result.extra.emplace_back("audio_logits", std::move(logits));
    return result;
  }

 private:
  const AudioTable table_;
};

class HiggsSession : public Session {
 public:
  HiggsSession(std::unique_ptr<Session> body, const AudioTable& table) : body_(std::move(body)), contract_(table) {}

  std::int64_t position() const override { return body_->position(); }
  void reset() override { body_->reset(); }

  // Returns the audio logits [K, V] at the last position as extra "audio_logits"; text logits are
  // not produced (`logits` holds text logits only, see ForwardResult). With head_sample (segments
  // K: one code per codebook) a body that picks on its device returns head_sampled instead.
  ForwardResult forward(const ForwardStep& step, DiagnosticHook* hook) override {
    ForwardStep body_step = step;
    body_step.outputs = contract_.body_outputs(step.outputs, hook);
    return contract_.result(body_->forward(body_step, hook), step.outputs, hook);
  }

 private:
  std::unique_ptr<Session> body_;  // keeps the body model's state alive itself
  AudioHeadContract contract_;
};

// The body's batch runner under the same contract: many speech sequences per forward pass.
class HiggsRunner : public Runner {
 public:
  HiggsRunner(std::unique_ptr<Runner> body, const AudioTable& table) : body_(std::move(body)), contract_(table) {}

  SequenceId open_sequence() override { return body_->open_sequence(); }
  SequenceId fork_sequence(SequenceId sequence, std::int64_t tokens) override {
    return body_->fork_sequence(sequence, tokens);
  }
  void close_sequence(SequenceId sequence) override { body_->close_sequence(sequence); }
  std::int64_t tokens(SequenceId sequence) const override { return body_->tokens(sequence); }
  std::int64_t max_context() const override { return body_->max_context(); }
  std::vector<std::int64_t> pages_needed(SequenceId sequence, std::int64_t count) const override {
    return body_->pages_needed(sequence, count);
  }
  KvPoolStats pool() const override { return body_->pool(); }
  nlohmann::json stats() const override { return body_->stats(); }

  void submit(const ForwardBatch& batch, DiagnosticHook* hook) override {
    if (hook) throw InputError("higgs_audio: the batch runner records no taps (trace through a session)");
    std::vector<ForwardStep> steps;
    std::vector<OutputRequest> outputs;
    steps.reserve(batch.slices.size());
    for (const SequenceSlice& slice : batch.slices) {
      if (slice.step == nullptr) throw std::logic_error("higgs_audio: a slice without a step");
      steps.push_back(*slice.step);
      steps.back().outputs = contract_.body_outputs(slice.step->outputs, nullptr);
      outputs.push_back(slice.step->outputs);
    }
    ForwardBatch body_batch;
    for (std::size_t i = 0; i < batch.slices.size(); ++i)
      body_batch.slices.push_back({batch.slices[i].sequence, batch.slices[i].start, &steps[i]});
    body_->submit(body_batch);  // checks everything first: on a throw nothing here changed
    steps_ = std::move(steps);  // the body reads them until wait()
    outputs_ = std::move(outputs);
  }

  std::vector<ForwardResult> wait() override {
    std::vector<ForwardResult> body = body_->wait();
    std::vector<ForwardResult> results;
    results.reserve(body.size());
    for (std::size_t i = 0; i < body.size(); ++i) results.push_back(contract_.result(std::move(body[i]), outputs_[i], nullptr));
    steps_.clear();
    outputs_.clear();
    return results;
  }

 private:
  std::unique_ptr<Runner> body_;
  AudioHeadContract contract_;
  std::vector<ForwardStep> steps_;  // the submitted batch's body steps
  std::vector<OutputRequest> outputs_;
};

class HiggsModel : public Model, public Speech, public SpeechSteps, public zoo::Codec {
 public:
  HiggsModel(const ModelArgs& args, Host& host)
      : config_(HiggsConfig::parse(args.config, "higgs_audio config")), checkpoint_(args.weights),
        max_context_(args.max_context), device_(args.device) {
    if (!checkpoint_) throw InputError("higgs_audio: no weight source given");
    for (const auto& name : checkpoint_->names())
      if (name.starts_with(kUntiedHeadPrefix))
        throw InputError(fmt::format("{}: holds untied head tensor '{}'; only the tied audio head is supported",
                                     checkpoint_->describe(), name));
    weights_ = backbone_view(checkpoint_);
    ModelArgs body_args = args;
    body_args.config = config_.text_config;
    body_args.weights = weights_;
    body_ = host.create_model("qwen3", body_args);
    table_.K = config_.num_codebooks;
    table_.V = config_.codebook_size;
    table_.H = config_.hidden_size;
    table_bytes_ = static_cast<std::size_t>(table_.K * table_.V * table_.H) * (args.device.is_cpu() ? 4 : 2);
  }

  ModelInfo info() const override {
    auto body = body_->info();
    return {"higgs_audio", "higgs_multimodal_qwen3", body.vocab_size, body.hidden_size, body.num_layers,
            fmt::format("higgs audio v3: {} codebooks x {} codes, body {}", config_.num_codebooks,
                        config_.codebook_size, body.summary)};
  }

  std::vector<TensorRequirement> requirements() const override {
    auto reqs = body_->requirements();
    reqs.push_back({kAudioTable, {table_.K * table_.V, table_.H}, {DType::BF16, DType::F16, DType::F32}, false});
    return reqs;
  }

  const WeightSource& weight_source() const override { return *weights_; }

  void load(const ProgressFn& progress) override {
    table_.index = body_->need_extension<RowTables>().add_row_table(kAudioTable, weights_->view(kAudioTable));
    body_->load(progress);
  }

  std::unique_ptr<Session> new_session() override {
    return std::make_unique<HiggsSession>(body_->new_session(), table_);
  }

  std::vector<std::string> extra_trace_points() const override { return {"audio_logits", "audio_argmax"}; }
  std::string text_generation_unsupported() const override {
    return "it predicts audio codes, not text; for text-to-speech use `zoo tts`";
  }

  std::unique_ptr<Runner> new_runner(const RunnerOptions& options) override {
    if (table_.index < 0) throw std::logic_error("higgs_audio: new_runner() before load()");
    return std::make_unique<HiggsRunner>(body_->new_runner(options), table_);
  }

  SpeechResult synthesize(const SpeechRequest& request, const SpeechProgressFn& progress) override {
    auto session = new_session();
    return synthesize_speech(*session, tts_shape(), request, progress, device_sampling());
  }
  std::unique_ptr<SpeechSequence> start_speech(const SpeechRequest& request) override {
    return std::make_unique<HiggsSpeechSequence>(tts_shape(), request, device_sampling());
  }
  nlohmann::json runtime_stats() const override {
    auto stats = body_->runtime_stats();
    // A decode step also reads the whole audio table (the tied audio head).
    if (stats.contains("decode_weight_bytes") && stats["decode_weight_bytes"].is_number_unsigned())
      stats["decode_weight_bytes"] = stats["decode_weight_bytes"].get<std::size_t>() + table_bytes_;
    return stats;
  }
  Extension* find_extension(std::string_view name) override {
    if (name == Speech::kName) return static_cast<Speech*>(this);
    if (name == SpeechSteps::kName) return static_cast<SpeechSteps*>(this);
    if (name == zoo::Codec::kName) return static_cast<zoo::Codec*>(this);
    return nullptr;
  }

  // The codec decoder stored under kCodecPrefix, built on first use (fixtures without one still
  // serve the LM); it decodes on the model's device, in float32 whatever the model's dtype.
  CodeDecoder* code_decoder() override {
    if (!codec_)
      codec_ = make_code_decoder(weights_, kCodecPrefix, config_.num_codebooks, config_.codebook_size, device_);
    return codec_.get();
  }

  // The codec encoder stored under kCodecPrefix (voice cloning from audio), built on first use;
  // nullptr when the checkpoint holds no encoder. Encodes on the model's device in float32.
  CodeEncoder* code_encoder() override {
    if (!encoder_) {
      if (!has_code_encoder(*weights_, kCodecPrefix)) return nullptr;
      encoder_ = make_code_encoder(weights_, kCodecPrefix, config_.num_codebooks, config_.codebook_size, device_);
    }
    return encoder_.get();
  }

  // ZOO_TTS_HOST_SAMPLING=1: pick the codes on the host even where the device could (an A/B of
  // the device picks in one build; the codes are the same).
  static bool device_sampling() { return !kernels::env_flag("ZOO_TTS_HOST_SAMPLING", false); }

  TtsShape tts_shape() {
    if (table_.index < 0) throw std::logic_error("higgs_audio: speech before load()");
    TtsShape shape{table_.K, table_.V, table_.H, max_context_, table_.index};
    // Seconds of speech as the checkpoint's own codec makes them (a tiny test codec has other
    // strides than the released 24 kHz / 960); a checkpoint without a codec keeps the released rate.
    if (has_code_decoder(*weights_, kCodecPrefix)) {
      const CodeDecoder* codec = code_decoder();
      shape.frames_per_second = static_cast<double>(codec->sample_rate()) / static_cast<double>(codec->samples_per_frame());
    }
    return shape;
  }

  // input_ids equal to audio_token_id are audio slots, filled in order by the rows of audio_codes
  // (already in delay-pattern layout); each slot's embedding is sum_c E[code_c + c*V].
  Prompt prepare(const Request& request) const override {
    const std::string file = request.file.string();
    for (const auto& [key, value] : request.fields.items())
      if (key != "audio_codes") throw InputError(fmt::format("{}: unknown field '{}' (expected input_ids, audio_codes)", file, key));
    std::vector<std::vector<std::int64_t>> rows;
    if (request.fields.contains("audio_codes")) {
      const auto& codes = request.fields.at("audio_codes");
      if (!codes.is_array()) throw InputError(fmt::format("{}: audio_codes must be an array of rows", file));
      for (std::size_t r = 0; r < codes.size(); ++r) {
        const auto& row = codes[r];
        if (!row.is_array() || static_cast<std::int64_t>(row.size()) != table_.K)
          throw InputError(fmt::format("{}: audio_codes[{}] must be an array of {} codes (one per codebook)", file, r, table_.K));
        std::vector<std::int64_t> parsed;
        for (std::size_t c = 0; c < row.size(); ++c) {
          if (!row[c].is_number_integer())
            throw InputError(fmt::format("{}: audio_codes[{}][{}] is not an integer", file, r, c));
          const auto code = row[c].get<std::int64_t>();
          if (code < 0 || code >= table_.V)
            throw InputError(fmt::format("{}: audio_codes[{}][{}] = {} is outside [0, {})", file, r, c, code, table_.V));
          parsed.push_back(code);
        }
        rows.push_back(std::move(parsed));
      }
    }
    if (table_.index < 0) throw std::logic_error("higgs_audio: prepare() before load()");
    Prompt prompt;
    prompt.ids = request.input_ids;
    prompt.table = table_.index;
    prompt.table_per_position = table_.K;
    std::size_t next = 0;
    for (std::size_t t = 0; t < prompt.ids.size(); ++t) {
      if (prompt.ids[t] != config_.audio_token_id) continue;
      if (next >= rows.size())
        throw InputError(fmt::format("{}: input_ids has more audio slots (id {}) than audio_codes rows ({})", file,
                                     config_.audio_token_id, rows.size()));
      prompt.ids[t] = 0;  // any valid id: the table rows replace its embedding
      prompt.table_positions.push_back(static_cast<std::int64_t>(t));
      table_.slot_ids(rows[next++], prompt.table_ids);
    }
    if (next != rows.size())
      throw InputError(fmt::format("{}: {} audio_codes rows but only {} audio slots (id {}) in input_ids", file,
                                   rows.size(), next, config_.audio_token_id));
    return prompt;
  }

 private:
  HiggsConfig config_;
  std::shared_ptr<const WeightSource> checkpoint_;
  std::int64_t max_context_;
  Device device_;
  std::shared_ptr<const WeightSource> weights_;
  std::shared_ptr<Model> body_;
  AudioTable table_;
  std::size_t table_bytes_ = 0;  // as the body holds it
  std::unique_ptr<CodeDecoder> codec_;
  std::unique_ptr<CodeEncoder> encoder_;
};

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"higgs_multimodal_qwen3", nullptr};
  static const char* const architectures[] = {"HiggsMultimodalQwen3ForConditionalGeneration", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "higgs_audio", "0.1.0", model_types, architectures};
  return &d;
}

std::unique_ptr<Model> create(const ModelArgs& args, Host& host) { return std::make_unique<HiggsModel>(args, host); }

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)

}  // namespace zoo::higgs
