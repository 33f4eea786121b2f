#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "file_options.hpp"
#include "numeric_option.hpp"
#include "run_helpers.hpp"
#include "seed.hpp"
#include "zoo/batch_input.hpp"
#include "zoo/engine/engine.hpp"
#include "zoo/error.hpp"
#include "zoo/generation.hpp"
#include "zoo/input_file.hpp"
#include "zoo/model_spec.hpp"
#include "zoo/generation_config.hpp"
#include "zoo/prompt_input.hpp"
#include "zoo/safetensors.hpp"
#include "zoo/tokenizer.hpp"
#include "zoo/utf8_stream.hpp"

namespace zoo::cli {

namespace {

struct GenerateOptions {
  ModelOptions model;
  std::string request, prompt, prompt_file, messages, system, tokenizer, out, template_name, input;
  std::vector<std::string> template_settings;  // --set KEY=JSON for the chat template
  bool chat = false, ids = false;
  int max_new_tokens = 16;
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f;
  float repetition_penalty = 1.0f, frequency_penalty = 0.0f, presence_penalty = 0.0f;
  int top_k = 0;
  // --input: the engine's limits.
  std::int64_t max_running = 256, max_batched_tokens = 2048, ctx_size = 0;
  int logprobs = -1;  // --input: each new token's logprob and the top n
  double kv_cache_gb = 0;
  std::optional<std::uint64_t> seed;  // unset: a fresh one each run
  std::vector<long long> eos;
  bool ignore_eos = false, quiet = false;
  // Set when the flag was given: flags override what generation_config.json says.
  CLI::Option *temperature_flag = nullptr, *top_k_flag = nullptr, *top_p_flag = nullptr, *eos_flag = nullptr,
              *min_p_flag = nullptr, *repetition_flag = nullptr;
  // Counted rather than tested for emptiness: `--prompt ""` is an empty prompt, not a missing one.
  CLI::Option *prompt_flag = nullptr, *prompt_file_flag = nullptr, *request_flag = nullptr, *messages_flag = nullptr,
              *input_flag = nullptr;
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
  SamplingFlags flags;
  if (o.temperature_flag->count()) flags.temperature = o.temperature;
  if (o.top_k_flag->count()) flags.top_k = o.top_k;
  if (o.top_p_flag->count()) flags.top_p = o.top_p;
  if (o.repetition_flag->count()) flags.repetition_penalty = o.repetition_penalty;
  gen.sampling = resolve_sampling(defaults, flags);
  if (o.min_p_flag->count()) gen.sampling.min_p = o.min_p;
  gen.sampling.frequency_penalty = o.frequency_penalty;
  gen.sampling.presence_penalty = o.presence_penalty;
  // Greedy decoding draws no numbers: no seed to choose or to report.
  if (gen.sampling.temperature != 0.0f) gen.sampling.seed = seed_or_random(o.seed);
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
                              : fmt::format("temperature {}, top_k {}, top_p {}{}, seed {}", s.temperature, s.top_k,
                                            s.top_p, s.min_p > 0 ? fmt::format(", min_p {}", s.min_p) : "", s.seed);
    const std::string stop = o.ignore_eos ? "ignored (--ignore-eos)"
                             : gen.eos_token_ids.empty()
                                 ? "none"
                                 : fmt::format("{} (from {})", join_ids(gen.eos_token_ids), eos_source);
    std::string penalties;
    if (s.repetition_penalty != 1.0f) penalties += fmt::format(", repetition penalty {}", s.repetition_penalty);
    if (s.frequency_penalty != 0.0f) penalties += fmt::format(", frequency penalty {}", s.frequency_penalty);
    if (s.presence_penalty != 0.0f) penalties += fmt::format(", presence penalty {}", s.presence_penalty);
    fmt::print(stderr, "generate: {}{}{}; eos {}\n", sampling, penalties,
               defaults.sampling_source.empty() ? "" : fmt::format(" (defaults from {})", defaults.sampling_source),
               stop);
  }
  return gen;
}

using Clock = std::chrono::steady_clock;

// The prompt source the flags name; a flag given counts even when empty (`--prompt ""` is an empty
// prompt, not a missing one).
PromptOptions prompt_options(const GenerateOptions& o) {
  PromptOptions p;
  if (o.request_flag->count()) p.request_file = o.request;
  if (o.prompt_flag->count()) p.text = o.prompt;
  if (o.prompt_file_flag->count()) p.text_file = o.prompt_file;
  if (o.messages_flag->count()) p.messages_file = o.messages;
  p.chat = o.chat;
  p.system = o.system;
  p.template_name = o.template_name;
  p.template_settings = o.template_settings;
  return p;
}

// Prints generated tokens as they come: text through the tokenizer (special tokens left out, as
// decode(skip_special_tokens) does; a split UTF-8 character held back until complete), else ids.
class TokenPrinter {
 public:
  explicit TokenPrinter(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
  void operator()(std::int64_t id) {
    if (!tokenizer_) {
      fmt::print("{} ", id);
    } else if (!tokenizer_->is_special(id)) {
      if (const auto bytes = tokenizer_->token_bytes(id)) write(stream_.push(*bytes));
    }
    std::fflush(stdout);
  }
  void finish() {
    if (tokenizer_) write(stream_.finish());
    fmt::print("\n");
    std::fflush(stdout);
  }

 private:
  static void write(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }
  const Tokenizer* tokenizer_;
  Utf8Stream stream_;
};

// `--input FILE.jsonl`: every line a sequence, all through the engine at once. Each line's
// sampling fields override the flags (and generation_config.json); a line without a seed samples
// with the run's seed plus its index, so each is reproducible alone.
int run_generate_batch(const GenerateOptions& o) {
  const std::string label = o.input == "-" ? "<stdin>" : o.input;
  const std::string text = o.input == "-" ? read_stdin_text("a JSONL input", kMaxTextFileBytes)
                                          : read_text_file(o.input, "a JSONL file", kMaxTextFileBytes);
  const std::vector<BatchItem> items = parse_batch_input(text, label);
  ModelOptions model_options = o.model;
  model_options.max_context = paged_context_limit(o.model, o.ctx_size, "-c/--ctx-size");
  PluginRegistry registry;
  auto opened = open_from_options(model_options, registry);
  if (const auto why = opened.model->text_generation_unsupported(); !why.empty())
    throw InputError(fmt::format("{}: `zoo generate` cannot run this {} model: {}", opened.spec.file.string(),
                                 opened.model->info().plugin, why));
  if (!o.out.empty()) {
    std::vector<NamedPath> inputs;
    if (o.input != "-") inputs.push_back({"input", o.input});
    if (!o.tokenizer.empty()) inputs.push_back({"tokenizer", o.tokenizer});
    check_output("--out", o.out, opened, inputs);
  }
  GenerationOptions gen = resolve_generation(o, opened);
  const auto vocab = opened.model->info().vocab_size;
  for (const auto id : gen.eos_token_ids)
    if (id >= vocab)
      throw InputError(fmt::format("{} {}: outside the vocabulary [0, {})",
                                   o.eos_flag->count() ? "--eos" : "eos id (from the model directory)", id, vocab));
  const bool any_text = std::any_of(items.begin(), items.end(), [](const BatchItem& item) { return item.prompt.has_value(); });
  const auto model_dir = checkpoint_directory(opened.spec);
  const auto tokenizer = open_model_tokenizer(model_dir, o.tokenizer, any_text);
  // The run's seed, chosen (and printed) once, only if a line samples without a seed of its own.
  std::optional<std::uint64_t> run_seed;
  const auto base_seed = [&] {
    if (!run_seed) run_seed = gen.sampling.temperature != 0.0f ? gen.sampling.seed : seed_or_random(o.seed);
    return *run_seed;
  };
  std::vector<engine::GenerationRequest> requests;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const BatchItem& item = items[i];
    const auto where = [&](const std::string& what) { return fmt::format("{}:{}: {}", label, item.line, what); };
    engine::GenerationRequest request;
    request.max_new_tokens = item.max_new_tokens.value_or(gen.max_new_tokens);
    request.top_logprobs = item.logprobs.value_or(o.logprobs);
    request.eos_token_ids = gen.eos_token_ids;
    SamplingOptions& s = request.sampling;
    s = gen.sampling;
    if (item.temperature) s.temperature = *item.temperature;
    if (item.top_k) s.top_k = *item.top_k;
    if (item.top_p) s.top_p = *item.top_p;
    if (item.min_p) s.min_p = *item.min_p;
    if (item.repetition_penalty) s.repetition_penalty = *item.repetition_penalty;
    if (item.frequency_penalty) s.frequency_penalty = *item.frequency_penalty;
    if (item.presence_penalty) s.presence_penalty = *item.presence_penalty;
    // A line that asks for greedy decoding drops the flags' filters instead of failing on them.
    if (item.temperature && *item.temperature == 0.0f) {
      if (!item.top_k) s.top_k = 0;
      if (!item.top_p) s.top_p = 1.0f;
      if (!item.min_p) s.min_p = 0.0f;
    }
    s.seed = item.seed ? *item.seed : s.temperature != 0.0f ? base_seed() + i : 0;
    try {
      Sampler check(s);
    } catch (const InputError& e) {
      // The Sampler names its flags; on a line, the fields are what the user wrote.
      std::string message = e.what();
      for (const auto& [flag, field] : {std::pair{"--temperature", "temperature"}, {"--top-k", "top_k"},
                                        {"--top-p", "top_p"}, {"--min-p", "min_p"},
                                        {"--repetition-penalty", "repetition_penalty"},
                                        {"--frequency-penalty", "frequency_penalty"},
                                        {"--presence-penalty", "presence_penalty"}})
        for (auto at = message.find(flag); at != std::string::npos; at = message.find(flag))
          message.replace(at, std::string_view(flag).size(), field);
      throw InputError(where(message));
    }
    Request prompt_request;
    if (item.prompt) {
      PromptOptions p;
      p.text = *item.prompt;
      p.chat = o.chat;
      p.system = o.system;
      p.template_name = o.template_name;
      p.template_settings = o.template_settings;
      prompt_request = build_request(p, model_dir, tokenizer);
    } else {
      prompt_request.input_ids = item.input_ids;
    }
    prompt_request.file = where("input_ids");
    for (auto id : prompt_request.input_ids)
      if (id >= vocab) throw InputError(where(fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab)));
    request.prompt = std::move(prompt_request.input_ids);
    requests.push_back(std::move(request));
  }
  load_model(opened, !o.quiet);
  RunnerOptions runner_options{.max_sequences = o.max_running, .max_context = opened.spec.max_context};
  runner_options.kv_bytes = static_cast<std::int64_t>(o.kv_cache_gb * 1e9);
  auto runner = opened.model->new_runner(runner_options);
  engine::Engine engine(*runner, {.max_running = o.max_running, .max_batched_tokens = o.max_batched_tokens});
  std::int64_t prompt_total = 0;
  for (const auto& request : requests) prompt_total += static_cast<std::int64_t>(request.prompt.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      engine.add(std::move(requests[i]));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}:{}: {}", label, items[i].line, e.what()));
    }
  }
  if (!o.quiet) {
    const KvPoolStats pool = runner->pool();
    fmt::print(stderr,
               "generate: {} sequences; KV pool {} pages of {} tokens ({:.2f} GB), context limit {}\n",
               items.size(), pool.capacity(), pool.page_tokens, pool.bytes() / 1e9, runner->max_context());
  }
  std::vector<std::optional<engine::Completion>> done(items.size());
  std::size_t finished = 0;
  auto last_report = Clock::now();
  // Progress once a second: long prefills show as prompt tokens done.
  const auto report = [&] {
    const auto& st = engine.stats();
    fmt::print(stderr, "generate: {}/{} done, {} running, prompt tokens {}/{}, {} tokens out, {:.1f} tokens/s\n",
               finished, items.size(), engine.running(), st.prompt_tokens, prompt_total, st.generated_tokens,
               st.seconds > 0 ? static_cast<double>(st.generated_tokens) / st.seconds : 0.0);
  };
  while (!engine.idle()) {
    for (auto& completion : engine.step()) {
      done[static_cast<std::size_t>(completion.request)] = std::move(completion);
      ++finished;
    }
    if (!o.quiet && Clock::now() - last_report > std::chrono::seconds(1)) {
      report();
      last_report = Clock::now();
    }
  }
  std::string lines;
  for (std::size_t i = 0; i < done.size(); ++i) {
    const engine::Completion& c = *done[i];
    nlohmann::ordered_json line{{"index", i}, {"ids", c.ids}};
    if (tokenizer) line["text"] = tokenizer->decode(c.ids, true);
    line["finish_reason"] = engine::finish_reason_name(c.finish);
    // The engine hands back every pick; logprobs are written only where the line (or --logprobs) asked.
    if (items[i].logprobs.value_or(o.logprobs) >= 0) {  // of the raw logits, as the server's
      const auto entry = [&](std::int64_t id, float logprob) {
        nlohmann::ordered_json e{{"id", id}};
        if (tokenizer)
          if (const auto bytes = tokenizer->token_bytes(id)) e["token"] = *bytes;
        e["logprob"] = logprob;
        return e;
      };
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const SampledToken& t : c.tokens) {
        nlohmann::ordered_json e = entry(t.id, t.logprob);
        e["top_logprobs"] = nlohmann::ordered_json::array();
        for (const auto& [id, lp] : t.top) e["top_logprobs"].push_back(entry(id, lp));
        list.push_back(std::move(e));
      }
      line["logprobs"] = std::move(list);
    }
    lines += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  if (o.out.empty()) std::fwrite(lines.data(), 1, lines.size(), stdout);
  else write_file_atomic(o.out, lines);
  if (!o.quiet) {
    report();
    const auto& st = engine.stats();
    fmt::print(stderr,
               "generate: {} steps, {:.1f} rows per step, {} prompt tokens, {} preemptions; KV pages at peak {} of {} "
               "({:.1f}%)\n",
               st.steps, st.steps ? static_cast<double>(st.rows) / static_cast<double>(st.steps) : 0.0, st.prompt_tokens,
               st.preemptions, st.peak_pages_used, st.pages_capacity,
               st.pages_capacity ? 100.0 * static_cast<double>(st.peak_pages_used) / static_cast<double>(st.pages_capacity)
                                 : 0.0);
    if (st.device_seconds > 0)  // where the runner times its steps on the device
      fmt::print(stderr, "generate: steps {:.3f} s, the device busy {:.3f} s of them ({:.1f}%)\n", st.seconds,
                 st.device_seconds, 100.0 * st.device_seconds / st.seconds);
  }
  return 0;
}

int run_generate(const GenerateOptions& o) {
  if (o.input_flag->count()) return run_generate_batch(o);
  // Before the model opens: an empty prompt needs no model to be refused.
  if (o.prompt_flag->count() && o.prompt.empty()) throw InputError("--prompt: the prompt is empty");
  for (const auto& [flag, name] : {std::pair{o.prompt_file_flag, "--prompt-file"}, {o.request_flag, "--request"},
                                   {o.messages_flag, "--messages"}})
    if (flag->count() && flag->as<std::string>().empty())
      throw InputError(fmt::format("{}: the file name is empty (give a file, or - for stdin)", name));
  PluginRegistry registry;
  auto opened = open_from_options(o.model, registry);
  // Refuse before loading anything: a model whose head is not a text head cannot be sampled.
  if (const auto why = opened.model->text_generation_unsupported(); !why.empty())
    throw InputError(fmt::format("{}: `zoo generate` cannot run this {} model: {}", opened.spec.file.string(),
                                 opened.model->info().plugin, why));
  if (!o.out.empty()) {
    std::vector<NamedPath> inputs;
    for (const auto& [label, path] : {std::pair<const char*, std::string>{"request", o.request},
                                      {"prompt file", o.prompt_file}, {"messages", o.messages},
                                      {"tokenizer", o.tokenizer}})
      if (!path.empty() && path != "-") inputs.push_back({label, path});
    check_output("--out", o.out, opened, inputs);
  }
  const GenerationOptions gen = resolve_generation(o, opened);
  const auto vocab = opened.model->info().vocab_size;
  for (const auto id : gen.eos_token_ids)
    if (id >= vocab)
      throw InputError(fmt::format("{} {}: outside the vocabulary [0, {})",
                                   o.eos_flag->count() ? "--eos" : "eos id (from the model directory)", id, vocab));
  Sampler check_flags(gen.sampling);  // sampling settings are checked before the (slow) load
  const bool text_prompt = !o.request_flag->count();
  const auto model_dir = checkpoint_directory(opened.spec);
  const auto tokenizer = open_model_tokenizer(model_dir, o.tokenizer, text_prompt || !o.tokenizer.empty());
  const Request request = build_request(prompt_options(o), model_dir, tokenizer);
  load_model(opened, !o.quiet);  // a model may need its weights to build a prompt
  // The last new token is not fed back, so the cache holds prompt + max_new_tokens - 1.
  const Prompt prompt = prepare_prompt(*opened.model, request, opened.spec.max_context, o.max_new_tokens - 1);
  auto session = opened.model->new_session();

  TokenPrinter print(o.ids || !tokenizer ? nullptr : &*tokenizer);
  const auto start = Clock::now();
  Clock::time_point first = start;
  bool have_first = false;
  const auto ids = generate(*session, prompt, gen, [&](std::int64_t id) {
    if (!have_first) {
      first = Clock::now();
      have_first = true;
    }
    print(id);
  });
  const auto end = Clock::now();
  print.finish();
  if (!o.quiet) {
    const double prefill_s = std::chrono::duration<double>(first - start).count();
    const double decode_s = std::chrono::duration<double>(end - first).count();
    const auto decoded = ids.empty() ? 0 : ids.size() - 1;  // the first token comes out of prefill
    const bool at_eos = !ids.empty() && std::find(gen.eos_token_ids.begin(), gen.eos_token_ids.end(), ids.back()) !=
                                            gen.eos_token_ids.end();
    fmt::print(stderr,
               "generate: prefill {} tokens in {:.3f} s ({:.1f} tokens/s); decode {} tokens in {:.3f} s ({:.1f} "
               "tokens/s); stopped {}\n",
               prompt.ids.size(), prefill_s, prefill_s > 0 ? static_cast<double>(prompt.ids.size()) / prefill_s : 0.0,
               decoded, decode_s, decode_s > 0 ? static_cast<double>(decoded) / decode_s : 0.0,
               at_eos ? fmt::format("at eos {}", ids.back())
                      : fmt::format("after --max-new-tokens {}", gen.max_new_tokens));
  }
  if (!o.out.empty()) {
    const auto tensor = HostTensor::from_i64({static_cast<std::int64_t>(ids.size())}, ids);
    write_safetensors(o.out, {{"generated_ids", tensor.view()}}, trace_metadata(opened));
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, Action& run) {
  auto options = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand(
      "generate",
      "Generate text from a prompt, or tokens from a request. Greedy unless the model's generation_config.json "
      "samples or a sampling flag is given; unset sampling flags take generation_config.json's values, else "
      "transformers' GenerationConfig defaults (temperature 1, top_k 50, top_p 1)");
  add_model_options(*cmd, options->model);
  auto* prompt = options->prompt_flag = not_a_file(cmd->add_option("--prompt", options->prompt, "Prompt text"));
  auto* prompt_file = options->prompt_file_flag =
      input_file(cmd->add_option("--prompt-file", options->prompt_file, "Prompt text from a file (- for stdin)"),
                 "a prompt text file", {.stdin_ok = true});
  auto* request = options->request_flag =
      input_file(cmd->add_option("--request", options->request, "Request JSON with input_ids (- for stdin)"),
                 "a request JSON file", {.stdin_ok = true});
  auto* messages = options->messages_flag = input_file(
      cmd->add_option("--messages", options->messages,
                      "With --chat: a whole conversation, a JSON list of messages (- for stdin), rendered by the "
                      "model's chat template"),
      "a messages JSON file", {.stdin_ok = true});
  auto* input = options->input_flag = input_file(
      cmd->add_option("--input", options->input,
                      "Many sequences at once: JSONL, one prompt per line (a JSON string, or an object with prompt or "
                      "input_ids and optional max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, "
                      "frequency_penalty, presence_penalty, logprobs, seed); one JSON object "
                      "per line out, in input order (- for stdin)"),
      "a JSONL file", {.stdin_ok = true});
  input->excludes(prompt)->excludes(prompt_file)->excludes(request)->excludes(messages);
  cmd->add_option("--logprobs", options->logprobs,
                  "With --input: each new token's log-probability (of the model's raw logits) and the N likeliest "
                  "tokens' in each output line (a line's own logprobs field wins)")
      ->check(integer_in(0, 20))
      ->needs(input);
  cmd->add_option("--max-running", options->max_running, "With --input: sequences decoding at once")
      ->check(integer_in(1, 4096))
      ->needs(input);
  cmd->add_option("--max-batched-tokens", options->max_batched_tokens,
                  "With --input: rows per forward step (decode tokens plus prompt chunks)")
      ->check(integer_in(1, 1 << 20))
      ->needs(input);
  cmd->add_option("-c,--ctx-size", options->ctx_size,
                  "With --input: each sequence's context limit in tokens, prompt and new tokens together (default: "
                  "the model's max_position_embeddings; KV pages are taken as tokens arrive)")
      ->check(integer_in(1, std::int64_t{1} << 24))
      ->needs(input);
  cmd->add_option("--kv-cache-gb", options->kv_cache_gb,
                  "With --input: the KV page pool's size (default: room for --max-running sequences at the context "
                  "limit, within a quarter of host memory)")
      ->check(number_in(0.0, 1e6))
      ->needs(input);
  prompt->excludes(prompt_file)->excludes(request)->excludes(messages);
  prompt_file->excludes(request)->excludes(messages);
  request->excludes(messages);
  cmd->add_flag("--chat", options->chat,
                "Render the prompt through the model's chat template: --prompt as one user message, or the "
                "conversation of --messages");
  not_a_file(cmd->add_option("--system", options->system, "System message for --chat"));
  not_a_file(cmd->add_option("--set", options->template_settings,
                             "With --chat: a chat template variable KEY=JSON, e.g. enable_thinking=false (repeatable)"));
  not_a_file(cmd->add_option("--template", options->template_name,
                             "With --chat: a named chat template (tool_use, ...; as zoo template --template)"));
  input_file(cmd->add_option("--tokenizer", options->tokenizer, "tokenizer.json (default: the one in the model directory)"),
             "a tokenizer.json");
  cmd->add_flag("--ids", options->ids, "Print token ids, not text");
  // -n / --n-predict and --temp as llama-cli spells them, so its users are not told "did you mean".
  cmd->add_option("-n,--max-new-tokens,--n-predict", options->max_new_tokens, "Tokens to generate")
      ->check(integer_in(1, 1 << 20));
  options->temperature_flag =
      cmd->add_option("--temperature,--temp", options->temperature,
                      "Sampling temperature, 0: greedy (default: 0 unless generation_config.json samples or --top-k "
                      "or --top-p is given; then generation_config.json's, else 1)")
          ->check(number_in(0.0, 100.0))
          ->default_str("");
  options->top_k_flag = cmd->add_option("--top-k", options->top_k,
                                        "Keep the k most likely tokens, 0: off; giving it asks to sample "
                                        "(default: generation_config.json's, else 50)")
                            ->check(integer_in(0))
                            ->default_str("");
  options->top_p_flag = cmd->add_option("--top-p", options->top_p,
                                        "Nucleus sampling mass, 1: off; giving it asks to sample "
                                        "(default: generation_config.json's, else 1)")
                            ->check(number_in(0.0, 1.0))
                            ->default_str("");
  options->min_p_flag = cmd->add_option("--min-p", options->min_p,
                                        "Drop tokens less likely than this fraction of the likeliest, 0: off")
                            ->check(number_in(0.0, 1.0))
                            ->default_str("");
  options->repetition_flag =
      cmd->add_option("--repetition-penalty,--repeat-penalty", options->repetition_penalty,
                      "Divide positive logits (multiply negative ones) of every token already in the sequence, prompt "
                      "included, by this; 1: off (default: generation_config.json's, else 1)")
          ->check(number_in(1e-6, 100.0))
          ->default_str("");
  cmd->add_option("--frequency-penalty", options->frequency_penalty,
                  "Subtract this times each token's count among the generated tokens from its logit; 0: off")
      ->check(number_in(-2.0, 2.0));
  cmd->add_option("--presence-penalty", options->presence_penalty,
                  "Subtract this from the logit of every token already generated; 0: off")
      ->check(number_in(-2.0, 2.0));
  add_seed_option(*cmd, options->seed,
                  "Sampling seed; the same seed repeats a run (default, or -1: a random one, printed on stderr)");
  options->eos_flag = cmd->add_option("--eos", options->eos,
                                      "Stop after any of these token ids (comma-separated; default: eos_token_id of "
                                      "generation_config.json, else config.json)")
                          ->delimiter(',')
                          ->check(integer_in(0))
                          ->default_str("");
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Generate --max-new-tokens tokens whatever the model emits");
  output_file(cmd->add_option("--out", options->out,
                              "Write generated_ids (I64 [N]) to this safetensors file; with --input, the JSONL"),
              "a safetensors file");
  cmd->add_flag("-q,--quiet", options->quiet, "No progress output");
  cmd->callback([&run, options] { run = [options] { return run_generate(*options); }; });
}

}  // namespace zoo::cli
