#include "zoo/generation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "zoo/error.hpp"
#include "zoo/random.hpp"

namespace zoo {

Sampler::Sampler(SamplingOptions options) : options_(options), state_(options.seed) {
  // These come straight from command-line flags, hence InputErrors named after the flags.
  if (!(options_.temperature >= 0) || !std::isfinite(options_.temperature))
    throw InputError(fmt::format("--temperature: must be a finite number >= 0, got {}", options_.temperature));
  if (options_.top_k < 0) throw InputError(fmt::format("--top-k: must be >= 0, got {}", options_.top_k));
  if (!(options_.top_p >= 0 && options_.top_p <= 1))
    throw InputError(fmt::format("--top-p: must be within [0, 1], got {}", options_.top_p));
  if (!(options_.min_p >= 0 && options_.min_p <= 1))
    throw InputError(fmt::format("--min-p: must be within [0, 1], got {}", options_.min_p));
  if (options_.temperature == 0.0f && options_.min_p > 0.0f)
    throw InputError(fmt::format("--min-p {}: has no effect under greedy decoding (temperature 0); give --temperature "
                                 "to sample",
                                 options_.min_p));
  if (!(options_.repetition_penalty > 0 && options_.repetition_penalty <= 100))
    throw InputError(fmt::format("--repetition-penalty: must be within (0, 100], got {}", options_.repetition_penalty));
  if (!(options_.frequency_penalty >= -2 && options_.frequency_penalty <= 2))
    throw InputError(fmt::format("--frequency-penalty: must be within [-2, 2], got {}", options_.frequency_penalty));
  if (!(options_.presence_penalty >= -2 && options_.presence_penalty <= 2))
    throw InputError(fmt::format("--presence-penalty: must be within [-2, 2], got {}", options_.presence_penalty));
  for (std::size_t i = 0; i < options_.logit_bias.size(); ++i) {
    const auto& [id, bias] = options_.logit_bias[i];
    if (id < 0 || (i > 0 && id <= options_.logit_bias[i - 1].first))
      throw InputError(fmt::format("logit_bias: token ids must be distinct and >= 0, in ascending order (got {})", id));
    if (!(bias >= -100 && bias <= 100))
      throw InputError(fmt::format("logit_bias: the bias of token {} must be within [-100, 100], got {}", id, bias));
  }
  // Greedy decoding takes the argmax, which top-k and top-p never change: a filter given without a
  // temperature would be silently ignored, so say so instead.
  if (options_.temperature == 0.0f && options_.top_k > 0)
    throw InputError(fmt::format("--top-k {}: has no effect under greedy decoding (temperature 0); give --temperature "
                                 "to sample",
                                 options_.top_k));
  if (options_.temperature == 0.0f && options_.top_p < 1.0f)
    throw InputError(fmt::format("--top-p {}: has no effect under greedy decoding (temperature 0); give --temperature "
                                 "to sample",
                                 options_.top_p));
}

SampleRequest Sampler::settings(std::int64_t output_start) const {
  return SampleRequest{.temperature = options_.temperature,
                       .top_k = options_.top_k,
                       .top_p = options_.top_p,
                       .u = 0.0,
                       .min_p = options_.min_p,
                       .repetition_penalty = options_.repetition_penalty,
                       .frequency_penalty = options_.frequency_penalty,
                       .presence_penalty = options_.presence_penalty,
                       .output_start = output_start,
                       .logit_bias = options_.logit_bias};
}

SampleRequest Sampler::request(std::int64_t output_start) {
  SampleRequest r = settings(output_start);
  if (r.temperature != 0.0f) r.u = uniform01(state_);
  return r;
}

bool Sampler::penalized() const { return settings(0).penalized(); }

std::int64_t Sampler::next(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("Sampler::next: empty logits");
  return sample_logits(logits, request(), scratch_).id;
}

std::vector<std::int64_t> generate(Session& session, const Prompt& prompt, const GenerationOptions& options,
                                   const std::function<void(std::int64_t)>& on_token) {
  if (prompt.ids.empty()) throw std::invalid_argument("generate: the prompt has no tokens");
  std::vector<std::int64_t> out;
  if (options.max_new_tokens <= 0) return out;
  out.reserve(static_cast<std::size_t>(options.max_new_tokens));

  using Pick = GenerationOptions::Pick;
  if (options.pick == Pick::None && !options.feed)
    throw std::invalid_argument("generate: Pick::None needs a feed (nothing is picked to feed back)");
  Sampler sampler(options.sampling);
  // Penalties read the sequence's own tokens, which a session does not keep: the host applies
  // them to the returned row (a Runner applies them where its logits are).
  const bool penalized = sampler.penalized();
  std::vector<std::int32_t> sequence;
  if (penalized) sequence.assign(prompt.ids.begin(), prompt.ids.end());
  std::vector<float> row;
  session.reset();
  // One draw per new token, whoever picks it: the same seed gives the same ids either way.
  SampleRequest draw;
  // Logits, or the token the session picked from them where they were computed.
  auto outputs = [&] {
    if (options.pick == Pick::None) return OutputRequest{};
    draw = sampler.request(static_cast<std::int64_t>(prompt.ids.size()));
    OutputRequest asked{.hidden = false, .logits = true, .all_positions = false, .sample = draw};
    if (options.pick == Pick::Host || penalized) asked.sample.reset();
    return asked;
  };
  // The host's pick from the last logits row.
  auto host_pick = [&](const ForwardResult& result) {
    const HostTensor& logits = result.logits;
    if (logits.empty() || logits.shape().empty() || logits.shape().back() <= 0 || logits.dtype() != DType::F32)
      throw std::runtime_error(fmt::format("generate: the model returned no float32 logits (shape {})",
                                           shape_str(logits.shape())));
    if (logits.shape().size() != 2)
      throw std::runtime_error(fmt::format("generate: the model returned logits of shape {}, not [rows, vocab]",
                                           shape_str(logits.shape())));
    const auto vocab = static_cast<std::size_t>(logits.shape().back());
    const auto all = logits.span<float>();
    const auto last = all.subspan(all.size() - vocab);
    if (!penalized) return sample_logits(last, draw);
    row.assign(last.begin(), last.end());
    apply_penalties(row, sequence, draw);
    SampledToken picked = sample_logits(row, draw);
    picked.logit = last[static_cast<std::size_t>(picked.id)];
    return picked;
  };
  ForwardResult result = session.forward(prompt.step(outputs()));
  std::int64_t fed = prompt.ids.back();
  while (true) {
    std::int64_t token;
    if (options.pick == Pick::None) {
      token = options.feed(fed);
    } else {
      const SampledToken picked = result.sampled ? *result.sampled : host_pick(result);
      // NaN or +inf logits mean the forward pass is broken (bad weights, overflow in a low-precision
      // dtype); a token drawn from them would be noise presented as output. -inf alone is a masked
      // token, fine unless every token is masked.
      if (!picked.valid())
        throw ValidationError(fmt::format(
            "generate: the model returned non-finite logits for new token {} ({}); the weights or the compute dtype "
            "are broken",
            out.size(),
            picked.bad_index >= 0 ? fmt::format("{} at id {}", picked.bad_value, picked.bad_index)
                                  : "every one is -inf"));
      token = picked.id;
    }
    out.push_back(token);
    if (on_token) on_token(token);
    if (std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), token) != options.eos_token_ids.end()) break;
    if (static_cast<int>(out.size()) >= options.max_new_tokens) break;
    // The token just produced (or what `feed` makes of it) is fed back; no forward pass after the
    // last one is needed.
    fed = options.feed && options.pick != Pick::None ? options.feed(token) : token;
    if (penalized) sequence.push_back(static_cast<std::int32_t>(fed));
    result = session.forward(ForwardStep{std::span<const std::int64_t>(&fed, 1), {}, {}, outputs()});
  }
  return out;
}

}  // namespace zoo
