#include "zoo/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/input_file.hpp"
#include "zoo/output_file.hpp"

namespace zoo {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors payloads are little-endian");

using nlohmann::json;

// The reference implementation's limit; also keeps a hostile length from driving a huge parse.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
// A valid header nests at most two levels below the root (tensor entry -> shape array); a little
// slack keeps messages about wrong types specific instead of "too deep".
constexpr int kMaxDepth = 6;

// Names and values from a header, as errors quote them: escaped (a crafted name must not print a fake line) and
// cut short (a name can be megabytes).
constexpr std::size_t kQuoteBytes = 200;
std::string excerpt(std::string_view text) { return escape_text(text, kQuoteBytes); }

std::string_view json_type(const json& value) {
  if (value.is_number_float()) return "a fractional number";
  if (value.is_number_integer() && value.get<std::int64_t>() < 0) return "a negative number";
  return value.type_name();
}

// A non-negative integer that fits in 64 bits; nlohmann keeps larger ones as float.
std::optional<std::uint64_t> as_index(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0) return value.get<std::uint64_t>();
  return std::nullopt;
}

std::string supported_dtypes() {
  std::string out;
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I16, DType::I8,
                  DType::U8, DType::BOOL})
    out += (out.empty() ? "" : ", ") + std::string(dtype_name(d));
  return out;
}

struct Parsed {
  json root;
  std::vector<std::string> top_keys;  // in header order, for stable ordering of equal offsets
};

// A SAX pass before the tree is built: depth, duplicate keys and the order of the tensor names.
// (nlohmann's parser callback could see the same events, but its parser rescans the parent object
// at every object end, which made a header of N tensors cost O(N^2): 40k tensors took minutes.)
struct HeaderScan {
  std::string_view label;
  Parsed& out;
  // One key set per open object: nlohmann keeps the last of duplicate keys silently, but a
  // duplicate tensor name makes a file ambiguous, so it is an error at every level. Arrays push
  // an empty marker so that the stack depth is the nesting depth.
  std::vector<std::set<std::string, std::less<>>> open;
  std::vector<bool> is_object;

  bool start(bool object) {
    if (is_object.size() >= static_cast<std::size_t>(kMaxDepth))
      throw InputError(fmt::format("{}: header is nested more than {} levels deep", label, kMaxDepth));
    is_object.push_back(object);
    if (object) open.emplace_back();
    return true;
  }
  bool end() {
    if (is_object.back()) open.pop_back();
    is_object.pop_back();
    return true;
  }
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return start(true); }
  bool start_array(std::size_t) { return start(false); }
  bool end_object() { return end(); }
  bool end_array() { return end(); }
  bool key(json::string_t& key) {
    const bool top = is_object.size() == 1;
    if (!open.back().insert(key).second) {
      if (top) throw InputError(fmt::format("{}: duplicate tensor name '{}'", label, excerpt(key)));
      throw InputError(fmt::format("{}: duplicate key '{}' in the header", label, excerpt(key)));
    }
    if (top) out.top_keys.push_back(key);
    return true;
  }
  [[noreturn]] bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    throw InputError(fmt::format("{}: header is not valid JSON: {}", label, json_error_text(e)));
  }
};

Parsed parse_json(std::string_view text, std::string_view label) {
  Parsed out;
  HeaderScan scan{label, out, {}, {}};
  try {
    json::sax_parse(text.begin(), text.end(), &scan);
    out.root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: header is not valid JSON: {}", label, json_error_text(e)));
  }
  return out;
}

void read_metadata(const json& value, std::string_view label, std::map<std::string, std::string>& metadata) {
  if (!value.is_object())
    throw InputError(fmt::format("{}: __metadata__ must be an object of strings, got {}", label, json_type(value)));
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      throw InputError(fmt::format("{}: __metadata__ value for '{}' must be a string, got {}", label, excerpt(key),
                                   json_type(item)));
    metadata.emplace(key, item.get<std::string>());
  }
}

SafetensorsEntry read_entry(const std::string& name, const json& value, std::size_t data_size,
                            std::string_view label) {
  const auto where = fmt::format("{}: tensor '{}'", label, excerpt(name));
  if (!value.is_object())
    throw InputError(fmt::format("{}: entry must be an object, got {}", where, json_type(value)));
  auto field = [&](const char* key) -> const json& {
    auto it = value.find(key);
    if (it == value.end()) throw InputError(fmt::format("{}: missing \"{}\"", where, key));
    return *it;
  };

  SafetensorsEntry entry;
  entry.name = name;

  const json& dtype = field("dtype");
  if (!dtype.is_string()) throw InputError(fmt::format("{}: dtype must be a string, got {}", where, json_type(dtype)));
  const auto& dtype_text = dtype.get_ref<const std::string&>();
  auto parsed_dtype = dtype_from_name(dtype_text);
  if (!parsed_dtype)
    throw InputError(fmt::format("{}: unknown or unsupported dtype '{}' (supported: {})", where, excerpt(dtype_text),
                                 supported_dtypes()));
  entry.dtype = *parsed_dtype;

  const json& shape = field("shape");
  if (!shape.is_array()) throw InputError(fmt::format("{}: shape must be an array, got {}", where, json_type(shape)));
  // numel() multiplies left to right in int64, so every partial product must fit, not only the
  // final one (a trailing 0 would otherwise hide an overflow).
  std::uint64_t elements = 1;
  for (const auto& dim : shape) {
    auto d = as_index(dim);
    if (!d) throw InputError(fmt::format("{}: shape entries must be non-negative integers, got {}", where, json_type(dim)));
    if (*d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        __builtin_mul_overflow(elements, *d, &elements) ||
        elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw InputError(fmt::format("{}: shape {} has too many elements", where, excerpt(shape.dump())));
    entry.shape.push_back(static_cast<std::int64_t>(*d));
  }
  std::uint64_t nbytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(dtype_size(entry.dtype)), &nbytes))
    throw InputError(fmt::format("{}: shape {} has too many elements", where, excerpt(shape.dump())));

  const json& offsets = field("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2)
    throw InputError(fmt::format("{}: data_offsets must be an array of two integers [begin, end]", where));
  auto begin = as_index(offsets[0]);
  auto end = as_index(offsets[1]);
  if (!begin || !end)
    throw InputError(fmt::format("{}: data_offsets must be non-negative integers, got {}", where,
                                 excerpt(offsets.dump())));
  if (*begin > *end)
    throw InputError(fmt::format("{}: data_offsets [{}, {}] end before they begin", where, *begin, *end));
  if (*end > data_size)
    throw InputError(fmt::format("{}: data_offsets [{}, {}] run past the data section ({} bytes)", where, *begin, *end,
                                 data_size));
  if (*end - *begin != nbytes)
    throw InputError(fmt::format("{}: data_offsets [{}, {}] span {} bytes but {} {} needs {}", where, *begin, *end,
                                 *end - *begin, dtype_name(entry.dtype), shape_str(entry.shape), nbytes));
  entry.begin = static_cast<std::size_t>(*begin);
  entry.end = static_cast<std::size_t>(*end);
  return entry;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_bytes, std::string_view label) {
  if (file_bytes.size() < 8)
    throw InputError(fmt::format("{}: file is {} bytes, too short for a safetensors header length", label,
                                 file_bytes.size()));
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<std::uint8_t>(file_bytes[i]);
  if (header_len > kMaxHeaderBytes)
    throw InputError(fmt::format("{}: header length {} exceeds the 100 MB limit (not a safetensors file?)", label,
                                 header_len));
  if (header_len > file_bytes.size() - 8)
    throw InputError(fmt::format("{}: header length {} runs past the end of the file ({} bytes; truncated?)", label,
                                 header_len, file_bytes.size()));

  SafetensorsHeader header;
  header.data_offset = 8 + static_cast<std::size_t>(header_len);
  const std::size_t data_size = file_bytes.size() - header.data_offset;
  const std::string_view text(reinterpret_cast<const char*>(file_bytes.data() + 8), header_len);
  if (text.empty() || text.front() != '{')
    throw InputError(fmt::format("{}: header does not start with '{{' (not a safetensors file?)", label));

  auto parsed = parse_json(text, label);
  if (!parsed.root.is_object()) throw InputError(fmt::format("{}: header is not a JSON object", label));

  std::vector<SafetensorsEntry> entries;
  entries.reserve(parsed.top_keys.size());
  for (const auto& key : parsed.top_keys) {
    const json& value = parsed.root.find(key).value();
    if (key == "__metadata__")
      read_metadata(value, label, header.metadata);
    else
      entries.push_back(read_entry(key, value, data_size, label));
  }

  // The spec requires the tensors to tile the data section exactly: no overlaps (two tensors
  // sharing bytes) and no holes (bytes that belong to nothing, which would allow polyglot files).
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::size_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto& entry : entries) {
    if (entry.begin < covered)
      throw InputError(fmt::format("{}: tensor '{}' (bytes {}..{}) overlaps tensor '{}' (bytes {}..{})", label,
                                   excerpt(entry.name), entry.begin, entry.end, excerpt(previous->name),
                                   previous->begin, previous->end));
    if (entry.begin > covered)
      throw InputError(fmt::format("{}: bytes {}..{} of the data section belong to no tensor (before tensor '{}')",
                                   label, covered, entry.begin, excerpt(entry.name)));
    covered = entry.end;
    if (entry.end > entry.begin || !previous) previous = &entry;
  }
  if (covered != data_size)
    throw InputError(fmt::format("{}: {} bytes after the last tensor belong to no tensor (data section is {} bytes)",
                                 label, data_size - covered, data_size));
  header.entries = std::move(entries);
  return header;
}

SafetensorsFile::SafetensorsFile(MappedFile map)
    : map_(std::move(map)), header_(parse_safetensors_header(map_.bytes(), map_.path().string())) {
  for (std::size_t i = 0; i < header_.entries.size(); ++i) by_name_.emplace(header_.entries[i].name, i);
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  return std::make_shared<const SafetensorsFile>(MappedFile(path));
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.entries[it->second];
}

TensorView SafetensorsFile::view(const SafetensorsEntry& entry) const {
  return {map_.bytes().data() + header_.data_offset + entry.begin, entry.dtype, entry.shape, Device{}};
}

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const auto label = path.string();
  auto quote = [&](const std::string& text, std::string_view what) {
    try {
      return json(text).dump();
    } catch (const json::exception&) {
      throw InputError(fmt::format("{}: {} '{}' is not valid UTF-8", label, what, excerpt(text)));
    }
  };

  // Laid out like the reference writer (compact JSON, __metadata__ first, then dtype, shape,
  // data_offsets per tensor) so that the same tensors in the same order give the same bytes.
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      header += fmt::format("{}{}:{}", first ? "" : ",", quote(key, "metadata key"), quote(value, "metadata value"));
      first = false;
    }
    header += "}";
  }
  std::set<std::string_view> seen;
  std::uint64_t offset = 0;
  for (const auto& [name, view] : tensors) {
    if (name == "__metadata__")
      throw InputError(fmt::format("{}: '__metadata__' is reserved and cannot name a tensor", label));
    if (!seen.insert(name).second) throw InputError(fmt::format("{}: duplicate tensor name '{}'", label, name));
    if (!view.device.is_cpu())
      throw InputError(fmt::format("{}: tensor '{}' is on {}, not in host memory", label, name, view.device.str()));
    for (auto d : view.shape)
      if (d < 0) throw InputError(fmt::format("{}: tensor '{}' has negative shape {}", label, name, shape_str(view.shape)));
    const auto nbytes = view.nbytes();
    if (nbytes && !view.data) throw InputError(fmt::format("{}: tensor '{}' has no data", label, name));
    header += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          header.size() > 1 ? "," : "", quote(name, "tensor name"), dtype_name(view.dtype),
                          fmt::join(view.shape, ","), offset, offset + nbytes);
    offset += nbytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // data section starts 8-byte aligned

  // Through a temporary file and a rename: a failure never leaves a half-written trace, and a
  // reader that mapped the old file keeps its bytes.
  AtomicFileWriter file(path);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  file.write(length, sizeof length);
  file.write(header);
  for (const auto& [name, view] : tensors)
    if (view.nbytes()) file.write(view.data, view.nbytes());
  file.commit();
}

}  // namespace zoo
