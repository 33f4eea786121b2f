// `zoo serve MODEL`: OpenAI's HTTP API over the model's engine (server/, docs/serving.md). Listens
// first (GET /health is 503 while the model loads), prints `listening on http://HOST:PORT` once
// it can answer, and drains on SIGINT or SIGTERM.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <optional>

#include "commands.hpp"
#include "file_options.hpp"
#include "model_options.hpp"
#include "numeric_option.hpp"
#include "sound_encoding.hpp"
#include "zoo/chat_template.hpp"
#include "zoo/error.hpp"
#include "zoo/generation_config.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/plugin_registry.hpp"
#include "zoo/prompt_input.hpp"
#include "zoo/input_file.hpp"
#include "zoo/server/openai_server.hpp"
#include "zoo/sound_file.hpp"

namespace zoo::cli {

namespace {

struct ServeOptions {
  ModelOptions model;
  std::string host = "127.0.0.1", served_model_name, api_key, tokenizer, voices;
  int port = 8000;
  std::int64_t max_running = 256, max_queue = 1024, max_batched_tokens = 2048, ctx_size = 0, prefix_cache = 64;
  double kv_cache_gb = 0, memory_fraction = 0, request_timeout = 600;
  int drain_timeout = 30, codec_threads = 4, warmup = -1, stream_buffer_mb = 32;
  bool api_key_given = false;  // `--api-key ""` (an unset variable) is refused, not taken as "no key"
};

// --voices DIR: NAME.wav (or another sound file) with NAME.txt, its transcript, per voice; each
// encoded once, now.
std::map<std::string, server::SpeechVoice> load_voices(const std::string& dir, CodeEncoder* encoder) {
  if (!encoder)
    throw InputError(fmt::format("--voices {}: this checkpoint has no codec encoder to encode the voices with", dir));
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw InputError(fmt::format("--voices {}: not a directory", dir));
  std::vector<std::filesystem::path> sounds;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_regular_file() && sound_format_for(entry.path()) && entry.path().extension() != "")
      sounds.push_back(entry.path());
  if (ec) throw InputError(fmt::format("--voices {}: {}", dir, ec.message()));
  std::sort(sounds.begin(), sounds.end());
  if (sounds.empty()) throw InputError(fmt::format("--voices {}: no sound files (NAME.wav with NAME.txt)", dir));
  std::map<std::string, server::SpeechVoice> voices;
  for (const auto& sound : sounds) {
    const std::string name = sound.stem().string();
    if (voices.contains(name)) throw InputError(fmt::format("--voices {}: two sound files for voice '{}'", dir, name));
    auto transcript = sound;
    transcript.replace_extension(".txt");
    if (!std::filesystem::exists(transcript, ec))
      throw InputError(fmt::format("--voices {}: voice '{}' has no transcript {}", dir, name, transcript.string()));
    server::SpeechVoice voice;
    voice.text = read_text_file(transcript, "a voice's transcript", 1 << 16);
    while (!voice.text.empty() && (voice.text.back() == '\n' || voice.text.back() == '\r' || voice.text.back() == ' '))
      voice.text.pop_back();
    const auto samples = read_reference_sound("serve", "--voices", sound.string(), *encoder, true);
    const EncodedFrames encoded = encoder->encode(samples, sound.string());
    for (std::int64_t t = 0; t < encoded.frames; ++t)
      voice.frames.emplace_back(encoded.codes.begin() + t * encoded.num_codebooks,
                                encoded.codes.begin() + (t + 1) * encoded.num_codebooks);
    fmt::print(stderr, "zoo serve: voice '{}': {} frames from {}\n", name, encoded.frames, sound.string());
    voices.emplace(name, std::move(voice));
  }
  return voices;
}

int run_serve(const ServeOptions& o) {
  server::ServerOptions so;
  so.http.host = o.host;
  so.http.port = static_cast<std::uint16_t>(o.port);
  so.engine = {.max_running = o.max_running,
               .max_batched_tokens = o.max_batched_tokens,
               .prefix_cache_entries = o.prefix_cache};
  so.max_queue = o.max_queue;
  so.http.max_pending_bytes = static_cast<std::size_t>(o.stream_buffer_mb) << 20;
  so.api_key = o.api_key;
  if (o.api_key_given && o.api_key.empty())
    throw InputError("--api-key is empty (an unset variable?): give the key, or leave the option out to serve "
                     "without one");
  so.drain_timeout = std::chrono::seconds(o.drain_timeout);
  so.codec_threads = o.codec_threads;
  so.request_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.request_timeout * 1000));
  ModelOptions model_options = o.model;
  model_options.max_context = paged_context_limit(o.model, o.ctx_size, "-c/--max-model-len");
  server::OpenAiServer server(so);  // bound now: a taken port fails before the model loads
  PluginRegistry registry;
  auto opened = open_from_options(model_options, registry);
  SpeechSteps* speech = opened.model->extension<SpeechSteps>();
  const std::string no_text = opened.model->text_generation_unsupported();
  if (!no_text.empty() && !speech)
    throw InputError(fmt::format("{}: `zoo serve` cannot serve this {} model: {}", opened.spec.file.string(),
                                 opened.model->info().plugin, no_text));
  if (!o.voices.empty() && !speech)
    throw InputError(fmt::format("--voices: the {} model does not synthesize speech", opened.model->info().plugin));
  CodeDecoder* decoder = speech ? &code_decoder_of(opened) : nullptr;
  CodeEncoder* encoder = nullptr;
  if (speech) {
    Codec* codec = opened.model->extension<Codec>();
    encoder = codec ? codec->code_encoder() : nullptr;
  }
  const auto model_dir = checkpoint_directory(opened.spec);
  const auto tokenizer = open_model_tokenizer(model_dir, o.tokenizer, false);
  const auto defaults = load_generation_defaults(model_dir, opened.config);
  load_model(opened, true);
  if (decoder) load_code_decoder(opened, *decoder);
  if (encoder) load_code_encoder(opened, *encoder);
  // The prefix cache keeps finished sequences open: the runner holds them beside the running ones.
  RunnerOptions runner_options{.max_sequences = o.max_running + o.prefix_cache, .max_context = opened.spec.max_context};
  runner_options.kv_bytes = static_cast<std::int64_t>(o.kv_cache_gb * 1e9);
  runner_options.kv_memory_fraction = o.memory_fraction;
  if (o.memory_fraction > 0 && opened.spec.device.kind == DeviceKind::CPU)
    throw InputError(fmt::format("--gpu-memory-utilization sizes the KV cache on a GPU; this model runs on the CPU{}: "
                                 "use --kv-cache-gb",
                                 opened.spec.device_origin.empty() ? "" : " (" + opened.spec.device_origin + ")"));
  std::unique_ptr<Runner> runner;
  try {
    runner = opened.model->new_runner(runner_options);
  } catch (const InputError& e) {
    if (o.kv_cache_gb <= 0) throw;
    throw InputError(fmt::format("--kv-cache-gb {}: {}", o.kv_cache_gb, e.what()));
  } catch (const std::invalid_argument& e) {  // the page pool's own bound (2^30 pages)
    if (o.kv_cache_gb <= 0) throw;
    throw InputError(fmt::format("--kv-cache-gb {}: more than a KV page pool can hold ({})", o.kv_cache_gb, e.what()));
  } catch (const std::bad_alloc&) {
    if (o.kv_cache_gb <= 0) throw;
    throw InputError(fmt::format("--kv-cache-gb {}: not enough memory for a KV cache that large", o.kv_cache_gb));
  }
  server::ServedModel served;
  served.name = o.served_model_name.empty() ? o.model.config : o.served_model_name;
  served.runner = runner.get();
  served.tokenizer = tokenizer ? &*tokenizer : nullptr;
  served.vocab_size = opened.model->info().vocab_size;
  served.eos_token_ids = defaults.eos_token_ids;
  served.defaults = defaults.sampling();
  if (served.tokenizer) {
    try {
      served.chat_template = std::make_shared<const ChatTemplate>(load_chat_template(model_dir));
      served.tool_template = std::make_shared<const ChatTemplate>(load_chat_template(model_dir, {}, true));
      served.chat_syntax = engine::detect_chat_syntax(served.chat_template->source() + served.tool_template->source());
    } catch (const InputError& e) {
      fmt::print(stderr, "zoo serve: no chat template ({}): /v1/chat/completions answers 400\n", e.what());
    }
  }
  served.defaults_from_model = !defaults.sampling_source.empty();
  served.text_unsupported = no_text;
  served.speech = speech;
  served.decoder = decoder;
  served.encoder = encoder;
  if (!o.voices.empty()) served.voices = load_voices(o.voices, encoder);
  if (served.chat_template)
    fmt::print(stderr, "zoo serve: chat template {}: reasoning {}, tool calls {}\n", served.chat_template->label(),
               engine::reasoning_syntax_name(served.chat_syntax.reasoning),
               engine::tool_call_syntax_name(served.chat_syntax.tools));
  const KvPoolStats pool = runner->pool();
  fmt::print(stderr, "zoo serve: model '{}'; KV pool {} pages of {} tokens ({:.2f} GB), context limit {}{}\n",
             served.name, pool.capacity(), pool.page_tokens, pool.bytes() / 1e9, runner->max_context(),
             served.tokenizer ? "" : "; no tokenizer: prompts as token ids");
  // The first-use costs a warm-up pays are a GPU's (kernels loaded at first launch, GEMM plans,
  // graphs); a CPU run has none worth its time.
  const int warmup = o.warmup >= 0 ? o.warmup : (opened.spec.device.kind == DeviceKind::CPU ? 0 : 16);
  server.ready(std::move(served), warmup);
  fmt::print("listening on http://{}:{}\n", o.host, server.port());
  std::fflush(stdout);
  server.wait();
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, Action& run) {
  auto options = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve",
                                 "Serve the model over HTTP: OpenAI's /v1/completions and /v1/chat/completions "
                                 "(streamed as server-sent events), /v1/models, /tokenize, /detokenize, /health");
  add_model_options(*cmd, options->model);
  not_a_file(cmd->add_option("--host", options->host, "Address to listen on (default 127.0.0.1: this machine only)"));
  cmd->add_option("--port", options->port, "Port (0: any free one; the printed line says which)")
      ->check(integer_in(0, 65535));
  not_a_file(cmd->add_option("--served-model-name", options->served_model_name,
                             "The model's name in the API (default: MODEL as given)"));
  not_a_file(cmd->add_option("--api-key", options->api_key,
                             "Require 'Authorization: Bearer KEY' on /v1 requests (default: none)"));
  cmd->add_option("--max-running", options->max_running, "Sequences decoding at once")->check(integer_in(1, 4096));
  cmd->add_option("--max-queue", options->max_queue, "Requests waiting beyond the running ones; more: 429")
      ->check(integer_in(0, 1 << 20));
  cmd->add_option("--max-num-batched-tokens,--max-batched-tokens", options->max_batched_tokens,
                  "Rows per forward step (decode tokens plus prompt chunks)")
      ->check(integer_in(1, 1 << 20));
  cmd->add_option("-c,--max-model-len,--ctx-size", options->ctx_size,
                  "Each request's context limit in tokens, prompt and new tokens together (default: the model's "
                  "max_position_embeddings; KV pages are taken as tokens arrive)")
      ->check(integer_in(1, std::int64_t{1} << 24));
  cmd->add_option("--kv-cache-gb", options->kv_cache_gb,
                  "The KV page pool's size (default: most of the free device memory, or a quarter of host memory)")
      ->check(number_in(0.0, 1e6));
  cmd->add_option("--gpu-memory-utilization", options->memory_fraction,
                  "Size the KV cache so that the GPU's memory in use (weights, cache, 2 GiB for activations) stays "
                  "within this fraction of its total (vLLM's option; instead of --kv-cache-gb)")
      ->check(number_in(0.01, 1.0))
      ->excludes("--kv-cache-gb");
  cmd->add_option("--request-timeout", options->request_timeout,
                  "Seconds a request may take from arrival to its last token; later it is cancelled and answered "
                  "504 (0: no limit)")
      ->check(number_in(0.0, 1e7));
  cmd->add_option("--prefix-cache-entries", options->prefix_cache,
                  "Finished sequences kept for their prompts' prefixes (whole 16-token pages are reused; 0: no "
                  "prefix cache)")
      ->check(integer_in(0, 1 << 16));
  cmd->add_option("--stream-buffer-mb", options->stream_buffer_mb,
                  "MiB of a streamed answer the server holds for a client that reads slower than it is made; "
                  "past that the client is dropped and its request cancelled")
      ->check(integer_in(1, 4096));
  cmd->add_option("--drain-timeout", options->drain_timeout,
                  "Seconds running requests get to finish after SIGTERM before they are cancelled")
      ->check(integer_in(0, 86400));
  input_file(cmd->add_option("--voices", options->voices,
                             "Voices for the speech endpoint's 'voice' field: a directory of NAME.wav (any sound "
                             "file) and NAME.txt (its transcript), encoded once at start"),
             "a directory of voices", {.directory_ok = true});
  cmd->add_option(
         "--warmup", options->warmup,
         "Requests run at once before /health says ready, so that the first clients do not pay the "
         "first-use costs (kernel loading, GEMM plans, buffers, graphs); default 16 on a GPU, 0 on the CPU")
      ->check(integer_in(0, 4096));
  cmd->add_option("--codec-threads", options->codec_threads,
                  "Threads running speech requests' codec (decoding their waveforms, encoding reference "
                  "sound); a request keeps one, and their decodes run side by side on the GPU")
      ->check(integer_in(1, 64));
  input_file(cmd->add_option("--tokenizer", options->tokenizer, "tokenizer.json (default: the one in the model directory)"),
             "a tokenizer.json");
  cmd->callback([&run, options, cmd] {
    options->api_key_given = cmd->count("--api-key") > 0;
    run = [options] { return run_serve(*options); };
  });
}

}  // namespace zoo::cli
