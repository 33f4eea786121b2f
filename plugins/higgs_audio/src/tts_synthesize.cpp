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

CodeRow SessionRowSampler::next(ForwardStep step) {
  const std::int64_t K = shape_.num_codebooks;
  const std::vector<double> u = sampler_.uniforms(K);  // K per row, none when greedy, on either path
  step.outputs = OutputRequest{.hidden = false, .logits = true, .all_positions = false};
  if (on_device_) step.outputs.head_sample = sampler_.head_request(K, u);
  const ForwardResult out = session_.forward(step);
  if (!out.head_sampled.empty()) {
    if (static_cast<std::int64_t>(out.head_sampled.size()) != K)
      throw std::logic_error(
          fmt::format("higgs tts: the session picked {} codes, want {}", out.head_sampled.size(), K));
    ++device_rows_;
    return sampler_.accept(out.head_sampled);
  }
  return sampler_.sample_rows(audio_logits(out, shape_), K, u);
}

CodeRow SessionRowSampler::feed(const CodeRow& row) {
  return feed_row(row, shape_, [&](const ForwardStep& step) { return next(step); });
}

std::vector<float> SessionRowModel::feed(const CodeRow& row) {
  return feed_row(row, shape_, [&](const ForwardStep& step) {
    const ForwardResult out = session_.forward(step);
    const HostTensor* logits = out.find_extra("audio_logits");
    if (logits == nullptr) throw std::logic_error("higgs tts: the session returned no audio logits");
    return audio_logits(out, static_cast<std::size_t>(logits->numel()));
  });
}

SpeechResult synthesize_speech(Session& session, const TtsShape& shape, const SpeechRequest& request,
                               const SpeechProgressFn& progress, bool device_sampling, SynthesisStats* stats) {
  const std::int64_t K = shape.num_codebooks, V = shape.codebook_size;
  if (request.max_steps <= 0) throw InputError(fmt::format("max frames must be positive, got {}", request.max_steps));
  TtsSampler sampler({request.temperature, request.top_k, request.top_p, request.seed});

  const TtsPrompt built = build_tts_prompt({request.encode, request.token_id}, request.text, request.reference_text,
                                           request.reference_codes, K, V - 2, request.reference_label);
  const auto P = static_cast<std::int64_t>(built.ids.size());
  // Every row but the last is fed back: P + max_steps - 1 positions at most.
  if (P + request.max_steps - 1 > shape.max_context)
    throw InputError(fmt::format("the prompt ({} tokens) plus up to {} generated frames exceed the context of {} "
                                 "positions; lower the frame limit or raise the model's max_context",
                                 P, request.max_steps, shape.max_context));

  Prompt prompt;
  prompt.ids = built.ids;
  prompt.table = shape.table;
  prompt.table_positions = built.slot_positions;
  prompt.table_per_position = K;
  for (const CodeRow& row : built.slot_rows)
    for (std::int64_t c = 0; c < K; ++c) prompt.table_ids.push_back(row[c] + c * V);

  session.reset();
  SessionRowSampler picker(session, shape, sampler, device_sampling);
  const NextRow next = [&](const CodeRow* previous, std::int64_t) {
    return previous != nullptr ? picker.feed(*previous) : picker.next(prompt.step());
  };
  std::vector<CodeRow> fresh;  // the frames completed by the newest row, for streaming callers
  std::int64_t sent = 0;
  const auto on_row = [&](const std::vector<CodeRow>& rows) {
    if (!progress) return;
    const auto steps = static_cast<std::int64_t>(rows.size());
    const std::int64_t frames = std::max<std::int64_t>(0, steps - (K - 1));
    fresh.clear();
    for (; sent < frames; ++sent) fresh.push_back(codec_frame(rows, sent, K, V - 2));
    progress({steps, frames, static_cast<double>(frames) / shape.frames_per_second, fresh});
  };
  const TtsLoopResult loop =
      run_tts_rows(next, {.num_codebooks = K, .codebook_size = V, .max_rows = request.max_steps}, on_row);
  if (stats != nullptr) stats->device_rows = picker.device_rows();

  SpeechResult result;
  result.frames = codec_frames(loop.rows, K, V - 2);
  result.prompt_tokens = P;
  result.steps = static_cast<std::int64_t>(loop.rows.size());
  result.finished = loop.stop == TtsStop::EndOfCodes;
  result.frames_per_second = shape.frames_per_second;
  return result;
}

}  // namespace zoo::higgs
