#include "zoo/codes_file.hpp"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "zoo/error.hpp"
#include "zoo/safetensors.hpp"

namespace zoo {
namespace {

bool is_safetensors(const std::filesystem::path& file) { return file.extension() == ".safetensors"; }

void check_rectangular(const CodeFrames& frames, const std::filesystem::path& file) {
  if (frames.empty()) throw InputError(fmt::format("{}: holds no frames", file.string()));
  for (std::size_t t = 0; t < frames.size(); ++t) {
    if (frames[t].size() != frames.front().size() || frames[t].empty())
      throw InputError(fmt::format("{}: frame {} has {} codes, frame 0 has {}", file.string(), t, frames[t].size(),
                                   frames.front().size()));
    for (std::size_t c = 0; c < frames[t].size(); ++c)
      if (frames[t][c] < 0)
        throw InputError(fmt::format("{}: code [{}][{}] = {} is negative", file.string(), t, c, frames[t][c]));
  }
}

CodeFrames read_json(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("{}: not JSON: {}", file.string(), e.what()));
  }
  if (doc.is_object()) {
    if (!doc.contains("codes") || doc.size() != 1)
      throw InputError(fmt::format("{}: expected an array of frames or an object with only \"codes\"", file.string()));
    doc = doc.at("codes");
  }
  if (!doc.is_array()) throw InputError(fmt::format("{}: expected an array of frames [T][codebooks]", file.string()));
  CodeFrames frames;
  for (std::size_t t = 0; t < doc.size(); ++t) {
    if (!doc[t].is_array()) throw InputError(fmt::format("{}: frame {} is not an array of codes", file.string(), t));
    std::vector<std::int64_t> row;
    for (std::size_t c = 0; c < doc[t].size(); ++c) {
      if (!doc[t][c].is_number_integer())
        throw InputError(fmt::format("{}: code [{}][{}] is not an integer", file.string(), t, c));
      row.push_back(doc[t][c].get<std::int64_t>());
    }
    frames.push_back(std::move(row));
  }
  return frames;
}

CodeFrames read_safetensors(const std::filesystem::path& file) {
  const auto st = SafetensorsFile::open(file);
  const SafetensorsEntry* entry = st->find("codes");
  if (!entry) {
    if (st->entries().size() != 1)
      throw InputError(fmt::format("{}: no tensor 'codes' and {} tensors (want one)", file.string(), st->entries().size()));
    entry = &st->entries().front();
  }
  if (entry->shape.size() != 2)
    throw InputError(fmt::format("{}: tensor '{}' has {} dimensions, want [T, codebooks]", file.string(), entry->name,
                                 entry->shape.size()));
  if (entry->dtype != DType::I64 && entry->dtype != DType::I32 && entry->dtype != DType::I16)
    throw InputError(fmt::format("{}: tensor '{}' is {}, want I64, I32 or I16", file.string(), entry->name,
                                 dtype_name(entry->dtype)));
  const TensorView view = st->view(*entry);
  const auto* bytes = static_cast<const std::byte*>(view.data);
  const std::size_t width = dtype_size(entry->dtype);
  CodeFrames frames(static_cast<std::size_t>(entry->shape[0]), std::vector<std::int64_t>(static_cast<std::size_t>(entry->shape[1])));
  std::size_t i = 0;
  for (auto& row : frames)
    for (auto& code : row) {
      const std::byte* p = bytes + (i++) * width;  // payload may be unaligned: memcpy
      if (entry->dtype == DType::I64) std::memcpy(&code, p, 8);
      else if (entry->dtype == DType::I32) { std::int32_t v; std::memcpy(&v, p, 4); code = v; }
      else { std::int16_t v; std::memcpy(&v, p, 2); code = v; }
    }
  return frames;
}

}  // namespace

CodeFrames read_codes_file(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file)) throw InputError(fmt::format("{}: no such file", file.string()));
  CodeFrames frames = is_safetensors(file) ? read_safetensors(file) : read_json(file);
  check_rectangular(frames, file);
  return frames;
}

void write_codes_file(const std::filesystem::path& file, const CodeFrames& frames) {
  const std::size_t K = frames.empty() ? 0 : frames.front().size();
  for (const auto& row : frames)
    if (row.size() != K) throw std::invalid_argument("write_codes_file: ragged frames");
  if (is_safetensors(file)) {
    std::vector<std::int64_t> flat;
    for (const auto& row : frames) flat.insert(flat.end(), row.begin(), row.end());
    const auto tensor = HostTensor::from_i64({static_cast<std::int64_t>(frames.size()), static_cast<std::int64_t>(K)}, flat);
    write_safetensors(file, {{"codes", tensor.view()}});
    return;
  }
  std::ofstream out(file, std::ios::binary);
  if (!out) throw InputError(fmt::format("{}: cannot write", file.string()));
  out << "[";
  for (std::size_t t = 0; t < frames.size(); ++t) out << (t ? ",\n " : "\n ") << nlohmann::json(frames[t]).dump();
  out << "\n]\n";
  if (!out) throw InputError(fmt::format("{}: write failed", file.string()));
}

}  // namespace zoo
