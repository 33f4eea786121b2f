// POST /v1/audio/speech (speech_endpoint.hpp): the fields of OpenAI's speech API and sglang-omni's
// Higgs fields (docs/serving.md has the table), a SpeechSequence per request in the engine, the
// waveform decoded while it is generated.
#include "speech_endpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api_fields.hpp"
#include "base64.hpp"
#include "zoo/code_stream.hpp"
#include "zoo/encoder_input.hpp"
#include "zoo/error.hpp"
#include "zoo/server/speech_text.hpp"
#include "zoo/sound_file.hpp"

namespace zoo::server {

namespace {

using Frames = std::vector<std::vector<std::int64_t>>;

// Words per piece of a long input (sglang-omni's figure).
constexpr std::size_t kSpeechPieceWords = 60;

// The speech fields: implemented (OpenAI's, then sglang-omni's Higgs fields), refused with `param`
// unless they change nothing (speed 1.0, empty instructions).
const std::set<std::string> kSpeechFields = {"model", "input", "voice", "response_format", "stream_format", "speed",
                                              "instructions", "references", "ref_audio", "ref_text", "temperature",
                                              "top_k", "top_p", "seed", "max_new_tokens", "user"};

struct AudioFormat {
  std::string name, content_type;
  std::optional<SoundFormat> file;  // nullopt: raw PCM16, streamed as it is decoded
};

AudioFormat audio_format(const json& body) {
  const json* v = field(body, "response_format");
  const std::string name = v ? (v->is_string() ? v->get<std::string>() : std::string("?")) : "mp3";
  if (v && !v->is_string()) throw ApiError(400, "'response_format' must be a string", "response_format", "invalid_type");
  if (name == "mp3") return {name, "audio/mpeg", SoundFormat::Mp3};
  if (name == "opus") return {name, "audio/ogg", SoundFormat::OggOpus};
  if (name == "flac") return {name, "audio/flac", SoundFormat::Flac};
  if (name == "wav") return {name, "audio/wav", SoundFormat::Wav};
  if (name == "pcm") return {name, "audio/pcm", std::nullopt};
  throw ApiError(400, fmt::format("'response_format' '{}' is not one of mp3, opus, flac, wav, pcm", shown(name)),
                 "response_format");
}

std::string string_field(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return {};
  if (!v->is_string()) throw ApiError(400, fmt::format("'{}' must be a string", name), name, "invalid_type");
  return v->get<std::string>();
}

// Audio as a request carries it: base64, or a data URL holding base64.
std::string audio_bytes(const json& value, const char* param) {
  if (!value.is_string()) throw ApiError(400, fmt::format("'{}' must be base64 audio (or a data: URL)", param), param, "invalid_type");
  std::string_view text = value.get_ref<const std::string&>();
  if (text.starts_with("data:")) {
    const auto comma = text.find(',');
    if (comma == std::string_view::npos || text.substr(0, comma).find(";base64") == std::string_view::npos)
      throw ApiError(400, fmt::format("'{}': a data URL must hold base64 (data:audio/wav;base64,...)", param), param);
    text.remove_prefix(comma + 1);
  }
  auto bytes = base64_decode(text);
  if (!bytes || bytes->empty()) throw ApiError(400, fmt::format("'{}' is not valid base64 audio", param), param);
  return std::move(*bytes);
}

// The voice to clone: given audio (references or ref_audio), a --voices name, or none.
struct VoiceChoice {
  std::string audio;  // request audio still to encode
  std::string param;  // the field it came from
  Frames frames;      // a served voice's frames
  std::string text;
};

VoiceChoice voice_choice(const json& body, const ServedModel& model) {
  VoiceChoice choice;
  const json* references = field(body, "references");
  const json* ref_audio = field(body, "ref_audio");
  if (references && ref_audio)
    throw ApiError(400, "give the reference as 'references' or as 'ref_audio', not both", "references");
  if (references) {
    if (!references->is_array() || references->size() != 1 || !(*references)[0].is_object())
      throw ApiError(400, "'references' must be a list of one object {\"audio\": base64, \"text\": transcript}",
                     "references", "invalid_type");
    const json& r = (*references)[0];
    const json* audio = field(r, "audio");
    if (!audio) throw ApiError(400, "'references[0].audio' is required", "references");
    choice.audio = audio_bytes(*audio, "references");
    choice.param = "references";
    choice.text = string_field(r, "text");
  } else if (ref_audio) {
    choice.audio = audio_bytes(*ref_audio, "ref_audio");
    choice.param = "ref_audio";
    choice.text = string_field(body, "ref_text");
  } else if (field(body, "ref_text")) {
    throw ApiError(400, "'ref_text' needs 'ref_audio' (the voice it transcribes)", "ref_text");
  }
  if (!choice.audio.empty() && !model.encoder)
    throw ApiError(400, "this model's checkpoint has no codec encoder: clone voices served with --voices instead",
                   choice.param);
  const std::string voice = string_field(body, "voice");
  if (choice.audio.empty() && !voice.empty() && (voice != "default" || model.voices.contains(voice))) {
    const auto it = model.voices.find(voice);
    if (it == model.voices.end()) {
      std::string names;
      for (const auto& [name, v] : model.voices) names += (names.empty() ? "" : ", ") + name;
      throw ApiError(400,
                     fmt::format("unknown voice '{}'; this server has {}", shown(voice),
                                 names.empty() ? "no voices (zoo serve --voices DIR), only 'default'"
                                               : "'default' and " + names),
                     "voice");
    }
    choice.frames = it->second.frames;
    choice.text = it->second.text;
  }
  return choice;
}

// One request: lives on its audio thread once started (the engine thread only hands it frames). A
// long input is several pieces (split_speech_text), generated at once as separate sequences with the
// same voice and seeds seed, seed + 1, ...; their frames go to one CodeStream in order, so the
// waveform runs on across the joins.
class SpeechJob : public std::enable_shared_from_this<SpeechJob> {
 public:
  SpeechJob(SpeechContext context, std::shared_ptr<Responder> responder, AudioFormat format, bool sse)
      : c_(context), responder_(std::move(responder)), format_(std::move(format)), sse_(sse),
        started_(std::chrono::steady_clock::now()) {}

  // Audio thread: the reference encoded (or found), every piece's sequence started and queued.
  void start(SpeechRequest request, const std::vector<std::string>& texts, VoiceChoice voice) {
    try {
      if (!voice.audio.empty()) {
        request.reference_codes = encode_reference(voice);
        request.reference_label = voice.param;
      } else {
        request.reference_codes = std::move(voice.frames);
      }
      request.reference_text = voice.text;
      for (std::size_t i = 0; i < texts.size(); ++i) {
        SpeechRequest piece = request;
        piece.text = texts[i];
        piece.seed = request.seed + i;
        try {
          pieces_.push_back({c_.model.speech->start_speech(piece)});
        } catch (const InputError& e) {
          const bool length = std::string(e.what()).find("frames") != std::string::npos;
          throw ApiError(400, texts.size() > 1 ? fmt::format("input piece {} of {}: {}", i + 1, texts.size(), e.what())
                                               : std::string(e.what()),
                         length ? "max_new_tokens" : "input");
        }
      }
      stream_ = std::make_unique<CodeStream>(*c_.model.decoder, [this](std::span<const float> samples) { deliver(samples); });
      for (Piece& piece : pieces_) piece.ticket = c_.worker.ticket();
      // Weak: the responder keeps its callback, and the job must not keep itself alive through it.
      responder_->on_disconnect([weak = weak_from_this()] {
        const auto self = weak.lock();
        if (!self || self->over_.exchange(true)) return;
        ++self->c_.counters.cancelled;
        self->cancel_all();
      });
      for (std::size_t i = 0; i < pieces_.size(); ++i)
        if (!c_.worker.submit(pieces_[i].ticket, engine::DrivenRequest{pieces_[i].sequence},
                              std::make_shared<Sink>(shared_from_this(), i))) {
          cancel_all();
          const auto [status, message] = c_.worker.refusal();
          throw ApiError(status, message, "", status == 429 ? "queue_full" : "unavailable",
                         status == 429 ? "rate_limit_error" : "server_error");
        }
    } catch (const ApiError& e) {
      fail(e);
    } catch (const std::exception& e) {
      fail(ApiError(500, e.what(), "", "internal_error", "server_error"));
    }
  }

 private:
  struct Piece {
    std::shared_ptr<SpeechSequence> sequence;
    std::int64_t ticket = -1;
    Frames pending;  // frames that came before the pieces ahead of it were out
    bool done = false;
    std::int64_t prompt_tokens = 0, steps = 0;
  };

  // The engine's side (its thread): frames and the end go to the job's audio thread.
  struct Sink : RequestSink {
    std::shared_ptr<SpeechJob> job;
    std::size_t piece;
    Sink(std::shared_ptr<SpeechJob> j, std::size_t p) : job(std::move(j)), piece(p) {}
    void token(const SampledToken&) override {}
    void picked() override {
      const SpeechProgress progress = job->pieces_[piece].sequence->progress();
      if (progress.new_frames.empty()) return;
      Frames frames(progress.new_frames.begin(), progress.new_frames.end());
      job->c_.audio.post([job = job, piece = piece, frames = std::move(frames)] { job->push(piece, frames); });
    }
    void done(const engine::Completion&) override {
      const SpeechResult result = job->pieces_[piece].sequence->result();
      job->c_.audio.post([job = job, piece = piece, prompt = result.prompt_tokens, steps = result.steps] {
        job->finish(piece, prompt, steps);
      });
    }
    void failed(int status, const std::string& message) override {
      job->c_.audio.post([job = job, status, message] {
        job->cancel_all();
        job->fail(ApiError(status, message, "", status == 504 ? "timeout" : status == 503 ? "unavailable" : "",
                           status >= 500 ? "server_error" : "invalid_request_error"));
      });
    }
  };

  Frames encode_reference(const VoiceChoice& voice) {
    if (auto cached = c_.references.find(voice.audio)) return std::move(*cached);
    const std::string name = fmt::format("'{}' audio", voice.param);
    EncodedFrames encoded;
    try {
      SoundFileContents sound =
          decode_sound({reinterpret_cast<const unsigned char*>(voice.audio.data()), voice.audio.size()}, name);
      const std::vector<float> samples = encoder_input(std::move(sound), *c_.model.encoder, name);
      encoded = c_.model.encoder->encode(samples, name);
    } catch (const InputError& e) {
      throw ApiError(400, e.what(), voice.param);
    }
    Frames frames(static_cast<std::size_t>(encoded.frames));
    for (std::int64_t t = 0; t < encoded.frames; ++t)
      frames[static_cast<std::size_t>(t)].assign(encoded.codes.begin() + t * encoded.num_codebooks,
                                                 encoded.codes.begin() + (t + 1) * encoded.num_codebooks);
    c_.references.add(voice.audio, frames);
    return frames;
  }

  void cancel_all() {
    for (const Piece& piece : pieces_)
      if (piece.ticket >= 0) c_.worker.cancel(piece.ticket);
  }

  void push(std::size_t piece, const Frames& frames) {
    if (over_) return;
    if (piece != emit_) {  // a piece ahead is still speaking: keep these for later
      Frames& pending = pieces_[piece].pending;
      pending.insert(pending.end(), frames.begin(), frames.end());
      return;
    }
    try {
      stream_->push(frames);
    } catch (const std::exception& e) {
      cancel_all();
      stop_with(e.what());
    }
  }

  void finish(std::size_t index, std::int64_t prompt_tokens, std::int64_t steps) {
    if (over_) return;
    pieces_[index].done = true;
    pieces_[index].prompt_tokens = prompt_tokens;
    pieces_[index].steps = steps;
    try {
      // The pieces done in order leave the stream to the next one, whose frames so far go in now.
      while (emit_ < pieces_.size() && pieces_[emit_].done) {
        if (++emit_ < pieces_.size()) {
          stream_->push(pieces_[emit_].pending);
          pieces_[emit_].pending.clear();
        }
      }
      if (emit_ < pieces_.size()) return;
      stream_->finish();
      std::int64_t prompt = 0, out = 0;
      for (const Piece& piece : pieces_) {
        prompt += piece.prompt_tokens;
        out += piece.steps;
      }
      if (format_.file) {
        const auto bytes = encode_sound(samples_, c_.model.decoder->sample_rate(), *format_.file, "the speech");
        responder_->reply(200, format_.content_type, std::string(bytes.begin(), bytes.end()),
                          {{"X-Sample-Rate", std::to_string(c_.model.decoder->sample_rate())}});
      } else {
        begin();
        if (sse_) {
          ojson usage{{"input_tokens", prompt}, {"output_tokens", out}, {"total_tokens", prompt + out}};
          responder_->write("data: " + dump(ojson{{"type", "speech.audio.done"}, {"usage", usage}}) + "\n\n");
        }
        responder_->end();
      }
      over_ = true;
      ++c_.counters.finished;
      log(200, "");
    } catch (const std::exception& e) {
      stop_with(e.what());
    }
  }

  void fail(const ApiError& e) {
    if (over_.exchange(true)) return;
    ++c_.counters.failed;
    log(e.status, e.what());
    if (!begun_) return reply_error(*responder_, e);
    stop_stream(e.what());
  }

  // A failure after the answer began: an SSE stream gets an error event; raw audio can only end.
  void stop_with(const std::string& message) { fail(ApiError(500, message, "", "internal_error", "server_error")); }
  void stop_stream(const std::string& message) {
    if (sse_) responder_->write("data: " + dump(ojson{{"type", "error"}, {"error", {{"message", message}}}}) + "\n\n");
    responder_->end();
  }

  void begin() {
    if (begun_) return;
    begun_ = true;
    responder_->begin_stream(200, sse_ ? "text/event-stream" : format_.content_type,
                             {{"X-Sample-Rate", std::to_string(c_.model.decoder->sample_rate())}});
  }

  // A decoded chunk: PCM streams go out now; file formats are encoded whole at the end.
  void deliver(std::span<const float> samples) {
    c_.counters.audio_samples += static_cast<std::int64_t>(samples.size());
    samples_out_ += static_cast<std::int64_t>(samples.size());
    if (format_.file) {
      samples_.insert(samples_.end(), samples.begin(), samples.end());
      return;
    }
    const std::vector<unsigned char> pcm = pcm16_le(samples);
    begin();
    if (sse_)
      responder_->write("data: " +
                        dump(ojson{{"type", "speech.audio.delta"}, {"audio", base64_encode(pcm.data(), pcm.size())}}) +
                        "\n\n");
    else
      responder_->write(std::string(pcm.begin(), pcm.end()));
  }

  // One line per request, as completions have (what it quotes escaped).
  void log(int status, const std::string& error) const {
    std::int64_t steps = 0;
    for (const Piece& piece : pieces_) steps += piece.steps;
    fmt::print(stderr, "zoo serve: POST /v1/audio/speech {} {} pieces={} frames={} samples={} {:.3f}s{}{}\n", status,
               format_.name, pieces_.size(), steps, samples_out_,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count(),
               error.empty() ? "" : " ", escape_text(error, 400));
  }

  SpeechContext c_;
  std::shared_ptr<Responder> responder_;
  AudioFormat format_;
  bool sse_;
  std::vector<Piece> pieces_;  // filled in start(), before any sink exists
  std::size_t emit_ = 0;       // the piece whose frames go to the stream now
  std::unique_ptr<CodeStream> stream_;
  std::vector<float> samples_;  // file formats: the whole waveform
  bool begun_ = false;          // audio thread
  std::atomic<bool> over_{false};
  std::chrono::steady_clock::time_point started_;
  std::int64_t samples_out_ = 0;  // audio thread
};

}  // namespace

void speech_endpoint(const HttpRequest& request, const std::shared_ptr<Responder>& responder, SpeechContext context) {
  const ServedModel& model = context.model;
  const json body = parse_json_body(request.body);
  for (const auto& [key, value] : body.items())
    if (!kSpeechFields.contains(key))
        throw ApiError(400, fmt::format("unknown field '{}' for /v1/audio/speech", shown(key)), key,
                     "unknown_parameter");
  if (const std::string name = string_field(body, "model"); !name.empty() && name != model.name)
    throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", shown(name), model.name),
                   "model", "model_not_found");
  if (!model.speech || !model.decoder)
    throw ApiError(400, fmt::format("the model '{}' does not synthesize speech", model.name), "model", "unsupported");
  if (!model.tokenizer) throw ApiError(400, "this model has no tokenizer for the input text", "input", "unsupported");
  const json* input = field(body, "input");
  if (!input || !input->is_string() || input->get_ref<const std::string&>().empty())
    throw ApiError(400, "'input' must be a non-empty string", "input", input ? "invalid_type" : "missing");
  if (number_field(body, "speed", 1.0, 0.25, 4.0) != 1.0)
    throw ApiError(400, "'speed' other than 1.0 is not implemented", "speed", "unsupported_value");
  if (!string_field(body, "instructions").empty())
    throw ApiError(400, "'instructions' is not implemented (it would change the speech)", "instructions",
                   "unsupported_value");
  AudioFormat format = audio_format(body);
  const std::string stream_format = string_field(body, "stream_format");
  if (!stream_format.empty() && stream_format != "audio" && stream_format != "sse")
    throw ApiError(400, "'stream_format' must be 'audio' or 'sse'", "stream_format");
  const bool sse = stream_format == "sse";
  if (sse && format.file)
    throw ApiError(400, "server-sent events carry 'pcm' audio: use response_format pcm with stream_format sse",
                   "stream_format");

  SpeechRequest speech;
  speech.text = input->get<std::string>();
  const Tokenizer* tokenizer = model.tokenizer;
  speech.encode = [tokenizer](std::string_view s) { return tokenizer->encode(s); };
  speech.token_id = [tokenizer](std::string_view s) { return tokenizer->token_to_id(s); };
  speech.temperature = static_cast<float>(number_field(body, "temperature", 0.8, 0.0, 100.0));
  speech.top_k = static_cast<int>(int_field(body, "top_k", 50, 0, 1 << 20));
  speech.top_p = static_cast<float>(number_field(body, "top_p", 1.0, 1e-6, 1.0));
  speech.max_steps = int_field(body, "max_new_tokens", 2048, 1, std::int64_t{1} << 24);
  if (field(body, "seed")) {
    speech.seed = static_cast<std::uint64_t>(int_field(body, "seed", 0, 0, INT64_MAX));
  } else {
    std::random_device random;
    speech.seed = (static_cast<std::uint64_t>(random()) << 32) ^ random();
  }
  VoiceChoice voice = voice_choice(body, model);
  // A long input in pieces of whole sentences (at most 64 of them: the body cap bounds it anyway).
  std::vector<std::string> pieces = engine::split_speech_text(speech.text, kSpeechPieceWords);
  if (pieces.empty()) throw ApiError(400, "'input' holds no words", "input");
  if (pieces.size() > 64)
    throw ApiError(400, fmt::format("'input' is {} pieces of about {} words; at most 64 per request", pieces.size(),
                                    kSpeechPieceWords),
                   "input");
  auto job = std::make_shared<SpeechJob>(context, responder, std::move(format), sse);
  context.audio.post([job, speech = std::move(speech), pieces = std::move(pieces), voice = std::move(voice)]() mutable {
    job->start(std::move(speech), pieces, std::move(voice));
  });
}

}  // namespace zoo::server
