#include "zoo/code_frames.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "zoo/checked.hpp"
#include "zoo/error.hpp"
#include "zoo/input_file.hpp"
#include "zoo/output_file.hpp"
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
  // Size and depth caps, regular files only (zoo/input_file.hpp).
  nlohmann::json doc = read_json_file(path, "a codes JSON file");
  if (doc.is_object()) {
    if (!doc.contains("codes") || doc.size() != 1)
      throw InputError(fmt::format("{}: expected an array of frames or an object with only \"codes\"", file));
    doc = doc.at("codes");
  }
  if (!doc.is_array()) throw InputError(fmt::format("{}: codes must be an array of frames", file));
  std::vector<std::vector<std::int64_t>> rows;
  for (std::size_t t = 0; t < doc.size(); ++t) {
    if (!doc[t].is_array()) throw InputError(fmt::format("{}: codes[{}] is not an array", file, t));
    std::vector<std::int64_t> row;
    for (std::size_t c = 0; c < doc[t].size(); ++c) {
      const auto& v = doc[t][c];
      // Unsigned values past int64 would wrap to negative numbers: say what they are.
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX))
        throw InputError(fmt::format("{}: codes[{}][{}] is not an integer code", file, t, c));
      row.push_back(v.get<std::int64_t>());
    }
    rows.push_back(std::move(row));
  }
  return check_and_pack(rows, columns, file);
}

HostTensor load_safetensors_frames(const std::filesystem::path& path, std::int64_t columns) {
  const std::string file = path.string();
  auto st = SafetensorsFile::open(path);
  // The tensor named "codes", or the file's only tensor.
  const SafetensorsEntry* entry = st->find("codes");
  if (!entry) {
    if (st->entries().size() != 1)
      throw InputError(fmt::format("{}: no tensor named \"codes\" and {} tensors (want one)", file, st->entries().size()));
    entry = &st->entries().front();
  }
  if (entry->dtype != DType::I64 && entry->dtype != DType::I32 && entry->dtype != DType::I16)
    throw InputError(fmt::format("{}: \"{}\" is {}; expected I64, I32 or I16", file, entry->name, dtype_name(entry->dtype)));
  if (entry->shape.size() != 2)
    throw InputError(fmt::format("{}: \"{}\" has shape {}; expected [frames, codebooks]", file, entry->name,
                                 shape_str(entry->shape)));
  // Rows are built from the shape, not the data: [2^40, 0] holds no bytes at all but would ask for
  // 2^40 rows. With at least one frame of at least one code, frames x width is the tensor's element
  // count, which the file's own size bounds.
  if (entry->shape[0] < 1) throw InputError(fmt::format("{}: \"{}\" has shape {}: no code frames", file, entry->name,
                                                        shape_str(entry->shape)));
  if (entry->shape[1] < 1) throw InputError(fmt::format("{}: \"{}\" has shape {}: frames of no codes", file,
                                                        entry->name, shape_str(entry->shape)));
  checked_mul(entry->shape[0], entry->shape[1], fmt::format("{}: \"{}\" frames x codes", file, entry->name));
  const HostTensor raw = HostTensor::copy_of(st->view(*entry));
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(entry->shape[0]));
  const std::int64_t width = entry->shape[1];
  for (std::int64_t t = 0; t < entry->shape[0]; ++t)
    for (std::int64_t c = 0; c < width; ++c) {
      const std::int64_t i = t * width + c;
      rows[static_cast<std::size_t>(t)].push_back(entry->dtype == DType::I64   ? raw.as<std::int64_t>()[i]
                                                  : entry->dtype == DType::I32 ? raw.as<std::int32_t>()[i]
                                                                               : raw.as<std::int16_t>()[i]);
    }
  return check_and_pack(rows, columns, file);
}

// The first byte that is not white space, 0 for none. Opened as every input is (InputFile): a
// FIFO or a device is an error naming the file, never a blocking read.
char first_significant_byte(const std::filesystem::path& path) {
  const InputFile in(path, "a codes file (JSON or safetensors)");
  char buffer[512];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(in.fd(), buffer, sizeof buffer, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(fmt::format("{}: read failed: {}", path.string(), std::strerror(errno)));
    if (n == 0) return 0;
    for (ssize_t i = 0; i < n; ++i)
      if (!std::isspace(static_cast<unsigned char>(buffer[i]))) return buffer[i];
    at += n;
  }
}

}  // namespace

HostTensor load_code_frames(const std::filesystem::path& path, std::int64_t columns) {
  const char first = first_significant_byte(path);
  if (first == '{' || first == '[' || first == 0) return load_json_frames(path, columns);
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
  std::string text = "{\"codes\": [";
  const std::int64_t width = codes.shape[1];
  for (std::int64_t t = 0; t < codes.shape[0]; ++t) {
    text += t ? ",\n  [" : "\n  [";
    for (std::int64_t c = 0; c < width; ++c) text += fmt::format("{}{}", c ? ", " : "", wide.as<std::int64_t>()[t * width + c]);
    text += "]";
  }
  text += "\n]}\n";
  // Through a temporary file and a rename, as every output: a failure never leaves half a file.
  AtomicFileWriter out(path);
  out.write(text);
  out.commit();
}

HostTensor code_frames_tensor(const std::vector<std::vector<std::int64_t>>& frames) {
  if (frames.empty()) return HostTensor(DType::I64, {0, 0});
  const auto width = static_cast<std::int64_t>(frames.front().size());
  HostTensor out(DType::I64, {static_cast<std::int64_t>(frames.size()), width});
  for (std::size_t t = 0; t < frames.size(); ++t) {
    if (static_cast<std::int64_t>(frames[t].size()) != width)
      throw std::invalid_argument("code_frames_tensor: ragged frames");
    std::memcpy(out.as<std::int64_t>() + static_cast<std::int64_t>(t) * width, frames[t].data(),
                frames[t].size() * sizeof(std::int64_t));
  }
  return out;
}

std::vector<std::vector<std::int64_t>> code_frames_rows(const TensorView& codes) {
  if (codes.shape.size() != 2 || codes.dtype != DType::I64)
    throw std::invalid_argument("code_frames_rows: codes must be I64 [frames, codebooks]");
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(codes.shape[0]));
  for (std::int64_t t = 0; t < codes.shape[0]; ++t)
    rows[static_cast<std::size_t>(t)].assign(codes.as<std::int64_t>() + t * codes.shape[1],
                                             codes.as<std::int64_t>() + (t + 1) * codes.shape[1]);
  return rows;
}

}  // namespace zoo
