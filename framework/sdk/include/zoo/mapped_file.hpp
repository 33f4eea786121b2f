#pragma once
#include <cstddef>
#include <filesystem>
#include <span>

namespace zoo {

// A read-only memory map of a whole file; unmapped on destruction. Empty files map to an empty span.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws InputError naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace zoo
