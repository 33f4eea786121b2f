// The Higgs TTS generation loop with forced logits (one finite entry per codebook, so every draw
// is certain whatever the sampling parameters): the first-party delay/EOC state machine, the
// length stop, what is fed back, reverse delay and cleanup before the codec.
#include <catch2/catch.hpp>

#include <limits>
#include <map>

#include "delay_pattern.hpp"
#include "tts_loop.hpp"
#include "tts_sampler.hpp"

namespace zoo::higgs {
namespace {

constexpr std::int64_t kCodes = 1024, kV = 1026, kBoc = 1024, kEoc = 1025;

// Logits [K * V] forcing `codes`: one finite entry per codebook row.
std::vector<float> forced(const CodeRow& codes) {
  std::vector<float> out(codes.size() * kV, -std::numeric_limits<float>::infinity());
  for (std::size_t c = 0; c < codes.size(); ++c) out[c * kV + static_cast<std::size_t>(codes[c])] = 1.5f;
  return out;
}

// A fake language model: step s's logits force script(s); records the rows fed back.
struct ScriptedModel : AudioRowModel {
  std::function<CodeRow(std::int64_t)> script;
  std::vector<CodeRow> fed;
  std::vector<float> feed(const CodeRow& row) override {
    fed.push_back(row);
    return forced(script(static_cast<std::int64_t>(fed.size())));
  }
};

struct Run {
  TtsLoopResult result;
  std::vector<CodeRow> fed;
};

// Runs the loop with the real sampler (recommended settings) over scripted forced logits.
Run run(std::int64_t K, std::int64_t max_rows, const std::function<CodeRow(std::int64_t)>& script) {
  ScriptedModel model;
  model.script = script;
  TtsSampler sampler({0.8f, 50, 0.95f, 1});
  const RowPicker pick = [&](std::span<const float> logits, std::int64_t) { return sampler.sample_rows(logits, K); };
  Run r;
  r.result = run_tts_loop(forced(script(0)), model, pick, {K, kV, max_rows});
  r.fed = model.fed;
  return r;
}

// Distinct ordinary codes: step s, codebook c.
CodeRow plain(std::int64_t K, std::int64_t s) {
  CodeRow row(static_cast<std::size_t>(K));
  for (std::int64_t c = 0; c < K; ++c) row[c] = (s * 37 + c * 101) % kCodes;
  return row;
}

// Plain codes, with EOC on codebook 0 at the given steps.
std::function<CodeRow(std::int64_t)> eoc_at(std::int64_t K, std::vector<std::int64_t> steps) {
  return [K, steps](std::int64_t s) {
    CodeRow row = plain(K, s);
    for (auto e : steps)
      if (s == e) row[0] = kEoc;
    return row;
  };
}

}  // namespace

TEST_CASE("tts loop: delay window forces BOC on the codebooks not started yet", "[higgs][tts]") {
  const Run r = run(8, 12, [](std::int64_t s) { return plain(8, s); });
  REQUIRE(r.result.rows.size() == 12);
  for (std::int64_t s = 0; s < 12; ++s)
    for (std::int64_t c = 0; c < 8; ++c) {
      INFO("row " << s << " codebook " << c);
      CHECK(r.result.rows[s][c] == (c > s ? kBoc : plain(8, s)[c]));
    }
  CHECK(r.result.stop == TtsStop::MaxRows);
}

TEST_CASE("tts loop: EOC on codebook 0 inside the delay window is ignored", "[higgs][tts]") {
  // Rows 0..7 all draw EOC on codebook 0 (row 7 is the last of the window): no countdown starts.
  const Run r = run(8, 30, eoc_at(8, {0, 1, 2, 3, 4, 5, 6, 7}));
  CHECK(r.result.stop == TtsStop::MaxRows);
  CHECK(r.result.rows.size() == 30);
  CHECK(r.result.eoc_row == -1);
  CHECK(r.result.rows[7][0] == kEoc);  // emitted and fed back as drawn: nothing is masked
  CHECK(r.fed[7][0] == kEoc);
}

TEST_CASE("tts loop: EOC on codebook 0 at row e >= 8 gives e frames", "[higgs][tts]") {
  for (std::int64_t e : {8, 9, 13, 40}) {
    INFO("EOC at row " << e);
    const Run r = run(8, 1000, eoc_at(8, {7, e}));
    CHECK(r.result.stop == TtsStop::EndOfCodes);
    CHECK(r.result.eoc_row == e);
    REQUIRE(static_cast<std::int64_t>(r.result.rows.size()) == e + 7);
    // The last row is emitted but not fed back; every other row is, exactly as emitted.
    REQUIRE(r.fed.size() == r.result.rows.size() - 1);
    for (std::size_t i = 0; i < r.fed.size(); ++i) CHECK(r.fed[i] == r.result.rows[i]);
    const auto frames = codec_frames(r.result.rows, 8, kCodes);
    CHECK(static_cast<std::int64_t>(frames.size()) == e);
    // Frames before the EOC are the codes drawn at rows t + c (the ignored EOC of row 7 -> 0).
    for (std::int64_t t = 0; t < e; ++t)
      for (std::int64_t c = 0; c < 8; ++c) CHECK(frames[t][c] == (t == 7 && c == 0 ? 0 : plain(8, t + c)[c]));
  }
}

TEST_CASE("tts loop: the wind-down ignores further EOCs and draws freely", "[higgs][tts]") {
  // EOC again on codebook 0 during the countdown, and EOC/BOC on other codebooks: still e + 7 rows.
  const Run r = run(8, 1000, [](std::int64_t s) {
    CodeRow row = plain(8, s);
    if (s >= 10) row[0] = kEoc;
    if (s == 12) row[3] = kBoc;
    if (s == 5) row[1] = kEoc;  // EOC on another codebook never stops
    return row;
  });
  CHECK(r.result.eoc_row == 10);
  CHECK(r.result.rows.size() == 17);
  CHECK(r.result.rows[12][3] == kBoc);
  const auto frames = codec_frames(r.result.rows, 8, kCodes);
  REQUIRE(frames.size() == 10);
  // Frame t, codebook c comes from row t + c.
  CHECK(frames[8][3] == plain(8, 11)[3]);
  CHECK(frames[9][3] == 0);  // BOC drawn at row 12 -> code 0
  CHECK(frames[4][1] == 0);  // EOC drawn at row 5 -> code 0
}

TEST_CASE("tts loop: length stop keeps the rows made, no audio under K rows", "[higgs][tts]") {
  const Run r = run(8, 20, [](std::int64_t s) { return plain(8, s); });
  CHECK(r.result.stop == TtsStop::MaxRows);
  CHECK(r.result.rows.size() == 20);
  CHECK(r.fed.size() == 19);
  CHECK(codec_frames(r.result.rows, 8, kCodes).size() == 13);
  const Run few = run(8, 7, [](std::int64_t s) { return plain(8, s); });
  CHECK(few.result.rows.size() == 7);
  CHECK(codec_frames(few.result.rows, 8, kCodes).empty());
  const Run one = run(8, 1, [](std::int64_t s) { return plain(8, s); });
  CHECK(one.result.rows.size() == 1);
  CHECK(one.fed.empty());
}

TEST_CASE("tts loop: other codebook counts follow the same arithmetic", "[higgs][tts]") {
  // K codebooks: window K rows, countdown K-2 (K <= 2: done on the EOC row itself).
  for (std::int64_t K : {1, 2, 3, 4}) {
    INFO("K " << K);
    const std::int64_t e = K + 3;
    const Run r = run(K, 1000, eoc_at(K, {K - 1, e}));
    CHECK(r.result.eoc_row == e);
    const std::int64_t rows = K <= 2 ? e + 1 : e + K - 1;
    CHECK(static_cast<std::int64_t>(r.result.rows.size()) == rows);
    CHECK(static_cast<std::int64_t>(codec_frames(r.result.rows, K, kCodes).size()) == rows - K + 1);
  }
}

TEST_CASE("tts loop: codes >= 1024 become 0 before the codec, others unchanged", "[higgs][tts]") {
  std::vector<CodeRow> rows;
  for (std::int64_t s = 0; s < 10; ++s) rows.push_back({s == 3 ? kBoc : s, s == 4 ? kEoc : 1023, 1000 + s});
  const auto frames = codec_frames(rows, 3, kCodes);
  REQUIRE(frames.size() == 8);
  for (std::int64_t t = 0; t < 8; ++t) {
    CHECK(frames[t][0] == (t == 3 ? 0 : t));
    CHECK(frames[t][1] == (t + 1 == 4 ? 0 : 1023));
    CHECK(frames[t][2] == (1000 + t + 2 >= kCodes ? 0 : 1000 + t + 2));
  }
}

TEST_CASE("tts loop: reverse delay inverts the delay pattern", "[higgs][tts]") {
  for (std::int64_t T = 1; T <= 50; ++T) {
    std::vector<CodeRow> codes;
    for (std::int64_t t = 0; t < T; ++t) codes.push_back(plain(8, t));
    const auto delayed = apply_delay_pattern(codes, 8, kBoc, kEoc);
    REQUIRE(static_cast<std::int64_t>(delayed.size()) == T + 7);
    CHECK(reverse_delay_pattern(delayed, 8) == codes);
  }
  CHECK(reverse_delay_pattern({}, 8).empty());
  CHECK_THROWS_AS(reverse_delay_pattern({{1, 2}}, 3), std::invalid_argument);
}

TEST_CASE("tts loop: state machine misuse is reported", "[higgs][tts]") {
  DelayStateMachine m(2, kBoc, kEoc);
  CodeRow wrong{1, 2, 3};
  CHECK_THROWS_AS(m.step(wrong), std::invalid_argument);
  CodeRow a{1, 2}, b{kEoc, 2}, c{kEoc, 2};
  CHECK_FALSE(m.step(a));
  CHECK_FALSE(m.step(b));  // row 1: still in the window of K = 2
  CHECK(m.step(c));        // row 2: EOC after the window, K <= 2: done now
  CHECK_THROWS_AS(m.step(a), std::logic_error);
}

}  // namespace zoo::higgs
