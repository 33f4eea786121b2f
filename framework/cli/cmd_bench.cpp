// `zoo bench`: load time, prefill tokens/s and decode ms/token of a model, as a table or JSON.
// Timings are medians over repeats, after one untimed warm-up pass per shape.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "commands.hpp"
#include "zoo/error.hpp"

namespace zoo::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n == 0 ? 0.0 : (n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]));
}

std::vector<std::int64_t> random_ids(std::int64_t count, std::int64_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(vocab));
  return ids;
}

struct BenchOptions {
  ModelOptions model;
  std::vector<long long> prompt_lens{128};
  std::vector<long long> decode_contexts;  // default: the prompt lengths
  int new_tokens = 32;
  int repeat = 3;
  bool json = false, quiet = false;
};

int bench(const BenchOptions& options) {
  PluginRegistry registry;
  ModelOptions model_options = options.model;
  if (model_options.max_context <= 0) {  // room for the longest prompt or context plus the decode steps
    long long needed = 0;
    for (auto n : options.prompt_lens) needed = std::max(needed, n);
    for (auto n : options.decode_contexts) needed = std::max(needed, n);
    model_options.max_context = needed + options.new_tokens + 1;
  }
  auto opened = open_from_options(model_options, registry);
  const auto info = opened.model->info();
  const auto load_start = Clock::now();
  load_model(opened, !options.quiet && !options.json);
  const double load_s = seconds_since(load_start);
  const double weight_bytes = static_cast<double>(opened.plan.total_bytes);

  auto progress = [&](const std::string& what) {
    if (!options.quiet && !options.json) fmt::print(stderr, "bench: {}\n", what);
  };

  nlohmann::json prefill = nlohmann::json::array();
  for (long long len : options.prompt_lens) {
    progress(fmt::format("prefill {} tokens x {}", len, options.repeat));
    const auto ids = random_ids(len, info.vocab_size, 1234 + static_cast<std::uint64_t>(len));
    std::vector<double> times;
    for (int r = 0; r <= options.repeat; ++r) {
      auto session = opened.model->new_session();
      const auto start = Clock::now();
      session->forward({ids, {}, {}, {}});
      if (r > 0) times.push_back(seconds_since(start));  // r == 0 warms caches, graphs, allocators
    }
    const double t = median(times);
    prefill.push_back({{"tokens", len}, {"seconds", t}, {"tokens_per_s", static_cast<double>(len) / t}});
  }

  nlohmann::json decode = nlohmann::json::array();
  const auto& contexts = options.decode_contexts.empty() ? options.prompt_lens : options.decode_contexts;
  for (long long context : contexts) {
    progress(fmt::format("decode {} tokens at context {} x {}", options.new_tokens, context, options.repeat));
    const auto ids = random_ids(context, info.vocab_size, 99 + static_cast<std::uint64_t>(context));
    std::vector<double> per_token;
    for (int r = 0; r <= options.repeat; ++r) {
      auto session = opened.model->new_session();
      auto result = session->forward({ids, {}, {}, {}});
      std::int64_t next = ids.back();
      const auto start = Clock::now();
      for (int i = 0; i < options.new_tokens; ++i) {
        result = session->forward({std::span(&next, 1), {}, {}, {}});
        // Feed back a deterministic token; the argmax would add a host loop the model doesn't need.
        next = (next * 31 + 7) % info.vocab_size;
      }
      if (r > 0) per_token.push_back(seconds_since(start) / options.new_tokens);
    }
    const double t = median(per_token);
    decode.push_back({{"context", context},
                      {"new_tokens", options.new_tokens},
                      {"ms_per_token", 1e3 * t},
                      {"tokens_per_s", 1.0 / t},
                      {"weight_gb_per_s", weight_bytes / t / 1e9}});
  }

  nlohmann::json out;
  out["model"] = info.summary;
  out["plugin"] = info.plugin;
  out["device"] = opened.spec.device.str();
  out["dtype"] = std::string(dtype_name(opened.spec.dtype));
  out["weight_bytes"] = opened.plan.total_bytes;
  out["load"] = {{"seconds", load_s}, {"gb_per_s", weight_bytes / load_s / 1e9}};
  out["prefill"] = prefill;
  out["decode"] = decode;
  out["runtime"] = opened.model->runtime_stats();
  out["repeat"] = options.repeat;
  if (options.json) {
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("model   {}\ndevice  {} ({})\nweights {:.3f} GB\n", info.summary, out["device"].get<std::string>(),
             out["dtype"].get<std::string>(), weight_bytes / 1e9);
  fmt::print("load    {:.3f} s  ({:.2f} GB/s)\n\n", load_s, weight_bytes / load_s / 1e9);
  fmt::print("{:<10} {:>10} {:>14} {:>12}\n", "phase", "tokens", "tokens/s", "ms");
  for (const auto& p : prefill)
    fmt::print("{:<10} {:>10} {:>14.1f} {:>12.2f}\n", "prefill", p["tokens"].get<long long>(),
               p["tokens_per_s"].get<double>(), 1e3 * p["seconds"].get<double>());
  fmt::print("\n{:<10} {:>10} {:>14} {:>12} {:>14}\n", "phase", "context", "tokens/s", "ms/token", "weights GB/s");
  for (const auto& d : decode)
    fmt::print("{:<10} {:>10} {:>14.1f} {:>12.3f} {:>14.1f}\n", "decode", d["context"].get<long long>(),
               d["tokens_per_s"].get<double>(), d["ms_per_token"].get<double>(), d["weight_gb_per_s"].get<double>());
  if (!out["runtime"].empty()) fmt::print("\nruntime {}\n", out["runtime"].dump());
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, Action& run) {
  auto options = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Measure load, prefill and decode speed");
  add_model_options(*cmd, options->model);
  cmd->add_option("--prompt-len", options->prompt_lens, "Prefill lengths (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1LL, 1LL << 20));
  cmd->add_option("--decode-context", options->decode_contexts, "Contexts to decode at (default: prompt lengths)")
      ->delimiter(',')
      ->check(CLI::Range(1LL, 1LL << 20));
  cmd->add_option("--new-tokens", options->new_tokens, "Decode steps timed per repeat")->check(CLI::Range(1, 100000));
  cmd->add_option("--repeat", options->repeat, "Timed repeats (median reported)")->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] { run = [options] { return bench(*options); }; });
}

}  // namespace zoo::cli
