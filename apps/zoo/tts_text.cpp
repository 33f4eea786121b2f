#include "tts_text.hpp"

#include "file_options.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "numeric_option.hpp"
#include "seed.hpp"
#include "zoo/error.hpp"
#include "zoo/speech.hpp"
#include "zoo/tokenizer.hpp"

namespace zoo::cli {

CLI::Option* add_tts_text_options(CLI::App& cmd, TtsTextOptions& o) {
  auto* text = not_a_file(cmd.add_option("--text", o.text, "Text to speak"));
  auto* ref_codes = input_file(cmd.add_option("--ref-codes", o.ref_codes,
                                              "Voice to clone: its codec frames [T, codebooks] (JSON, or .safetensors)"),
                               "a code frames file");
  auto* ref_audio = input_file(cmd.add_option("--ref-audio", o.ref_audio,
                                              "Voice to clone from a sound file (WAV, FLAC, ...; mono or downmixed, "
                                              "resampled to the codec's rate): encoded by the model's codec first"),
                               "a sound file");
  // Needs --ref-codes or --ref-audio: checked when the command runs (CLI11's needs is all-of).
  not_a_file(cmd.add_option("--ref-text", o.ref_text, "Transcript of the --ref-codes / --ref-audio voice"));
  ref_codes->needs(text);
  ref_audio->needs(text);
  ref_audio->excludes(ref_codes);
  // Defaults: the first-party recommended settings (sglang-omni cookbook).
  cmd.add_option("--temperature,--temp", o.temperature, "Sampling temperature; <= 1e-5 is greedy (default 0.8)")
      ->check(number_in(0.0, 100.0));
  cmd.add_option("--top-k", o.top_k, "Keep the k most likely codes, ties included; 0: off (default 50)")
      ->check(integer_in(0));
  cmd.add_option("--top-p", o.top_p, "Nucleus mass, the crossing code kept; 1: off (default 1)")
      ->check(number_in(0.0, 1.0));
  add_seed_option(cmd, o.seed, "Sampling seed; same seed, same codes (default, or -1: a random one, printed on stderr)");
  cmd.add_option("--max-frames", o.max_frames,
                 "Most decode steps (delayed frames; the speech has up to this minus (codebooks - 1) frames) (default 1024)")
      ->check(integer_in(1, 1LL << 20));
  // With --text or `zoo tts --encode`: checked when the command runs.
  output_file(cmd.add_option("--codes-out", o.codes_out,
                             "Also write the generated codes [T, codebooks] (JSON, or .safetensors); with --encode, "
                             "the encoded ones"),
              "a code frames file");
  return text;
}

std::filesystem::path tokenizer_file(const OpenedModel& opened) {
  const auto& ckpt = opened.spec.checkpoint;
  return (std::filesystem::is_directory(ckpt) ? ckpt : ckpt.parent_path()) / "tokenizer.json";
}

std::vector<std::vector<std::int64_t>> synthesize_text(
    OpenedModel& opened, const TtsTextOptions& o, bool quiet,
    const std::function<void(std::span<const std::vector<std::int64_t>>)>& on_frames) {
  const auto tok_path = tokenizer_file(opened);
  if (!std::filesystem::exists(tok_path))
    throw InputError(fmt::format("{}: missing; text to speech needs the checkpoint's tokenizer", tok_path.string()));
  const auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::from_file(tok_path));

  SpeechRequest request;
  request.text = o.text;
  request.reference_text = o.ref_text;
  if (!o.ref_frames.empty()) {
    request.reference_codes = o.ref_frames;
    request.reference_label = o.ref_audio;
  } else if (!o.ref_codes.empty()) {
    request.reference_codes = code_frames_rows(load_code_frames(o.ref_codes).view());
    request.reference_label = o.ref_codes;
  }
  request.encode = [tokenizer](std::string_view s) { return tokenizer->encode(s); };
  request.token_id = [tokenizer](std::string_view s) { return tokenizer->token_to_id(s); };
  request.temperature = o.temperature;
  request.top_k = o.top_k;
  request.top_p = o.top_p;
  // The model's rule: a temperature this small is greedy, which draws no numbers (no seed to report).
  const bool greedy = o.temperature <= 1e-5f;
  request.seed = greedy ? 0 : seed_or_random(o.seed);
  if (!quiet)
    fmt::print(stderr, "tts: {}\n",
               greedy ? std::string("greedy")
                      : fmt::format("temperature {}, top_k {}, top_p {}, seed {}", o.temperature, o.top_k, o.top_p,
                                    request.seed));
  request.max_steps = o.max_frames;

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto last = start;
  auto line = [&](const SpeechProgress& p, const char* end) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const double rtf = p.seconds > 0 ? elapsed / p.seconds : 0.0;
    fmt::print(stderr, "\rtts: {} frames, {:.2f} s of speech, {:.1f} s, real-time factor {:.3f}{}", p.frames,
               p.seconds, elapsed, rtf, end);
    std::fflush(stderr);
  };
  SpeechProgress latest;
  const SpeechProgressFn progress = [&](const SpeechProgress& p) {
    if (on_frames && !p.new_frames.empty()) on_frames(p.new_frames);
    latest = p;
    const auto now = Clock::now();
    if (quiet || now - last < std::chrono::milliseconds(250)) return;
    last = now;
    line(p, "");
  };
  const SpeechResult result = opened.model->need_extension<Speech>().synthesize(request, progress);
  if (!quiet) {
    line(latest, "\n");
    fmt::print(stderr, "tts: prompt {} tokens, {} decode steps, {}\n", result.prompt_tokens, result.steps,
               result.finished ? "ended by the model" : fmt::format("stopped at --max-frames {}", o.max_frames));
  }
  if (result.frames.empty())
    throw InputError(fmt::format("no complete frame in {} decode steps; raise --max-frames", result.steps));
  if (!o.codes_out.empty()) write_code_frames(o.codes_out, code_frames_tensor(result.frames).view());
  return result.frames;
}

}  // namespace zoo::cli
