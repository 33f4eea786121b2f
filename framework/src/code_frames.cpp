#include "zoo/code_frames.hpp"

#include <fmt/format.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "zoo/error.hpp"
#include "zoo/safetensors.hpp"

namespace zoo {
namespace {

HostTensor check_and_pack(const std::vector<std::vector<std::int64_t>>& rows, std::int64_t columns,
                          const std::string& file) {
  if (rows.empty()) throw InputError(fmt::format("{}: no code frames", file));
  const auto width = static_cast<std::int64_t>(rows[0].size());
  if (width == 0) throw InputError(fmt::format("{}: codes[0] is empty", file));
  if (columns > 0 && width != columns)
    throw InputError(fmt::format("{}: frames have {} codes, expected {} (one per codebook)", file, width, columns));
  HostTensor out(DType::I64, {static_cast<std::int64_t>(rows.size()), width});
  auto* data = out.as<std::int64_t>();
  for (std::size_t t = 0; t < rows.size(); ++t) {
    if (static_cast<std::int64_t>(rows[t].size()) != width)
      throw InputError(fmt::format("{}: codes[{}] has {} codes, codes[0] has {}", file, t, rows[t].size(), width));
    for (std::int64_t c = 0; c < width; ++c) {
      const std::int64_t v = rows[t][static_cast<std::size_t>(c)];
      if (v < 0) throw InputError(fmt::format("{}: codes[{}][{}] = {} is negative", file, t, c, v));
      data[static_cast<std::int64_t>(t) * width + c] = v;
    }
  }
  return out;
}

HostTensor load_json_frames(const std::filesystem::path& path, std::int64_t columns) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", file, e.what()));
  }
  if (doc.is_object()) {
    if (!doc.contains("codes")) throw InputError(fmt::format("{}: no \"codes\" field", file));
    doc = doc.at("codes");
  }
  if (!doc.is_array()) throw InputError(fmt::format("{}: codes must be an array of frames", file));
  std::vector<std::vector<std::int64_t>> rows;
  for (std::size_t t = 0; t < doc.size(); ++t) {
    if (!doc[t].is_array()) throw InputError(fmt::format("{}: codes[{}] is not an array", file, t));
    std::vector<std::int64_t> row;
    for (std::size_t c = 0; c < doc[t].size(); ++c) {
      if (!doc[t][c].is_number_integer()) throw InputError(fmt::format("{}: codes[{}][{}] is not an integer", file, t, c));
      row.push_back(doc[t][c].get<std::int64_t>());
    }
    rows.push_back(std::move(row));
  }
  return check_and_pack(rows, columns, file);
}

HostTensor load_safetensors_frames(const std::filesystem::path& path, std::int64_t columns) {
  const std::string file = path.string();
  auto st = SafetensorsFile::open(path);
  const SafetensorsEntry* entry = st->find("codes");
  if (!entry) throw InputError(fmt::format("{}: no tensor named \"codes\"", file));
  if (entry->dtype != DType::I64 && entry->dtype != DType::I32)
    throw InputError(fmt::format("{}: \"codes\" is {}; expected I64 or I32", file, dtype_name(entry->dtype)));
  if (entry->shape.size() != 2) throw InputError(fmt::format("{}: \"codes\" has shape {}; expected [frames, codebooks]", file, shape_str(entry->shape)));
  const HostTensor raw = HostTensor::copy_of(st->view(*entry));
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(entry->shape[0]));
  const std::int64_t width = entry->shape[1];
  for (std::int64_t t = 0; t < entry->shape[0]; ++t)
    for (std::int64_t c = 0; c < width; ++c)
      rows[static_cast<std::size_t>(t)].push_back(entry->dtype == DType::I64 ? raw.as<std::int64_t>()[t * width + c]
                                                                             : raw.as<std::int32_t>()[t * width + c]);
  return check_and_pack(rows, columns, file);
}

}  // namespace

HostTensor load_code_frames(const std::filesystem::path& path, std::int64_t columns) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: {}", path.string(), std::filesystem::exists(path) ? "cannot be read" : "no such file"));
  char first = 0;
  while (in.get(first) && std::isspace(static_cast<unsigned char>(first))) {
  }
  in.close();
  if (first == '{' || first == '[') return load_json_frames(path, columns);
  return load_safetensors_frames(path, columns);
}

void write_code_frames(const std::filesystem::path& path, const TensorView& codes) {
  if (codes.shape.size() != 2 || (codes.dtype != DType::I64 && codes.dtype != DType::I32))
    throw InputError(fmt::format("{}: codes to write must be I64/I32 [frames, codebooks]", path.string()));
  HostTensor wide(DType::I64, codes.shape);
  for (std::int64_t i = 0; i < codes.numel(); ++i)
    wide.as<std::int64_t>()[i] = codes.dtype == DType::I64 ? codes.as<std::int64_t>()[i] : codes.as<std::int32_t>()[i];
  if (path.extension() == ".safetensors") {
    write_safetensors(path, {{"codes", wide.view()}});
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(fmt::format("{}: cannot write", path.string()));
  out << "{\"codes\": [";
  const std::int64_t width = codes.shape[1];
  for (std::int64_t t = 0; t < codes.shape[0]; ++t) {
    out << (t ? ",\n  [" : "\n  [");
    for (std::int64_t c = 0; c < width; ++c) out << (c ? ", " : "") << wide.as<std::int64_t>()[t * width + c];
    out << "]";
  }
  out << "\n]}\n";
  if (!out) throw InputError(fmt::format("{}: write failed", path.string()));
}

}  // namespace zoo
