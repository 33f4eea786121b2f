#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "run_helpers.hpp"
#include "zoo/error.hpp"
#include "zoo/generation.hpp"
#include "zoo/request.hpp"
#include "zoo/safetensors.hpp"

namespace zoo::cli {

void add_generate_command(CLI::App& app, Action& run) {
  struct Options {
    ModelOptions model;
    std::string request, out;
    int max_new_tokens = 16;
    float temperature = 0.0f, top_p = 1.0f;
    int top_k = 0;
    std::uint64_t seed = 0;
    long long eos = -1;
    bool quiet = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("generate", "Generate tokens for a request (greedy unless told otherwise)");
  add_model_options(*cmd, options->model);
  cmd->add_option("--request", options->request, "Request JSON")->required();
  cmd->add_option("--max-new-tokens", options->max_new_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", options->temperature, "0 is greedy")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", options->top_k, "Keep the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", options->top_p, "Nucleus sampling mass (1: off)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", options->seed, "Sampling seed");
  cmd->add_option("--eos", options->eos, "Stop after this token id")->check(CLI::NonNegativeNumber);
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
      const auto vocab = opened.model->info().vocab_size;
      if (options->eos >= vocab)
        throw InputError(fmt::format("--eos {}: outside the vocabulary [0, {})", options->eos, vocab));
      // Sampling flags are checked before the (slow) load.
      const SamplingOptions sampling{options->temperature, options->top_k, options->top_p, options->seed};
      Sampler check_flags(sampling);
      load_model(opened, !options->quiet);  // a model may need its weights to build a prompt
      // The last new token is not fed back, so the cache holds prompt + max_new_tokens - 1.
      const Prompt prompt = prepare_prompt(*opened.model, load_request(options->request), opened.spec.max_context,
                                           options->max_new_tokens - 1);
      auto session = opened.model->new_session();
      GenerationOptions gen;
      gen.max_new_tokens = options->max_new_tokens;
      gen.sampling = sampling;
      if (options->eos >= 0) gen.eos_token_id = options->eos;
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
