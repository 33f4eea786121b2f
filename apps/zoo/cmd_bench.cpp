// `zoo bench`: load time, prefill tokens/s and decode ms/token of a model, as a table or JSON;
// `--encode FILE` times the model's waveform-to-codes encoder on a sound file instead. Each phase
// prints its row when it finishes; timings are medians over repeats (min and max kept), after one
// untimed warm-up pass per shape.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <limits>
#include <random>
#include <unistd.h>

#include "build_info.hpp"
#include "commands.hpp"
#include "file_options.hpp"
#include "numeric_option.hpp"
#include "sound_encoding.hpp"
#include "zoo/batch.hpp"
#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/kernels/thread_pool.hpp"
#include "zoo/generation.hpp"

namespace zoo::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Spread {
  double min = 0, median = 0, max = 0;
  nlohmann::json to_json(double scale = 1.0) const {
    return {{"min", min * scale}, {"median", median * scale}, {"max", max * scale}};
  }
};

Spread spread(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return {values.front(), n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]), values.back()};
}

std::vector<std::int64_t> random_ids(std::int64_t count, std::int64_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(vocab));
  return ids;
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("unknown");
}

// "12.3 MB/s" or "1.85 GB/s": rates in the unit the sizes use.
std::string format_rate(double bytes_per_s) {
  return bytes_per_s < 1e9 ? fmt::format("{:.1f} MB/s", bytes_per_s / 1e6) : fmt::format("{:.2f} GB/s", bytes_per_s / 1e9);
}

// The weight bytes one decode step reads: each tensor once, at the width the model computes in
// (a float32 CPU run widens bf16 checkpoints at load, so it reads twice the stored bytes). A plugin
// that knows better (e.g. an embedding table read one row at a time) reports
// runtime_stats()["decode_weight_bytes"].
std::pair<double, std::string> decode_bytes(const OpenedModel& opened, const nlohmann::json& runtime) {
  if (runtime.contains("decode_weight_bytes") && runtime["decode_weight_bytes"].is_number())
    return {runtime["decode_weight_bytes"].get<double>(), "plugin"};
  double bytes = 0;
  for (const auto& e : opened.plan.entries) {
    if (!e.found) continue;
    const DType stored = e.found->dtype;
    const DType read = is_floating(stored) ? opened.spec.dtype : stored;
    bytes += static_cast<double>(numel(e.found->shape)) * static_cast<double>(dtype_size(read));
  }
  return {bytes, "estimate: every tensor at the compute dtype"};
}

// Progress of a long phase on stderr: redrawn in place on a terminal, silent otherwise.
class Progress {
 public:
  explicit Progress(bool on) : on_(on && isatty(STDERR_FILENO) != 0) {}
  void show(const std::string& what, int done, int total) const {
    if (!on_) return;
    fmt::print(stderr, "\r\033[K  {} {}/{}", what, done, total);
    std::fflush(stderr);
  }
  void clear() const {
    if (!on_) return;
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  bool on_;
};

struct BenchOptions {
  ModelOptions model;
  std::vector<long long> prompt_lens{128};
  std::vector<long long> decode_contexts;  // default: the prompt lengths
  int new_tokens = 32;
  int repeat = 3;
  bool json = false, quiet = false;
  bool full_logits = false;  // decode returns the logits row and the host picks (the A/B baseline)
  std::string encode;        // a sound file: time the code encoder on it instead of prefill/decode
  std::vector<long long> batches;  // decode many sequences at once through the model's Runner
};

nlohmann::json provenance() {
  return {{"zoo", {{"version", zoo_version()}, {"commit", zoo_commit()}}},
          {"host", host_name()},
          {"threads", kernels::ThreadPool::global().size()}};
}

// The encoder alone: only its weights are read (as `zoo tts --encode`), one untimed warm-up encode,
// then `repeat` timed ones. Every repeat must give the same codes: a run that changed its answer
// is not a speed to report.
int bench_encode(const BenchOptions& options) {
  PluginRegistry registry;
  auto opened = open_from_options(options.model, registry);
  CodeEncoder& encoder = code_encoder_of(opened);
  const bool table = !options.json;
  const std::vector<float> samples = read_reference_sound("bench", "--encode", options.encode, encoder, options.quiet);
  const double duration = static_cast<double>(samples.size()) / encoder.sample_rate();
  if (table) {
    fmt::print("model   {}\nencoder {}\ndevice  {}, {} CPU threads\ninput   {} ({:.2f} s at {} Hz)\n",
               opened.model->info().summary, encoder.summary(), opened.spec.device.str(),
               kernels::ThreadPool::global().size(), options.encode, duration, encoder.sample_rate());
    std::fflush(stdout);
  }
  const auto load_start = Clock::now();
  load_code_encoder(opened, encoder);
  const double load_s = seconds_since(load_start);
  if (table) fmt::print("load    {:.3f} s\n", load_s);
  const Progress progress(!options.quiet);
  const std::string what = "--encode " + options.encode;
  std::vector<double> times;
  EncodedFrames first;
  for (int r = 0; r <= options.repeat; ++r) {
    progress.show("encode", r, options.repeat);
    const auto start = Clock::now();
    EncodedFrames encoded = encoder.encode(samples, what);
    const double seconds = seconds_since(start);
    if (r == 0) {
      first = std::move(encoded);  // warms caches, allocators, kernels
      continue;
    }
    times.push_back(seconds);
    if (encoded.codes != first.codes)
      throw ValidationError(fmt::format("bench: {}: repeat {} gave other codes than the first encode", what, r));
  }
  progress.clear();
  const Spread t = spread(times);
  float margin = std::numeric_limits<float>::infinity();
  for (const float m : first.margins) margin = std::min(margin, m);
  nlohmann::json out = provenance();
  out["model"] = opened.model->info().summary;
  out["plugin"] = opened.model->info().plugin;
  out["device"] = opened.spec.device.str();
  out["encoder"] = encoder.summary();
  out["input"] = {{"file", options.encode}, {"seconds", duration}, {"samples", samples.size()}};
  out["load"] = {{"seconds", load_s}};
  out["encode"] = {{"frames", first.frames},
                   {"codebooks", first.num_codebooks},
                   {"seconds", t.median},
                   {"seconds_spread", t.to_json()},
                   {"real_time_factor", duration / t.median},
                   {"smallest_code_margin", margin},
                   {"codes_equal_across_repeats", true}};
  out["repeat"] = options.repeat;
  if (options.json) {
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("\n{:<10} {:>10} {:>12} {:>20} {:>12}\n", "phase", "frames", "ms", "ms min..max", "x real time");
  fmt::print("{:<10} {:>10} {:>12.2f} {:>20} {:>12.1f}\n", "encode", first.frames, 1e3 * t.median,
             fmt::format("{:.2f}..{:.2f}", 1e3 * t.min, 1e3 * t.max), duration / t.median);
  fmt::print("\ncodes equal across {} repeats; smallest best-vs-second code distance {:.4g}\n", options.repeat, margin);
  fmt::print("zoo {} ({}) on {}\n", zoo_version(), zoo_commit(), out["host"].get<std::string>());
  return 0;
}

// Decode steps of `batch` sequences at once through the model's Runner (zoo/batch.hpp): each
// sequence is prefilled with `context` random tokens, then every step feeds each one token (a
// fixed sequence, as the single-sequence decode does) and the runner picks the next greedily where
// its logits are. One untimed step, then `new_tokens` timed steps per repeat; contexts grow by
// new_tokens per repeat from `context`.
nlohmann::json bench_batch_decode(const OpenedModel& opened, std::int64_t batch, std::int64_t context,
                                  const BenchOptions& options, const Progress& progress) {
  const auto info = opened.model->info();
  const std::int64_t steps = static_cast<std::int64_t>(options.new_tokens) * (options.repeat + 1) + 1;
  auto runner = opened.model->new_runner({.max_sequences = batch, .max_context = context + steps + 1});
  std::vector<SequenceId> sequences;
  std::vector<std::vector<std::int64_t>> prompts;
  for (std::int64_t b = 0; b < batch; ++b) {
    sequences.push_back(runner->open_sequence());
    prompts.push_back(random_ids(context, info.vocab_size, 7 + static_cast<std::uint64_t>(b)));
  }
  // Prefill in steps of at most 8192 rows: whole prompts, several per step.
  for (std::int64_t b = 0; b < batch;) {
    std::vector<ForwardStep> parts;
    ForwardBatch step;
    std::int64_t rows = 0;
    parts.reserve(static_cast<std::size_t>(batch));
    while (b < batch && (rows == 0 || rows + context <= 8192)) {
      parts.push_back(ForwardStep{prompts[static_cast<std::size_t>(b)], {}, {}, OutputRequest{.logits = false}});
      step.slices.push_back({sequences[static_cast<std::size_t>(b)], 0, &parts.back()});
      rows += context;
      ++b;
    }
    progress.show(fmt::format("batch {}: prefill", batch), static_cast<int>(b), static_cast<int>(batch));
    runner->submit(step);
    runner->wait();
  }
  std::vector<std::int64_t> next(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) next[static_cast<std::size_t>(b)] = prompts[static_cast<std::size_t>(b)].back();
  std::vector<ForwardStep> parts(static_cast<std::size_t>(batch));
  const auto decode_step = [&] {
    ForwardBatch step;
    for (std::int64_t b = 0; b < batch; ++b) {
      auto& id = next[static_cast<std::size_t>(b)];
      id = (id * 31 + 7) % info.vocab_size;
      parts[static_cast<std::size_t>(b)] =
          ForwardStep{std::span<const std::int64_t>(&id, 1), {}, {}, OutputRequest{.sample = SampleRequest{}}};
      step.slices.push_back({sequences[static_cast<std::size_t>(b)], runner->tokens(sequences[static_cast<std::size_t>(b)]),
                             &parts[static_cast<std::size_t>(b)]});
    }
    runner->submit(step);
    runner->wait();
  };
  decode_step();  // warms caches, graphs, allocators
  std::vector<double> per_step;
  for (int r = 0; r < options.repeat; ++r) {
    progress.show(fmt::format("batch {}: decode {} steps at context {}", batch, options.new_tokens, context), r,
                  options.repeat);
    const auto start = Clock::now();
    for (int i = 0; i < options.new_tokens; ++i) decode_step();
    per_step.push_back(seconds_since(start) / options.new_tokens);
  }
  progress.clear();
  const Spread t = spread(per_step);
  const KvPoolStats pool = runner->pool();
  std::int64_t used = 0, capacity = 0;
  for (const auto& group : pool.groups) {
    used += group.used;
    capacity += group.capacity;
  }
  return {{"batch", batch},
          {"context", context},
          {"new_tokens", options.new_tokens},
          {"ms_per_step", 1e3 * t.median},
          {"ms_per_step_spread", t.to_json(1e3)},
          {"tokens_per_s", static_cast<double>(batch) / t.median},
          {"kv_pages_used", used},
          {"kv_pages_capacity", capacity},
          {"kv_page_tokens", pool.page_tokens}};
}

int bench(const BenchOptions& options) {
  if (!options.encode.empty()) return bench_encode(options);
  PluginRegistry registry;
  ModelOptions model_options = options.model;
  if (model_options.max_context <= 0) {  // room for the longest prompt or context plus the decode steps
    long long needed = 0;
    for (auto n : options.prompt_lens) needed = std::max(needed, n);
    for (auto n : options.decode_contexts) needed = std::max(needed, n);
    // A batch run decodes new_tokens per repeat, plus a warm-up step, on the same sequences.
    const long long steps = options.batches.empty() ? options.new_tokens : options.new_tokens * (options.repeat + 1) + 1;
    model_options.max_context = needed + steps + 2;
  }
  const bool table = !options.json;
  auto opened = open_from_options(model_options, registry);
  const auto info = opened.model->info();
  const double weight_bytes = static_cast<double>(opened.plan.total_bytes);
  if (table) {
    fmt::print("model   {}\ndevice  {} ({}), {} CPU threads\nweights {}\n", info.summary, opened.spec.device.str(),
               dtype_name(opened.spec.dtype), kernels::ThreadPool::global().size(),
               format_bytes(opened.plan.total_bytes));
    std::fflush(stdout);
  }
  const auto load_start = Clock::now();
  load_model(opened, !options.quiet && table);
  const double load_s = seconds_since(load_start);
  if (table) fmt::print("load    {:.3f} s  ({})\n", load_s, format_rate(weight_bytes / load_s));
  std::fflush(stdout);
  const Progress progress(!options.quiet);

  nlohmann::json prefill = nlohmann::json::array();
  for (long long len : options.prompt_lens) {
    if (table && prefill.empty())
      fmt::print("\n{:<10} {:>10} {:>14} {:>12} {:>20}\n", "phase", "tokens", "tokens/s", "ms", "ms min..max");
    const auto ids = random_ids(len, info.vocab_size, 1234 + static_cast<std::uint64_t>(len));
    std::vector<double> times;
    for (int r = 0; r <= options.repeat; ++r) {
      progress.show(fmt::format("prefill {} tokens", len), r, options.repeat);
      auto session = opened.model->new_session();
      const auto start = Clock::now();
      session->forward({ids, {}, {}, {}});
      if (r > 0) times.push_back(seconds_since(start));  // r == 0 warms caches, graphs, allocators
    }
    progress.clear();
    const Spread t = spread(times);
    prefill.push_back({{"tokens", len},
                       {"seconds", t.median},
                       {"tokens_per_s", static_cast<double>(len) / t.median},
                       {"seconds_spread", t.to_json()}});
    if (table)
      fmt::print("{:<10} {:>10} {:>14.1f} {:>12.2f} {:>20}\n", "prefill", len, static_cast<double>(len) / t.median,
                 1e3 * t.median, fmt::format("{:.2f}..{:.2f}", 1e3 * t.min, 1e3 * t.max));
    std::fflush(stdout);
  }

  const auto [read_bytes, read_bytes_source] = decode_bytes(opened, opened.model->runtime_stats());
  nlohmann::json decode = nlohmann::json::array();
  const auto& contexts = options.decode_contexts.empty() ? options.prompt_lens : options.decode_contexts;
  // As generate() decodes greedily: the session picks the token where the logits are, or
  // (--full-logits) returns the row and the host picks; a model without a text head
  // (text_generation_unsupported) computes its outputs and nothing is picked.
  const bool text = opened.model->text_generation_unsupported().empty();
  GenerationOptions gen;
  gen.max_new_tokens = options.new_tokens + 1;  // the first new token comes out of the prefill
  gen.pick = !text ? GenerationOptions::Pick::None
             : options.full_logits ? GenerationOptions::Pick::Host
                                   : GenerationOptions::Pick::Session;
  nlohmann::json batched = nlohmann::json::array();
  for (long long batch : options.batches) {
    for (long long context : contexts) {
      if (table && batched.empty())
        fmt::print("\n{:<10} {:>8} {:>10} {:>12} {:>20} {:>14} {:>16}\n", "phase", "batch", "context", "ms/step",
                   "ms/step min..max", "tokens/s", "KV pages used");
      nlohmann::json row = bench_batch_decode(opened, batch, context, options, progress);
      if (table)
        fmt::print("{:<10} {:>8} {:>10} {:>12.3f} {:>20} {:>14.1f} {:>16}\n", "decode", batch, context,
                   row["ms_per_step"].get<double>(),
                   fmt::format("{:.3f}..{:.3f}", row["ms_per_step_spread"]["min"].get<double>(),
                               row["ms_per_step_spread"]["max"].get<double>()),
                   row["tokens_per_s"].get<double>(),
                   fmt::format("{}/{}", row["kv_pages_used"].get<std::int64_t>(),
                               row["kv_pages_capacity"].get<std::int64_t>()));
      std::fflush(stdout);
      batched.push_back(std::move(row));
    }
  }
  for (long long context : options.batches.empty() ? contexts : std::vector<long long>{}) {
    if (table && decode.empty())
      fmt::print("\n{:<10} {:>10} {:>14} {:>12} {:>20} {:>14}\n", "phase", "context", "tokens/s", "ms/token",
                 "ms/token min..max", "weights GB/s");
    Prompt prompt;
    prompt.ids = random_ids(context, info.vocab_size, 99 + static_cast<std::uint64_t>(context));
    std::vector<double> per_token;
    for (int r = 0; r <= options.repeat; ++r) {
      progress.show(fmt::format("decode {} tokens at context {}", options.new_tokens, context), r, options.repeat);
      // Feed back a deterministic sequence, not the pick: random weights may repeat one token forever.
      std::int64_t next = prompt.ids.back();
      gen.feed = [&next, vocab = info.vocab_size](std::int64_t) { return next = (next * 31 + 7) % vocab; };
      auto session = opened.model->new_session();
      Clock::time_point first;
      (void)generate(*session, prompt, gen, [&first, seen = false](std::int64_t) mutable {
        if (!seen) first = Clock::now();  // decoding starts once the prefill has given its token
        seen = true;
      });
      if (r > 0) per_token.push_back(seconds_since(first) / options.new_tokens);  // r == 0 warms up
    }
    progress.clear();
    const Spread t = spread(per_token);
    decode.push_back({{"context", context},
                      {"output", !text ? "model outputs" : options.full_logits ? "logits row, host pick" : "sampled id"},
                      {"new_tokens", options.new_tokens},
                      {"ms_per_token", 1e3 * t.median},
                      {"tokens_per_s", 1.0 / t.median},
                      {"weight_gb_per_s", read_bytes / t.median / 1e9},
                      {"ms_per_token_spread", t.to_json(1e3)}});
    if (table)
      fmt::print("{:<10} {:>10} {:>14.1f} {:>12.3f} {:>20} {:>14.1f}\n", "decode", context, 1.0 / t.median,
                 1e3 * t.median, fmt::format("{:.3f}..{:.3f}", 1e3 * t.min, 1e3 * t.max), read_bytes / t.median / 1e9);
    std::fflush(stdout);
  }

  nlohmann::json out;
  out["model"] = info.summary;
  out["plugin"] = info.plugin;
  out["device"] = opened.spec.device.str();
  out["dtype"] = std::string(dtype_name(opened.spec.dtype));
  out["weight_bytes"] = opened.plan.total_bytes;
  out["weight_bytes_read_per_token"] = {{"bytes", read_bytes}, {"source", read_bytes_source}};
  out["load"] = {{"seconds", load_s}, {"gb_per_s", weight_bytes / load_s / 1e9}};
  out["prefill"] = prefill;
  out["decode"] = decode;
  if (!options.batches.empty()) out["batch_decode"] = batched;
  out["runtime"] = opened.model->runtime_stats();
  out["repeat"] = options.repeat;
  out.update(provenance());
  if (options.json) {
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  if (!out["runtime"].empty()) fmt::print("\nruntime {}\n", out["runtime"].dump());
  fmt::print("\nzoo {} ({}) on {}; weights GB/s counts {} per token ({})\n", zoo_version(), zoo_commit(),
             out["host"].get<std::string>(), format_bytes(static_cast<std::size_t>(read_bytes)), read_bytes_source);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, Action& run) {
  auto options = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Measure load, prefill and decode speed");
  add_model_options(*cmd, options->model);
  // -p, -n and -r as llama-bench spells them.
  cmd->add_option("-p,--prompt-len,--n-prompt", options->prompt_lens, "Prefill lengths (comma-separated)")
      ->delimiter(',')
      ->check(integer_in(1, 1LL << 20));
  cmd->add_option("--decode-context", options->decode_contexts, "Contexts to decode at (default: prompt lengths)")
      ->default_str("")
      ->delimiter(',')
      ->check(integer_in(1, 1LL << 20));
  cmd->add_option("-n,--new-tokens,--n-gen", options->new_tokens, "Decode steps timed per repeat")->check(integer_in(1, 100000));
  cmd->add_option("-r,--repeat,--repetitions", options->repeat, "Timed repeats (median reported, min and max kept)")
      ->check(integer_in(1, 1000));
  cmd->add_flag("--full-logits", options->full_logits,
                "Decode steps return the logits row and the host picks the token (the path before sampling on the "
                "device; for A/B)");
  auto* encode = input_file(cmd->add_option("--encode", options->encode,
                                            "Time the model's code encoder on this sound file (WAV, FLAC, ...) instead "
                                            "of prefill and decode; only the encoder's weights are read"),
                            "a sound file");
  auto* batch = cmd->add_option("--batch", options->batches,
                                "Decode this many sequences at once through the model's batch runner (comma-separated "
                                "sizes, e.g. 1,8,64,256), instead of one session")
                    ->delimiter(',')
                    ->check(integer_in(1, 4096));
  batch->excludes("--full-logits");
  for (const char* lm : {"--prompt-len", "--decode-context", "--new-tokens", "--full-logits", "--batch"})
    encode->excludes(lm);
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] { run = [options] { return bench(*options); }; });
}

}  // namespace zoo::cli
