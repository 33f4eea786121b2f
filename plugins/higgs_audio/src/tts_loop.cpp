#include "tts_loop.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "delay_pattern.hpp"

namespace zoo::higgs {

DelayStateMachine::DelayStateMachine(std::int64_t num_codebooks, std::int64_t boc, std::int64_t eoc)
    : K_(num_codebooks), boc_(boc), eoc_(eoc) {
  if (K_ <= 0) throw std::invalid_argument("DelayStateMachine: num_codebooks must be positive");
}

bool DelayStateMachine::step(CodeRow& codes) {
  if (done_) throw std::logic_error("DelayStateMachine: step after the last row");
  if (static_cast<std::int64_t>(codes.size()) != K_)
    throw std::invalid_argument(fmt::format("DelayStateMachine: a row needs {} codes, got {}", K_, codes.size()));
  if (delay_ < K_) {
    // Codebook c starts c rows late: before that it holds BOC, whatever was drawn.
    for (std::int64_t c = delay_ + 1; c < K_; ++c) codes[c] = boc_;
    ++delay_;
  } else if (countdown_ >= 0) {
    if (--countdown_ <= 0) done_ = true;
  } else if (codes[0] == eoc_) {
    eoc_row_ = rows_;
    // Codebook c runs c rows behind codebook 0: the frame before the EOC (frame e-1) has its
    // last codebook in row e+K-2, so K-2 more rows complete it; e frames in all.
    if (K_ <= 2) done_ = true;
    else countdown_ = K_ - 2;
  }
  ++rows_;
  return done_;
}

TtsLoopResult run_tts_rows(const NextRow& next, const TtsLoopOptions& options,
                           const RowsFn& on_row) {
  const std::int64_t K = options.num_codebooks, V = options.codebook_size;
  if (K <= 0 || V < 3) throw std::invalid_argument("run_tts_loop: bad codebook shape");
  if (options.max_rows <= 0) throw std::invalid_argument("run_tts_loop: max_rows must be positive");
  DelayStateMachine machine(K, V - 2, V - 1);
  TtsLoopResult result;
  for (std::int64_t index = 0;; ++index) {
    CodeRow codes = next(result.rows.empty() ? nullptr : &result.rows.back(), index);
    if (static_cast<std::int64_t>(codes.size()) != K)
      throw std::logic_error(fmt::format("run_tts_loop: {} codes at row {}, want {}", codes.size(), index, K));
    for (auto code : codes)
      if (code < 0 || code >= V) throw std::logic_error(fmt::format("run_tts_loop: code {} outside [0, {})", code, V));
    const bool last = machine.step(codes);
    result.rows.push_back(codes);
    if (on_row) on_row(result.rows);
    if (last) {
      result.stop = TtsStop::EndOfCodes;
      break;
    }
    if (static_cast<std::int64_t>(result.rows.size()) >= options.max_rows) {
      result.stop = TtsStop::MaxRows;
      break;
    }
  }
  result.eoc_row = machine.eoc_row();
  return result;
}

TtsLoopResult run_tts_loop(std::vector<float> first_logits, AudioRowModel& model, const RowPicker& pick,
                           const TtsLoopOptions& options, const RowsFn& on_row) {
  const std::int64_t K = options.num_codebooks, V = options.codebook_size;
  std::vector<float> logits = std::move(first_logits);
  const NextRow next = [&](const CodeRow* previous, std::int64_t index) {
    if (previous != nullptr) logits = model.feed(*previous);
    if (static_cast<std::int64_t>(logits.size()) != K * V)
      throw std::logic_error(
          fmt::format("run_tts_loop: {} logits at row {}, want {} x {}", logits.size(), index, K, V));
    return pick(logits, index);
  };
  return run_tts_rows(next, options, on_row);
}

CodeRow codec_frame(const std::vector<CodeRow>& rows, std::int64_t t, std::int64_t num_codebooks, std::int64_t codes) {
  CodeRow frame(static_cast<std::size_t>(num_codebooks));
  for (std::int64_t c = 0; c < num_codebooks; ++c) {
    const std::int64_t code = rows.at(static_cast<std::size_t>(t + c)).at(static_cast<std::size_t>(c));
    frame[static_cast<std::size_t>(c)] = code >= codes ? 0 : code;
  }
  return frame;
}

std::vector<CodeRow> codec_frames(const std::vector<CodeRow>& rows, std::int64_t num_codebooks, std::int64_t codes) {
  auto frames = reverse_delay_pattern(rows, num_codebooks);
  for (auto& frame : frames)
    for (auto& code : frame)
      if (code >= codes) code = 0;
  return frames;
}

}  // namespace zoo::higgs
