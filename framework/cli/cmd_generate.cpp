#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "run_helpers.hpp"
#include "zoo/error.hpp"
#include "zoo/generation.hpp"
#include "zoo/generation_config.hpp"
#include "zoo/request.hpp"
#include "zoo/safetensors.hpp"

namespace zoo::cli {

namespace {

struct GenerateOptions {
  ModelOptions model;
  std::string request, out;
  int max_new_tokens = 16;
  float temperature = 0.0f, top_p = 1.0f;
  int top_k = 0;
  std::uint64_t seed = 0;
  std::vector<long long> eos;
  bool ignore_eos = false, quiet = false;
  // Set when the flag was given: flags override what generation_config.json says.
  CLI::Option *temperature_flag = nullptr, *top_k_flag = nullptr, *top_p_flag = nullptr, *eos_flag = nullptr;
};

std::string join_ids(const std::vector<std::int64_t>& ids) {
  std::string s;
  for (auto id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

// What generation runs with: the model directory's defaults, then the flags.
GenerationOptions resolve_generation(const GenerateOptions& o, const OpenedModel& opened) {
  const auto defaults = load_generation_defaults(checkpoint_directory(opened.spec), opened.config);
  GenerationOptions gen;
  gen.max_new_tokens = o.max_new_tokens;
  gen.sampling = defaults.sampling();
  if (o.temperature_flag->count()) gen.sampling.temperature = o.temperature;
  if (o.top_k_flag->count()) gen.sampling.top_k = o.top_k;
  if (o.top_p_flag->count()) gen.sampling.top_p = o.top_p;
  gen.sampling.seed = o.seed;
  std::string eos_source = defaults.eos_source;
  if (o.eos_flag->count()) {
    gen.eos_token_ids.assign(o.eos.begin(), o.eos.end());
    eos_source = "--eos";
  } else {
    gen.eos_token_ids = defaults.eos_token_ids;
  }
  if (o.ignore_eos) gen.eos_token_ids.clear();
  if (!o.quiet) {
    const auto& s = gen.sampling;
    const std::string sampling =
        s.temperature == 0.0f ? std::string("greedy")
                              : fmt::format("temperature {}, top_k {}, top_p {}, seed {}", s.temperature, s.top_k,
                                            s.top_p, s.seed);
    const std::string stop = o.ignore_eos ? "ignored (--ignore-eos)"
                             : gen.eos_token_ids.empty()
                                 ? "none"
                                 : fmt::format("{} (from {})", join_ids(gen.eos_token_ids), eos_source);
    fmt::print(stderr, "generate: {}{}; eos {}\n", sampling,
               defaults.sampling_source.empty() ? "" : fmt::format(" (defaults from {})", defaults.sampling_source),
               stop);
  }
  return gen;
}

}  // namespace

void add_generate_command(CLI::App& app, Action& run) {
  auto options = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "Generate tokens for a request (the model's sampling defaults, else greedy)");
  add_model_options(*cmd, options->model);
  cmd->add_option("--request", options->request, "Request JSON")->required();
  cmd->add_option("--max-new-tokens", options->max_new_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  options->temperature_flag =
      cmd->add_option("--temperature", options->temperature,
                      "0 is greedy (default: generation_config.json's when it samples, else 0)")
          ->check(CLI::Range(0.0, 100.0))
          ->default_str("");
  options->top_k_flag = cmd->add_option("--top-k", options->top_k,
                                        "Keep the k most likely tokens, 0: off (default: generation_config.json's)")
                            ->check(CLI::NonNegativeNumber)
                            ->default_str("");
  options->top_p_flag =
      cmd->add_option("--top-p", options->top_p, "Nucleus sampling mass, 1: off (default: generation_config.json's)")
          ->check(CLI::Range(0.0, 1.0))
          ->default_str("");
  cmd->add_option("--seed", options->seed, "Sampling seed");
  options->eos_flag = cmd->add_option("--eos", options->eos,
                                      "Stop after any of these token ids (comma-separated; default: eos_token_id of "
                                      "generation_config.json, else config.json)")
                          ->delimiter(',')
                          ->check(CLI::NonNegativeNumber)
                          ->default_str("");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Generate --max-new-tokens tokens whatever the model emits");
  cmd->add_option("--out", options->out, "Write generated_ids (I64 [N]) to this safetensors file");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] {
    run = [options] {
      PluginRegistry registry;
      auto opened = open_from_options(options->model, registry);
      // Refuse before loading anything: a model whose head is not a text head cannot be sampled.
      if (const auto why = opened.model->text_generation_unsupported(); !why.empty())
        throw InputError(fmt::format("{}: `zoo generate` cannot run this {} model: {}", opened.spec.file.string(),
                                     opened.model->info().plugin, why));
      if (!options->out.empty()) check_output("--out", options->out, opened, {{"request", options->request}});
      const GenerationOptions gen = resolve_generation(*options, opened);
      const auto vocab = opened.model->info().vocab_size;
      for (const auto id : gen.eos_token_ids)
        if (id >= vocab) throw InputError(fmt::format("eos id {}: outside the vocabulary [0, {})", id, vocab));
      Sampler check_flags(gen.sampling);  // sampling settings are checked before the (slow) load
      load_model(opened, !options->quiet);  // a model may need its weights to build a prompt
      // The last new token is not fed back, so the cache holds prompt + max_new_tokens - 1.
      const Prompt prompt = prepare_prompt(*opened.model, load_request(options->request), opened.spec.max_context,
                                           options->max_new_tokens - 1);
      auto session = opened.model->new_session();
      const auto ids = generate(*session, prompt, gen, [](std::int64_t id) {
        fmt::print("{} ", id);
        std::fflush(stdout);
      });
      fmt::print("\n");
      if (!options->out.empty()) {
        const auto tensor = HostTensor::from_i64({static_cast<std::int64_t>(ids.size())}, ids);
        write_safetensors(options->out, {{"generated_ids", tensor.view()}}, trace_metadata(opened));
      }
      return 0;
    };
  });
}

}  // namespace zoo::cli
