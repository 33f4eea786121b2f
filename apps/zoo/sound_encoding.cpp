// Shared by `zoo tts` and `zoo bench` (sound_encoding.hpp).
#include "sound_encoding.hpp"

#include <fmt/format.h>

#include <cmath>

#include "run_helpers.hpp"
#include "zoo/error.hpp"
#include "zoo/encoder_input.hpp"
#include "zoo/sound_file.hpp"

namespace zoo::cli {

CodeDecoder& code_decoder_of(OpenedModel& opened) {
  Codec* codec = opened.model->extension<Codec>();
  CodeDecoder* decoder = codec ? codec->code_decoder() : nullptr;
  if (!decoder)
    throw InputError(fmt::format("{}: the {} plugin's model has no codes-to-waveform decoder", opened.spec.file.string(),
                                 opened.model->info().plugin));
  return *decoder;
}

void load_code_decoder(OpenedModel& opened, CodeDecoder& decoder) {
  check_part_load_plan(opened, decoder.requirements(), "decoder");
  decoder.load();
}

CodeEncoder& code_encoder_of(OpenedModel& opened) {
  Codec* codec = opened.model->extension<Codec>();
  CodeEncoder* encoder = codec ? codec->code_encoder() : nullptr;
  if (!encoder)
    throw InputError(fmt::format("{}: the checkpoint has no waveform-to-codes encoder (the {} plugin's model holds none "
                                 "here); give the voice as --ref-codes instead",
                                 opened.spec.file.string(), opened.model->info().plugin));
  return *encoder;
}

void load_code_encoder(OpenedModel& opened, CodeEncoder& encoder) {
  check_part_load_plan(opened, encoder.requirements(), "encoder");
  encoder.load();
}

std::vector<float> read_reference_sound(const std::string& command, const std::string& flag, const std::string& path,
                                        const CodeEncoder& encoder, bool quiet) {
  std::string how;
  const std::string name = fmt::format("{} {}", flag, path);
  std::vector<float> samples = encoder_input(read_sound_file_downmixed(path), encoder, name, &how);
  if (!quiet) fmt::print(stderr, "{}: {}: {}\n", command, name, how);
  return samples;
}

}  // namespace zoo::cli
