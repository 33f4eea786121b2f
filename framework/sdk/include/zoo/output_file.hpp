#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace zoo {

// Every file Zoo writes goes through this class: the bytes go to a temporary file in the target's
// directory, and commit() flushes it to disk and renames it over the target in one step. A writer
// destroyed without commit() (an exception, a failed write) removes its temporary file, so the
// target is either untouched or complete, never half written. Readers that mapped the old file
// keep their (old) bytes. When the target is a symlink, the file it points to is replaced and the
// link kept. A target that exists and is not a regular file (/dev/null, /dev/stdout, a FIFO) is
// written directly: replacing a device node by a file would be worse than any half write.
// Errors are InputErrors naming the target.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path target);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, std::size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Flushes, closes and renames over the target. Writing after commit() is a logic error.
  void commit();

  const std::filesystem::path& target() const { return target_; }

 private:
  std::filesystem::path target_;  // the name the user gave
  std::filesystem::path final_;   // where the rename goes (the symlink's target when it is one)
  std::filesystem::path temp_;   // empty when writing directly
  int fd_ = -1;
};

// Writes `contents` to `path` through an AtomicFileWriter.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

// Refuses (InputError "FLAG PATH is the same file as the WHAT INPUT; ...") when `output` names
// the same file as one of `inputs` (same device and inode, symlinks followed). Inputs that do not
// exist are ignored; an output that does not exist yet is never an input. `inputs` are pairs of
// (what, path) so the message says which input it would have destroyed.
struct NamedPath {
  std::string what;  // "request", "golden", "model YAML", "weights"
  std::filesystem::path path;
};
void check_output_is_not_an_input(std::string_view flag, const std::filesystem::path& output,
                                  const std::vector<NamedPath>& inputs);

}  // namespace zoo
