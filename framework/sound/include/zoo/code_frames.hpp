#pragma once
// Files of discrete code frames [frames, codebooks] (what a codec decoder reads, what text to
// speech writes): JSON {"codes": [[...], ...]} or a plain [[...], ...] array, or safetensors with
// an I64 / I32 / I16 tensor named "codes" (or the file's only tensor). Chosen by content for
// reading (a safetensors file starts with its header length, JSON with '{' or '['), by extension
// for writing (".safetensors", else JSON). The one reader and writer of such files.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "zoo/tensor.hpp"

namespace zoo {

// Returns I64 [frames, columns]. `columns` > 0 requires that many codes per frame. InputError
// naming the file on anything malformed: no frames, ragged or non-integer rows, negative codes,
// not a regular file (read as every input is: zoo/input_file.hpp).
HostTensor load_code_frames(const std::filesystem::path& file, std::int64_t columns = 0);

// Writes I64/I32 [frames, columns] codes; safetensors (tensor "codes", I64) when the name ends in
// ".safetensors", else JSON {"codes": [[...], ...]} with one frame per line.
// Written through a temporary file and a rename (zoo/output_file.hpp).
void write_code_frames(const std::filesystem::path& file, const TensorView& codes);

// Frames as rows (what Model::synthesize takes and returns) and back. Rows must not be ragged.
HostTensor code_frames_tensor(const std::vector<std::vector<std::int64_t>>& frames);
std::vector<std::vector<std::int64_t>> code_frames_rows(const TensorView& codes);

}  // namespace zoo
