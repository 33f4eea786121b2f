#include "zoo/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "zoo/error.hpp"

namespace zoo {

std::string describe_open_error(int err) {
  switch (err) {
    case ENOENT: return "no such file";
    case ELOOP: return "symlink loop (too many levels of symbolic links)";
    case ENOTDIR: return "no such file (a component of the path is not a directory)";
    case EACCES: return "cannot be read: permission denied";
    default: return fmt::format("cannot be opened: {}", std::strerror(err));
  }
}

InputFile::InputFile(const std::filesystem::path& path, std::string_view what) {
  const auto label = path.string();
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. It has no
  // effect on regular files, the only kind read below.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) {
    const int err = errno;
    // open() of a directory for reading succeeds on Linux, so EISDIR only comes from odd systems.
    if (err == EISDIR) throw InputError(fmt::format("{}: is a directory, expected {}", label, what));
    throw InputError(fmt::format("{}: {}", label, describe_open_error(err)));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw InputError(fmt::format("{}: cannot stat: {}", label, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{}: is a directory, expected {}", label, what));
    const char* kind = S_ISFIFO(st.st_mode)                          ? "a FIFO"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : S_ISSOCK(st.st_mode)                        ? "a socket"
                                                                     : "not a regular file";
    throw InputError(fmt::format("{}: is {}, expected {} (only regular files are read)", label, kind, what));
  }
  size_ = static_cast<std::size_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string read_text_file(const std::filesystem::path& path, std::string_view what, std::size_t max_bytes) {
  const InputFile file(path, what);
  const auto label = path.string();
  auto too_big = [&](std::size_t size) {
    // A limit under 1 MiB in bytes: ">> 20" would print it as "0 MiB".
    const std::string limit = max_bytes >= (1u << 20) ? fmt::format("{} MiB", max_bytes >> 20)
                                                      : fmt::format("{} bytes", max_bytes);
    return InputError(fmt::format("{}: file is {} bytes, more than the {} limit for {}", label, size, limit, what));
  };
  if (file.size() > max_bytes) throw too_big(file.size());
  std::string text(file.size(), '\0');
  std::size_t done = 0;
  // Read to end of file, not to the size fstat gave: a file that grows meanwhile is still capped.
  for (;;) {
    if (done == text.size()) {
      if (text.size() > max_bytes) throw too_big(text.size());
      text.resize(text.size() + 4096);
    }
    const ssize_t n = ::read(file.fd(), text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(fmt::format("{}: read failed: {}", label, std::strerror(errno)));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (done > max_bytes) throw too_big(done);
  text.resize(done);
  return text;
}

std::string read_stdin_text(std::string_view what, std::size_t max_bytes) {
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(fmt::format("<stdin>: read failed: {}", std::strerror(errno)));
    }
    if (n == 0) return text;
    if (text.size() + static_cast<std::size_t>(n) > max_bytes)
      throw InputError(fmt::format("<stdin>: more than the {} MiB limit for {}", max_bytes >> 20, what));
    text.append(buffer, static_cast<std::size_t>(n));
  }
}

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (what.starts_with("[json.exception.")) {
    if (auto close = what.find("] "); close != std::string::npos) what.erase(0, close + 2);
  }
  // "...; last read: 'TOKEN'[; expected X]": TOKEN is raw input, which for a file that is not
  // JSON at all (a key, a password file) must not be echoed. The expected-clause follows the
  // token, so its last occurrence is the real one even if the token contains the same text.
  if (auto start = what.find("; last read: '"); start != std::string::npos) {
    const auto expected = what.rfind("'; expected ");
    what = what.substr(0, start) + (expected != std::string::npos && expected >= start ? what.substr(expected + 1) : "");
  }
  if (auto start = what.find("number overflow parsing '"); start != std::string::npos)
    what = what.substr(0, start) + "number overflow (a number too large for a double)";
  return what;
}

namespace {

// A SAX pass that only tracks nesting depth. The depth has to be known before the tree is built:
// nlohmann's own parser is iterative, but every later walk of the tree (copy, dump, comparison)
// recurses per level. A parser callback could check depth too, but nlohmann's callback parser
// rescans the parent object on every object end, which is quadratic in the number of members.
struct DepthScan {
  using json = nlohmann::json;
  std::string_view label;
  int max_depth;
  int depth = 0;

  bool open() {
    if (++depth > max_depth)
      throw InputError(fmt::format("{}: JSON is nested more than {} levels deep", label, max_depth));
    return true;
  }
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return open(); }
  bool key(json::string_t&) { return true; }
  bool end_object() { return --depth, true; }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return --depth, true; }
  [[noreturn]] bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", label, json_error_text(e)));
  }
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, std::string_view label, int max_depth) {
  using nlohmann::json;
  DepthScan scan{label, max_depth};
  try {
    json::sax_parse(text.begin(), text.end(), &scan);
    // The scan accepted the grammar and the depth; the DOM parse cannot fail on either now.
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", label, json_error_text(e)));
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view what) {
  return parse_json_text(read_text_file(path, what, kMaxJsonFileBytes), path.string());
}

}  // namespace zoo
