#pragma once
// Files of discrete code frames [frames, codebooks] (what a codec decoder reads): JSON
// {"codes": [[...], ...]} or a plain [[...], ...] array, or safetensors with an I64 / I32 tensor
// named "codes". Chosen by content for reading (a safetensors file starts with its header length,
// JSON with '{' or '['), by extension for writing (".safetensors", else JSON).
#include <cstdint>
#include <filesystem>

#include "zoo/tensor.hpp"

namespace zoo {

// Returns I64 [frames, columns]. `columns` > 0 requires that many codes per frame. InputError
// naming the file on anything malformed: no frames, ragged or non-integer rows, negative codes.
HostTensor load_code_frames(const std::filesystem::path& file, std::int64_t columns = 0);

// Writes I64/I32 [frames, columns] codes; safetensors (tensor "codes", I64) when the name ends in
// ".safetensors", else JSON {"codes": [[...], ...]} with one frame per line.
void write_code_frames(const std::filesystem::path& file, const TensorView& codes);

}  // namespace zoo
