// `zoo tts`: speech out of a model that owns a codes-to-waveform decoder (Model::code_decoder).
// `--text TEXT` runs the model's speech synthesis (Model::synthesize) and decodes its frames;
// `--codes FILE` decodes given code frames without running the language model: only the
// decoder's tensors are planned and read.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "commands.hpp"
#include "file_options.hpp"
#include "run_helpers.hpp"
#include "tts_text.hpp"
#include "zoo/code_frames.hpp"
#include "zoo/error.hpp"
#include "zoo/sound_file.hpp"

namespace zoo::cli {
namespace {

struct TtsOptions {
  ModelOptions model;
  TtsTextOptions text;
  std::string codes, out;
  bool quiet = false;
};

// The model's decoder (built from tensor headers; nothing read yet).
CodeDecoder& code_decoder_of(OpenedModel& opened) {
  CodeDecoder* decoder = opened.model->code_decoder();
  if (!decoder)
    throw InputError(fmt::format("{}: the {} plugin's model has no codes-to-waveform decoder", opened.spec.file.string(),
                                 opened.model->info().plugin));
  return *decoder;
}

// Checks the decoder's own load plan and reads its weights (not the rest of the model's).
void load_code_decoder(OpenedModel& opened, CodeDecoder& decoder) {
  const LoadPlan plan = make_load_plan(decoder.requirements(), opened.model->weight_source());
  if (!plan.ok())
    throw ValidationError(fmt::format("{}: the decoder's load plan has {} problem(s):\n{}", opened.spec.file.string(),
                                      plan.problem_count(), plan.table()));
  decoder.load();
}

// Called before the model is loaded: a long synthesis must not end in a name it cannot write.
void check_sound_name(const std::string& out) {
  if (!out.empty() && !sound_format_for(out))
    throw InputError(fmt::format("--out {}: unknown sound file extension '{}' (use .wav, .flac, .ogg, .opus or .mp3)",
                                 out, std::filesystem::path(out).extension().string()));
}

// Decodes `codes` and writes the sound file; returns its duration in seconds. Reports the decode time.
// The decoder's input errors (codes it cannot take, a decode too long for the memory) name `source`.
double decode_to_file(const CodeDecoder& decoder, const HostTensor& codes, const std::string& source,
                      const std::string& out, bool quiet) {
  const auto start = std::chrono::steady_clock::now();
  Waveform wave;
  try {
    wave = decoder.decode(codes.view());
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", source, e.what()));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_sound_file(out, wave.samples, wave.sample_rate);
  const double duration = static_cast<double>(wave.samples.size()) / wave.sample_rate;
  // The writer saturates past full scale, which is distortion nobody hears about otherwise; a NaN
  // is counted too (it cannot be written as what it is). Said even with --quiet: it is a fault in
  // the output, not progress.
  const auto clipped = std::count_if(wave.samples.begin(), wave.samples.end(),
                                     [](float x) { return !(std::fabs(x) <= 1.0f); });
  if (clipped > 0)
    fmt::print(stderr, "tts: warning: {} of {} samples were past full scale [-1, 1] and clipped -> {}\n", clipped,
               wave.samples.size(), out);
  if (!quiet) {
    fmt::print(stderr, "tts: decoder: {}\n", decoder.summary());
    fmt::print(stderr, "tts: {} frames -> {} samples ({:.2f} s at {} Hz) in {:.3f} s ({:.0f}x real time) -> {}\n",
               codes.shape()[0], wave.samples.size(), duration, wave.sample_rate, seconds,
               seconds > 0 ? duration / seconds : 0.0, out);
  }
  return duration;
}

int run_codes(const TtsOptions& options) {
  PluginRegistry registry;
  OpenedModel opened = open_from_options(options.model, registry);
  check_output("--out", options.out, opened, {{"code frames (--codes)", options.codes}});
  check_sound_name(options.out);
  CodeDecoder& decoder = code_decoder_of(opened);
  const HostTensor codes = load_code_frames(options.codes, decoder.num_codebooks());  // input errors first
  load_code_decoder(opened, decoder);
  decode_to_file(decoder, codes, options.codes, options.out, options.quiet);
  return 0;
}

// Text to frames through the language model, then (with --out) frames to a waveform.
int run_text(const TtsOptions& options) {
  if (options.out.empty() && options.text.codes_out.empty())
    throw InputError("tts: give --out (a sound file) and/or --codes-out (the generated code frames)");
  PluginRegistry registry;
  OpenedModel opened = open_from_options(options.model, registry);
  // The checkpoint's files (weights, config.json, tokenizer.json) are known only now.
  const std::vector<NamedPath> inputs = {{"code frames (--ref-codes)", options.text.ref_codes},
                                         {"tokenizer", tokenizer_file(opened)}};
  if (!options.out.empty()) check_output("--out", options.out, opened, inputs);
  if (!options.text.codes_out.empty()) check_output("--codes-out", options.text.codes_out, opened, inputs);
  check_sound_name(options.out);
  CodeDecoder* decoder = options.out.empty() ? nullptr : &code_decoder_of(opened);  // before the long part
  load_model(opened, !options.quiet);
  if (decoder) load_code_decoder(opened, *decoder);
  const auto start = std::chrono::steady_clock::now();
  const auto frames = synthesize_text(opened, options.text, options.quiet);
  if (!decoder) return 0;
  const auto K = static_cast<std::int64_t>(frames.empty() ? decoder->num_codebooks() : frames.front().size());
  HostTensor codes(DType::I64, {static_cast<std::int64_t>(frames.size()), K});
  for (std::size_t t = 0; t < frames.size(); ++t)
    std::copy(frames[t].begin(), frames[t].end(), codes.as<std::int64_t>() + static_cast<std::int64_t>(t) * K);
  if (frames.empty()) throw ValidationError("tts: the model produced no frames (raise --max-frames?)");
  const double duration = decode_to_file(*decoder, codes, "the generated codes", options.out, options.quiet);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!options.quiet)
    fmt::print(stderr, "tts: text to sound in {:.3f} s ({:.1f}x real time; loading not included)\n", seconds,
               seconds > 0 ? duration / seconds : 0.0);
  return 0;
}

}  // namespace

void add_tts_command(CLI::App& app, Action& run) {
  auto options = std::make_shared<TtsOptions>();
  auto* cmd = app.add_subcommand("tts", "Text to speech (--text), or code frames to a sound file (--codes)");
  add_model_options(*cmd, options->model);
  auto* text = add_tts_text_options(*cmd, options->text);
  auto* codes = input_file(cmd->add_option("--codes", options->codes,
                  "Code frames [T, codebooks] to decode without running the language model: JSON "
                  "({\"codes\": [[...], ...]} or a plain array) or safetensors (I64/I32 tensor \"codes\")"),
                           "a code frames file");
  text->excludes(codes);
  output_file(cmd->add_option("--out", options->out,
                              "Output sound file, in the format its extension names: .wav (16-bit PCM; also "
                              "without an extension), .flac, .ogg (Vorbis), .opus, .mp3"),
              "a sound file");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] {
    run = [options] {
      if (!options->text.text.empty()) return run_text(*options);
      if (options->codes.empty()) throw InputError("tts: give --text TEXT (speech from text) or --codes FILE (code frames to decode)");
      if (options->out.empty()) throw InputError("tts: --codes needs --out (the sound file to write)");
      return run_codes(*options);
    };
  });
}

}  // namespace zoo::cli
