#include "zoo/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "zoo/error.hpp"
#include "zoo/format.hpp"

namespace zoo {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const fs::path& target, std::string_view what, int err) {
  throw InputError(fmt::format("{}: {}: {}", escape_text(target.string()), what, std::strerror(err)));
}

// Unique within this process (counter) and across processes (pid, clock); O_EXCL catches the rest.
std::string temp_suffix() {
  static std::atomic<unsigned> counter{0};
  const auto ticks = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  return fmt::format(".zoo-tmp-{}-{}-{:x}", ::getpid(), counter.fetch_add(1), ticks & 0xffffffull);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(fs::path target) : target_(std::move(target)) {
  if (target_.empty()) throw InputError("output path is empty");
  // Follow a symlink so the rename replaces the file it points to, not the link itself; a loop or
  // an unreadable component is reported here, before anything is written.
  std::error_code ec;
  final_ = fs::weakly_canonical(target_, ec);
  if (ec) fail(target_, "cannot resolve the output path", ec.value());
  struct stat st {};
  const bool exists = ::stat(final_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    throw InputError(fmt::format("{}: is a directory, expected a file name", escape_text(target_.string())));
  if (exists && !S_ISREG(st.st_mode)) {
    fd_ = ::open(final_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail(target_, "cannot write", errno);
    return;
  }
  // The temporary file must be in the same directory: rename is atomic only within a file system.
  const fs::path dir = final_.parent_path();
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_ = dir / ("." + final_.filename().string() + temp_suffix());
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // umask applies
    if (fd_ < 0 && (errno != EEXIST || attempt > 100)) {
      const int err = errno;
      temp_.clear();
      fail(target_, err == ENOENT ? "cannot write (no such directory)" : "cannot write", err);
    }
  }
  // Replacing a file keeps its permissions.
  if (exists) (void)::fchmod(fd_, st.st_mode & 07777);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFileWriter::write(const void* data, std::size_t size) {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter::write after commit");
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ::ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(target_, "write failed", errno);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter::commit twice");
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  if (!temp_.empty() && ::fsync(fd_) != 0 && errno != EINVAL) fail(target_, "write failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(target_, "write failed", errno);
  if (temp_.empty()) return;  // written directly (a device or FIFO)
  if (::rename(temp_.c_str(), final_.c_str()) != 0) fail(target_, "cannot replace", errno);
  temp_.clear();
}

void write_file_atomic(const fs::path& path, std::string_view contents) {
  AtomicFileWriter writer(path);
  writer.write(contents);
  writer.commit();
}

void check_output_is_not_an_input(std::string_view flag, const fs::path& output, const std::vector<NamedPath>& inputs) {
  struct stat out {};
  if (::stat(output.c_str(), &out) != 0) return;  // not there yet: cannot be an input
  for (const auto& input : inputs) {
    struct stat in {};
    if (input.path.empty() || ::stat(input.path.c_str(), &in) != 0) continue;
    if (in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      throw InputError(fmt::format("{} {}: is the same file as the {} {}; refusing to overwrite an input",
                                   flag, escape_text(output.string()), input.what, escape_text(input.path.string())));
  }
}

}  // namespace zoo
