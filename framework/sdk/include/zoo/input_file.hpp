#pragma once
// The one way Zoo opens a user's input file (YAML, request, gates, config.json, index, golden,
// shards). Only regular files are opened: a FIFO, socket or device (/dev/zero) is an error and
// never blocks, because the open is non-blocking and the type is checked on the descriptor before
// anything is read. Text inputs are read whole with a size cap, and JSON is parsed with a depth
// limit, so no input can exhaust memory or the stack.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zoo {

// Size caps. JSON covers the largest shard indexes and requests carrying extra model inputs;
// YAML files are hand-written and small.
inline constexpr std::size_t kMaxJsonFileBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMaxYamlFileBytes = std::size_t{4} << 20;
// Plain text a command reads whole (a prompt file, a JSONL of lines to tokenize), file or stdin.
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{256} << 20;
// Deeper than any real config (HF configs nest 3-4 levels), shallow enough for every recursive
// walk of the parsed tree.
inline constexpr int kMaxJsonDepth = 64;

// An open read-only descriptor of a regular file; closed on destruction. Throws InputError
// "PATH: what" naming the path: no such file, is a directory, not a regular file (FIFO, device,
// socket), symlink loop, permission denied. `what` says what the file should be ("a request JSON
// file") and appears in the directory message.
class InputFile {
 public:
  InputFile(const std::filesystem::path& path, std::string_view what);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  std::size_t size() const { return size_; }

 private:
  int fd_ = -1;
  std::size_t size_ = 0;
};

// The message for an errno from opening or stat-ing `path` ("no such file", "symlink loop (too many
// levels of symbolic links)", ...), without the path.
std::string describe_open_error(int err);

// The whole file as text. InputError naming the path when it is not a readable regular file or is
// larger than `max_bytes`.
std::string read_text_file(const std::filesystem::path& path, std::string_view what, std::size_t max_bytes);

// All of standard input, up to `max_bytes` (InputError "<stdin>: more than N MiB" past it: `yes |
// zoo ...` must not grow without bound). Standard input may be a pipe or a terminal: it is the
// one non-regular input that is read, because the user chose it with "-".
std::string read_stdin_text(std::string_view what, std::size_t max_bytes);

// Parses JSON text, nested at most `max_depth` arrays/objects deep. InputError "LABEL: not valid
// JSON: ..." (the message never quotes the input's bytes: the file may not be JSON at all) or
// "LABEL: JSON is nested more than N levels deep".
nlohmann::json parse_json_text(std::string_view text, std::string_view label, int max_depth = kMaxJsonDepth);

// read_text_file + parse_json_text with the JSON caps.
nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view what);

// nlohmann's exception text without its "[json.exception.parse_error.101] " tag and without the
// "last read: '...'" excerpt of the input.
std::string json_error_text(const nlohmann::json::exception& e);

}  // namespace zoo
