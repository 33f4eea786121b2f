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

namespace zoo {
namespace {

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void fail(const std::filesystem::path& path, std::string_view what, int err) {
  throw InputError(fmt::format("{}: {}: {}", path.string(), what, std::strerror(err)));
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  FdGuard guard{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (guard.fd < 0) fail(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(guard.fd, &st) != 0) fail(path, "cannot stat", errno);
  if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{}: is a directory, expected a file", path.string()));
  if (!S_ISREG(st.st_mode)) throw InputError(fmt::format("{}: not a regular file", path.string()));
  if (st.st_size == 0) return;  // mmap rejects zero-length maps
  const auto size = static_cast<std::size_t>(st.st_size);
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, guard.fd, 0);
  if (addr == MAP_FAILED) fail(path, "cannot map", errno);
  data_ = static_cast<const std::byte*>(addr);
  size_ = size;
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
