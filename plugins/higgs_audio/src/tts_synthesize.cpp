#include "tts_synthesize.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tts_prompt.hpp"
#include "tts_sampler.hpp"
#include "zoo/error.hpp"

namespace zoo::higgs {
namespace {

// The session returns its audio logits as the extra output "audio_logits" ([K, V]).
std::vector<float> audio_logits(const ForwardResult& out, std::size_t want) {
  const HostTensor* logits = out.find_extra("audio_logits");
  if (logits == nullptr || logits->numel() != static_cast<std::int64_t>(want))
    throw std::logic_error("higgs tts: the session returned no audio logits of the expected size");
  const float* p = logits->as<float>();
  return {p, p + want};
}

std::vector<float> audio_logits(const ForwardResult& out, const TtsShape& shape) {
  return audio_logits(out, static_cast<std::size_t>(shape.num_codebooks * shape.codebook_size));
}

// Feeds `row` back as one position whose embedding is the sum of its K code rows of the table.
template <class Run>
auto feed_row(const CodeRow& row, const TtsShape& shape, Run&& run) {
  const std::int64_t id = 0;  // replaced by the table rows below
  const std::int64_t position = 0;
  std::vector<std::int64_t> ids;
  for (std::int64_t c = 0; c < shape.num_codebooks; ++c) ids.push_back(row[c] + c * shape.codebook_size);
  return run(ForwardStep{std::span<const std::int64_t>(&id, 1), {}, {},
                         OutputRequest{.hidden = false, .logits = true, .all_positions = false},
                         TableRows{shape.table, std::span<const std::int64_t>(&position, 1), ids,
                                   shape.num_codebooks}});
}

}  // namespace

std::vector<float> SessionRowModel::feed(const CodeRow& row) {
  return feed_row(row, shape_, [&](const ForwardStep& step) {
    const ForwardResult out = session_.forward(step);
    const HostTensor* logits = out.find_extra("audio_logits");
    if (logits == nullptr) throw std::logic_error("higgs tts: the session returned no audio logits");
    return audio_logits(out, static_cast<std::size_t>(logits->numel()));
  });
}

HiggsSpeechSequence::HiggsSpeechSequence(const TtsShape& shape, const SpeechRequest& request, bool device_sampling)
    : shape_(shape), sampler_({request.temperature, request.top_k, request.top_p, request.seed}),
      machine_(shape.num_codebooks, shape.codebook_size - 2, shape.codebook_size - 1),
      device_sampling_(device_sampling) {
  const std::int64_t K = shape.num_codebooks, V = shape.codebook_size;
  if (K <= 0 || V < 3) throw std::invalid_argument("higgs tts: bad codebook shape");
  if (request.max_steps <= 0) throw InputError(fmt::format("max frames must be positive, got {}", request.max_steps));
  prompt_ = build_tts_prompt({request.encode, request.token_id}, request.text, request.reference_text,
                             request.reference_codes, K, V - 2, request.reference_label);
  P_ = static_cast<std::int64_t>(prompt_.ids.size());
  max_steps_ = request.max_steps;
  // Every row but the last is fed back: P + max_steps - 1 positions at most.
  if (P_ + max_steps_ - 1 > shape.max_context)
    throw InputError(fmt::format("the prompt ({} tokens) plus up to {} generated frames exceed the context of {} "
                                 "positions; lower the frame limit or raise the model's max_context",
                                 P_, max_steps_, shape.max_context));
}

std::int64_t HiggsSpeechSequence::known() const {
  const auto rows = static_cast<std::int64_t>(rows_.size());
  return P_ + (done_ ? rows - 1 : rows);
}

ForwardStep HiggsSpeechSequence::step(std::int64_t begin, std::int64_t end) {
  if (done_) throw std::logic_error("higgs tts: step() after the last row");
  if (begin < 0 || begin >= end || end > known())
    throw std::logic_error(fmt::format("higgs tts: step over [{}, {}) of {} known positions", begin, end, known()));
  const std::int64_t K = shape_.num_codebooks, V = shape_.codebook_size;
  ids_.clear();
  table_positions_.clear();
  table_ids_.clear();
  const auto add_row = [&](std::int64_t t, const CodeRow& row) {
    table_positions_.push_back(t - begin);
    for (std::int64_t c = 0; c < K; ++c) table_ids_.push_back(row[static_cast<std::size_t>(c)] + c * V);
  };
  // Prompt slots ascend: the ones inside [begin, end) are a run of them.
  const auto& slots = prompt_.slot_positions;
  for (auto it = std::lower_bound(slots.begin(), slots.end(), begin); it != slots.end() && *it < end; ++it)
    add_row(*it, prompt_.slot_rows[static_cast<std::size_t>(it - slots.begin())]);
  for (std::int64_t t = begin; t < end; ++t) {
    ids_.push_back(t < P_ ? prompt_.ids[static_cast<std::size_t>(t)] : 0);  // a fed-back row's id is replaced
    if (t >= P_) add_row(t, rows_[static_cast<std::size_t>(t - P_)]);
  }
  ForwardStep step{ids_, {}, {}, OutputRequest{.hidden = false, .logits = false, .all_positions = false},
                   TableRows{shape_.table, table_positions_, table_ids_, K}};
  if (end == known()) {
    // The next row's uniforms, drawn once (K per row, none when greedy) whichever side picks.
    const auto row = static_cast<std::int64_t>(rows_.size());
    if (u_row_ != row) {
      u_ = sampler_.uniforms(K);
      u_row_ = row;
    }
    step.outputs.logits = true;
    if (device_sampling_) step.outputs.head_sample = sampler_.head_request(K, u_);
  }
  return step;
}

bool HiggsSpeechSequence::accept(const ForwardResult& out) {
  const std::int64_t K = shape_.num_codebooks;
  if (done_) throw std::logic_error("higgs tts: accept() after the last row");
  if (u_row_ != static_cast<std::int64_t>(rows_.size()))
    throw std::logic_error("higgs tts: accept() without a step that ends at the newest position");
  CodeRow codes;
  if (!out.head_sampled.empty()) {
    if (static_cast<std::int64_t>(out.head_sampled.size()) != K)
      throw std::logic_error(fmt::format("higgs tts: the device picked {} codes, want {}", out.head_sampled.size(), K));
    ++device_rows_;
    codes = sampler_.accept(out.head_sampled);
  } else {
    codes = sampler_.sample_rows(audio_logits(out, shape_), K, u_);
  }
  u_row_ = -1;
  const bool last = machine_.step(codes);
  rows_.push_back(std::move(codes));
  finished_ = last;
  done_ = last || static_cast<std::int64_t>(rows_.size()) >= max_steps_;
  return done_;
}

SpeechProgress HiggsSpeechSequence::progress() {
  const std::int64_t K = shape_.num_codebooks;
  const auto steps = static_cast<std::int64_t>(rows_.size());
  const std::int64_t frames = std::max<std::int64_t>(0, steps - (K - 1));
  fresh_.clear();
  for (; sent_ < frames; ++sent_) fresh_.push_back(codec_frame(rows_, sent_, K, shape_.codebook_size - 2));
  return {steps, frames, static_cast<double>(frames) / shape_.frames_per_second, fresh_};
}

SpeechResult HiggsSpeechSequence::result() const {
  SpeechResult result;
  result.frames = codec_frames(rows_, shape_.num_codebooks, shape_.codebook_size - 2);
  result.prompt_tokens = P_;
  result.steps = static_cast<std::int64_t>(rows_.size());
  result.finished = finished_;
  result.frames_per_second = shape_.frames_per_second;
  return result;
}

SpeechResult synthesize_speech(Session& session, const TtsShape& shape, const SpeechRequest& request,
                               const SpeechProgressFn& progress, bool device_sampling, SynthesisStats* stats) {
  HiggsSpeechSequence sequence(shape, request, device_sampling);
  session.reset();
  for (std::int64_t begin = 0;;) {
    const std::int64_t end = sequence.known();
    const bool done = sequence.accept(session.forward(sequence.step(begin, end)));
    begin = end;
    if (progress) progress(sequence.progress());
    if (done) break;
  }
  if (stats != nullptr) stats->device_rows = sequence.device_rows();
  return sequence.result();
}

}  // namespace zoo::higgs
