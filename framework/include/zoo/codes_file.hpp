#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

namespace zoo {

// Codec frames [T, codebooks] on disk, by extension: `.safetensors` holds one integer tensor
// (I64, I32 or I16; named `codes`, or the file's only tensor) of shape [T, codebooks]; anything
// else is JSON, either a bare array of rows or an object {"codes": rows}. Rows must all have the
// same length; values must be non-negative integers (the model checks its own range).
using CodeFrames = std::vector<std::vector<std::int64_t>>;

// InputError naming the file (and the row and column) when it is unreadable or malformed.
CodeFrames read_codes_file(const std::filesystem::path& file);

// Writes JSON (one row per line) or safetensors (`codes`, I64 [T, codebooks]) by the same rule.
void write_codes_file(const std::filesystem::path& file, const CodeFrames& frames);

}  // namespace zoo
