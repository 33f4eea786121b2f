#pragma once
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zoo/mapped_file.hpp"
#include "zoo/tensor.hpp"

namespace zoo {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  std::size_t begin = 0;  // byte offsets relative to the data section
  std::size_t end = 0;
};

// Parses and validates a safetensors header held in memory (no file needed; the fuzz target uses
// this). `file_size` is the size of the whole file the header came from. Throws InputError whose
// message starts with `label`.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in file order of offsets
  std::map<std::string, std::string> metadata;
  std::size_t data_offset = 0;  // 8 + header length
};
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_bytes, std::string_view label);

// One memory-mapped .safetensors file, fully validated on open.
class SafetensorsFile {
 public:
  static std::shared_ptr<const SafetensorsFile> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return map_.path(); }
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const SafetensorsEntry* find(std::string_view name) const;
  // A host view of the mapped payload (may be unaligned for its dtype; readers use memcpy).
  TensorView view(const SafetensorsEntry& entry) const;

  explicit SafetensorsFile(MappedFile map);  // use open()

 private:
  MappedFile map_;
  SafetensorsHeader header_;
  std::map<std::string, std::size_t, std::less<>> by_name_;
};

// Writes tensors (host views) in the order given, 8-byte aligned data, `__metadata__` if any.
// Throws InputError naming the path on I/O failure or a duplicate name.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace zoo
