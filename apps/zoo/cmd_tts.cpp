// `zoo tts`: speech out of a model that owns a codes-to-waveform decoder (the Codec extension).
// `--text TEXT` runs the model's speech synthesis (the Speech extension) and decodes its frames;
// `--codes FILE` decodes given code frames without running the language model: only the
// decoder's tensors are planned and read. `--encode FILE` is the other way (the Codec extension):
// a sound file to code frames, only the encoder's tensors read; `--ref-audio FILE` with --text
// encodes the reference voice the same way before synthesizing.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <limits>
#include <memory>

#include "commands.hpp"
#include "file_options.hpp"
#include "run_helpers.hpp"
#include "sound_encoding.hpp"
#include "tts_text.hpp"
#include "zoo/codec.hpp"
#include "zoo/code_frames.hpp"
#include "zoo/code_stream.hpp"
#include "zoo/error.hpp"
#include "zoo/sound_file.hpp"

namespace zoo::cli {
namespace {

struct TtsOptions {
  ModelOptions model;
  TtsTextOptions text;
  std::string codes, encode, out;
  bool stream = false;
  bool quiet = false;
};

// `--stream`: the waveform goes to stdout as raw 16-bit PCM, each chunk as soon as it is decoded.
// A terminal would show binary noise: refused before anything loads.
void check_stream_target() {
  if (isatty(STDOUT_FILENO) != 0)
    throw InputError("--stream writes raw 16-bit PCM to stdout, which is a terminal here: redirect it to a file or "
                     "pipe it to a player (e.g. | aplay -f S16_LE -r 24000 -c 1)");
}

// Streams the frames `feed` pushes into a CodeStream whose chunks go to stdout as 16-bit
// little-endian PCM, then the rest, and reports what went out.
void stream_to_stdout(const CodeDecoder& decoder, const std::function<void(CodeStream&)>& feed, bool quiet) {
  const auto start = std::chrono::steady_clock::now();
  CodeStream stream(decoder, [](std::span<const float> samples) {
    const std::vector<unsigned char> bytes = pcm16_le(samples);
    if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
      throw InputError("--stream: writing to stdout failed (a closed pipe?)");
  });
  feed(stream);
  stream.finish();
  if (quiet) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double duration =
      static_cast<double>(stream.frames_decoded() * decoder.samples_per_frame()) / decoder.sample_rate();
  fmt::print(stderr, "tts: streamed {} frames ({:.2f} s of 16-bit PCM, mono, {} Hz) to stdout in {} chunks in {:.3f} s; "
             "the first chunk went out when {} frames existed ({} frames of context each side)\n",
             stream.frames_decoded(), duration, decoder.sample_rate(), stream.chunks_decoded(), seconds,
             stream.frames_at_first_chunk(), decoder.context_frames());
}

// Encodes `samples` (from `name`) into code frames, reporting time and the closest call.
EncodedFrames encode_sound(const CodeEncoder& encoder, const std::vector<float>& samples, const std::string& name,
                          bool quiet) {
  const auto start = std::chrono::steady_clock::now();
  EncodedFrames encoded = encoder.encode(samples, name);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!quiet) {
    const double duration = static_cast<double>(samples.size()) / encoder.sample_rate();
    float margin = std::numeric_limits<float>::infinity();
    for (const float m : encoded.margins) margin = std::min(margin, m);
    fmt::print(stderr, "tts: encoder: {}\n", encoder.summary());
    fmt::print(stderr, "tts: {:.2f} s of sound -> {} frames in {:.3f} s ({:.0f}x real time); smallest code margin {:.4g}\n",
               duration, encoded.frames, seconds, seconds > 0 ? duration / seconds : 0.0, margin);
  }
  return encoded;
}

std::vector<std::vector<std::int64_t>> frame_rows(const EncodedFrames& encoded) {
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(encoded.frames));
  for (std::int64_t t = 0; t < encoded.frames; ++t)
    rows[static_cast<std::size_t>(t)].assign(encoded.codes.begin() + t * encoded.num_codebooks,
                                             encoded.codes.begin() + (t + 1) * encoded.num_codebooks);
  return rows;
}

int run_encode(const TtsOptions& options) {
  if (options.text.codes_out.empty()) throw InputError("tts: --encode needs --codes-out (the code frames file to write)");
  PluginRegistry registry;
  OpenedModel opened = open_from_options(options.model, registry);
  check_output("--codes-out", options.text.codes_out, opened, {{"a sound file (--encode)", options.encode}});
  CodeEncoder& encoder = code_encoder_of(opened);
  const std::vector<float> samples = read_reference_sound("tts", "--encode", options.encode, encoder, options.quiet);
  load_code_encoder(opened, encoder);
  const EncodedFrames encoded = encode_sound(encoder, samples, "--encode " + options.encode, options.quiet);
  write_code_frames(options.text.codes_out, code_frames_tensor(frame_rows(encoded)).view());
  if (!options.quiet) fmt::print(stderr, "tts: codes [{}, {}] -> {}\n", encoded.frames, encoded.num_codebooks, options.text.codes_out);
  return 0;
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
  if (options.stream) check_stream_target();
  load_code_decoder(opened, decoder);
  if (!options.stream) {
    decode_to_file(decoder, codes, options.codes, options.out, options.quiet);
    return 0;
  }
  try {
    const auto rows = code_frames_rows(codes.view());
    stream_to_stdout(decoder, [&](CodeStream& stream) { stream.push(rows); }, options.quiet);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", options.codes, e.what()));
  }
  return 0;
}

// Text to frames through the language model, then (with --out) frames to a waveform.
int run_text(const TtsOptions& options) {
  if (options.out.empty() && !options.stream && options.text.codes_out.empty())
    throw InputError("tts: give --out (a sound file) or --stream, and/or --codes-out (the generated code frames)");
  if (!options.text.ref_text.empty() && options.text.ref_codes.empty() && options.text.ref_audio.empty())
    throw InputError("tts: --ref-text needs --ref-codes or --ref-audio (the voice it transcribes)");
  PluginRegistry registry;
  OpenedModel opened = open_from_options(options.model, registry);
  // The checkpoint's files (weights, config.json, tokenizer.json) are known only now.
  const std::vector<NamedPath> inputs = {{"code frames (--ref-codes)", options.text.ref_codes},
                                         {"a sound file (--ref-audio)", options.text.ref_audio},
                                         {"tokenizer", tokenizer_file(opened)}};
  if (!options.out.empty()) check_output("--out", options.out, opened, inputs);
  if (!options.text.codes_out.empty()) check_output("--codes-out", options.text.codes_out, opened, inputs);
  check_sound_name(options.out);
  // Before the long part:
  CodeDecoder* decoder = options.out.empty() && !options.stream ? nullptr : &code_decoder_of(opened);
  if (options.stream) check_stream_target();
  TtsTextOptions text = options.text;
  CodeEncoder* encoder = nullptr;
  std::vector<float> reference;
  if (!text.ref_audio.empty()) {  // the reference is read and checked before the long part too
    encoder = &code_encoder_of(opened);
    reference = read_reference_sound("tts", "--ref-audio", text.ref_audio, *encoder, options.quiet);
  }
  load_model(opened, !options.quiet);
  if (decoder) load_code_decoder(opened, *decoder);
  if (encoder) {
    load_code_encoder(opened, *encoder);
    text.ref_frames = frame_rows(encode_sound(*encoder, reference, "--ref-audio " + text.ref_audio, options.quiet));
  }
  const auto start = std::chrono::steady_clock::now();
  if (options.stream) {  // the codec decodes while the model generates
    stream_to_stdout(
        *decoder,
        [&](CodeStream& stream) {
          synthesize_text(opened, text, options.quiet,
                          [&](std::span<const std::vector<std::int64_t>> frames) { stream.push(frames); });
        },
        options.quiet);
    return 0;
  }
  const auto frames = synthesize_text(opened, text, options.quiet);
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
  auto* cmd = app.add_subcommand("tts", "Text to speech (--text), code frames to a sound file (--codes), or a sound file to code frames (--encode)");
  add_model_options(*cmd, options->model);
  auto* text = add_tts_text_options(*cmd, options->text);
  auto* codes = input_file(cmd->add_option("--codes", options->codes,
                  "Code frames [T, codebooks] to decode without running the language model: JSON "
                  "({\"codes\": [[...], ...]} or a plain array) or safetensors (I64/I32 tensor \"codes\")"),
                           "a code frames file");
  text->excludes(codes);
  auto* encode = input_file(cmd->add_option("--encode", options->encode,
                   "Sound file to encode into code frames with the model's codec (WAV, FLAC, ...; mono or "
                   "downmixed, resampled to the codec's rate), written to --codes-out; no language model runs"),
                            "a sound file");
  encode->excludes(text);
  encode->excludes(codes);
  encode->needs(cmd->get_option("--codes-out"));
  auto* out = output_file(cmd->add_option("--out", options->out,
                                          "Output sound file, in the format its extension names: .wav (16-bit PCM; "
                                          "also without an extension), .flac, .ogg (Vorbis), .opus, .mp3"),
                          "a sound file");
  auto* stream = cmd->add_flag("--stream", options->stream,
                               "Write the waveform to stdout as it is decoded, while the model still generates: raw "
                               "16-bit little-endian PCM, mono, at the codec's rate (the samples a .wav would hold)");
  stream->excludes(out);
  stream->excludes(encode);
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] {
    run = [options] {
      if (!options->text.text.empty()) return run_text(*options);
      if (!options->encode.empty()) return run_encode(*options);
      if (!options->text.codes_out.empty()) throw InputError("tts: --codes-out needs --text or --encode");
      if (options->codes.empty()) throw InputError("tts: give --text TEXT (speech from text) or --codes FILE (code frames to decode)");
      if (options->out.empty() && !options->stream)
        throw InputError("tts: --codes needs --out (the sound file to write) or --stream");
      return run_codes(*options);
    };
  });
}

}  // namespace zoo::cli
