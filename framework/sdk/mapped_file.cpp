#include "zoo/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "zoo/error.hpp"
#include "zoo/input_file.hpp"

namespace zoo {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, std::string_view what, int err) {
  throw InputError(fmt::format("{}: {}: {}", path.string(), what, std::strerror(err)));
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  // InputFile refuses anything but a regular file (a FIFO would block, /dev/zero never ends).
  const InputFile file(path, "a file");
  if (file.size() == 0) return;  // mmap rejects zero-length maps
  void* addr = ::mmap(nullptr, file.size(), PROT_READ, MAP_PRIVATE, file.fd(), 0);
  if (addr == MAP_FAILED) fail(path, "cannot map", errno);
  data_ = static_cast<const std::byte*>(addr);
  size_ = file.size();
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace zoo
