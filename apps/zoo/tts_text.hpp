#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "commands.hpp"
#include "zoo/code_frames.hpp"
#include "zoo/runtime.hpp"

namespace zoo::cli {

// The text side of `zoo tts`: text (and an optional reference voice as codes) to codec frames
// through Model::synthesize, with the model's tokenizer.json.
struct TtsTextOptions {
  std::string text;
  std::string ref_text;
  std::string ref_codes;
  std::string ref_audio;  // a sound file to encode into the reference codes (cmd_tts does it)
  std::string codes_out;
  // The reference frames encoded from ref_audio (used instead of reading ref_codes when set).
  std::vector<std::vector<std::int64_t>> ref_frames;
  float temperature = 0.8f;
  int top_k = 50;
  float top_p = 1.0f;
  std::optional<std::uint64_t> seed;  // unset: a fresh one each run
  long long max_frames = 1024;
};

// Adds --text, --ref-text, --ref-codes, --ref-audio, --temperature, --top-k, --top-p, --seed, --max-frames and
// --codes-out to `command`; returns the --text option (for excludes/needs with other modes).
CLI::Option* add_tts_text_options(CLI::App& command, TtsTextOptions& options);

// The tokenizer.json that belongs to a checkpoint (beside its files).
std::filesystem::path tokenizer_file(const OpenedModel& opened);

// Synthesizes options.text with the loaded model, reporting progress on stderr unless quiet
// (frames, seconds of speech, real-time factor), writes --codes-out when given, and returns the
// frames [T, codebooks] for the codec.
// `on_frames` (optional) gets the frames as the model completes them (for decoding while it runs).
std::vector<std::vector<std::int64_t>> synthesize_text(
    OpenedModel& opened, const TtsTextOptions& options, bool quiet,
    const std::function<void(std::span<const std::vector<std::int64_t>>)>& on_frames = {});

}  // namespace zoo::cli
