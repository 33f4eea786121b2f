#include "zoo/output_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
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

// Random, so another user of a shared directory cannot plant a file or link at the name in advance
// (O_EXCL|O_NOFOLLOW would refuse it, but a predictable name would make every run fail). The
// counter and clock only matter where getrandom is unavailable.
std::string temp_suffix() {
  static std::atomic<unsigned> counter{0};
  unsigned long long bits = 0;
  if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits))
    bits = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           (static_cast<unsigned long long>(::getpid()) << 32);
  return fmt::format(".zoo-tmp-{:016x}-{}", bits, counter.fetch_add(1));
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(fs::path target) : target_(std::move(target)) {
  if (target_.empty()) throw InputError("output path is empty");
  // A device or FIFO is written directly, by the name given: /dev/stdout on a pipe resolves to
  // "pipe:[N]", which no path search can find again.
  if (struct stat given {}; ::stat(target_.c_str(), &given) == 0 && !S_ISREG(given.st_mode) && !S_ISDIR(given.st_mode)) {
    fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd_ < 0) fail(target_, "cannot write", errno);
    return;
  }
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
    fd_ = ::open(final_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd_ < 0) fail(target_, "cannot write", errno);
    return;
  }
  // The temporary file must be in the same directory: rename is atomic only within a file system.
  const fs::path dir = final_.parent_path();
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_ = dir / ("." + final_.filename().string() + temp_suffix());
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);  // umask applies
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
  // The rename is durable only once the directory is on disk too; failing that is not an error of
  // this write (some file systems cannot fsync a directory).
  const fs::path dir = final_.parent_path().empty() ? fs::path(".") : final_.parent_path();
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
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
