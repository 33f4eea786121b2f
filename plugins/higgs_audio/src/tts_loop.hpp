#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace zoo::higgs {

using CodeRow = std::vector<std::int64_t>;  // one code per codebook

// The first-party (sglang-omni) delay/EOC state machine of the multi-codebook loop, for K
// codebooks with begin/end-of-codes ids boc/eoc:
//  - delay window, the first K rows: row s forces codebooks s+1..K-1 to BOC; an EOC on codebook 0
//    is not looked at;
//  - after it, the first row whose codebook 0 is EOC starts a countdown of K-2 rows (K <= 2: done
//    at once); the row where it reaches 0 is the last row;
//  - nothing is masked: BOC/EOC may be drawn on any codebook and are fed back as drawn.
class DelayStateMachine {
 public:
  DelayStateMachine(std::int64_t num_codebooks, std::int64_t boc, std::int64_t eoc);
  // Applies one step to freshly drawn `codes` (in place) and returns true when this row is the
  // last one (it is still emitted, but not fed back).
  bool step(CodeRow& codes);
  bool done() const { return done_; }
  std::int64_t rows() const { return rows_; }
  // Row index whose codebook 0 EOC started the countdown, or -1.
  std::int64_t eoc_row() const { return eoc_row_; }

 private:
  std::int64_t K_, boc_, eoc_;
  std::int64_t delay_ = 0;
  std::int64_t countdown_ = -1;  // -1: not started
  std::int64_t rows_ = 0;
  std::int64_t eoc_row_ = -1;
  bool done_ = false;
};

// The language model side of the loop: logits [K * V] for the next row, given the last row.
class AudioRowModel {
 public:
  virtual ~AudioRowModel() = default;
  // Feeds `row` (as one position whose embedding is the sum of its K code embeddings) and returns
  // the audio logits [K * V] at that position.
  virtual std::vector<float> feed(const CodeRow& row) = 0;
};

// Picks the codes of row `index` from its logits [K * V] (a sampler, or a forced trace in tests).
using RowPicker = std::function<CodeRow(std::span<const float> logits, std::int64_t index)>;

enum class TtsStop { EndOfCodes, MaxRows };

struct TtsLoopResult {
  std::vector<CodeRow> rows;  // delayed layout, as generated
  TtsStop stop = TtsStop::MaxRows;
  std::int64_t eoc_row = -1;
};

struct TtsLoopOptions {
  std::int64_t num_codebooks = 0;
  std::int64_t codebook_size = 0;  // V: codes + BOC (V-2) + EOC (V-1)
  std::int64_t max_rows = 1024;    // delayed rows, as the reference's max_new_tokens
};

// The codes of row `index`: picked from the prompt's last position when `previous` is null (row
// 0), else after feeding `previous` back (a session picking on its device, or logits and a picker).
using NextRow = std::function<CodeRow(const CodeRow* previous, std::int64_t index)>;

// Sees the rows emitted so far, after each new one.
using RowsFn = std::function<void(const std::vector<CodeRow>& rows)>;

// The generation loop over rows from `next`: step the state machine, emit the row; stop when the
// machine is done or max_rows rows exist; otherwise feed the row back for the next one. `on_row`
// (optional) sees the rows emitted so far.
TtsLoopResult run_tts_rows(const NextRow& next, const TtsLoopOptions& options,
                           const RowsFn& on_row = {});

// The generation loop: pick a row from `first_logits` (the prompt's last position), step the
// state machine, emit the row; stop when the machine is done or max_rows rows exist; otherwise
// feed the row back and pick the next one from the logits that come back. `on_row` (optional)
// sees the rows emitted so far.
TtsLoopResult run_tts_loop(std::vector<float> first_logits, AudioRowModel& model, const RowPicker& pick,
                           const TtsLoopOptions& options, const RowsFn& on_row = {});

// Codec input from generated rows: reverse delay (raw[t][c] = rows[t + c][c], T = L - K + 1, none
// when L < K), then every value >= codes (BOC, EOC) replaced by 0, as the first-party vocoder
// scheduler does (not clipped, not truncated).
std::vector<CodeRow> codec_frames(const std::vector<CodeRow>& rows, std::int64_t num_codebooks, std::int64_t codes);
// Frame t of codec_frames(rows, ...), complete once rows t .. t + num_codebooks - 1 exist.
CodeRow codec_frame(const std::vector<CodeRow>& rows, std::int64_t t, std::int64_t num_codebooks, std::int64_t codes);

}  // namespace zoo::higgs
