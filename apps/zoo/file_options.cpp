#include "file_options.hpp"

#include <sys/stat.h>

#include <fmt/format.h>

#include <cerrno>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "zoo/error.hpp"
#include "zoo/format.hpp"
#include "zoo/input_file.hpp"
#include "zoo/output_file.hpp"

namespace zoo::cli {
namespace {

namespace fs = std::filesystem;

struct Tag {
  FileClass file_class = FileClass::NotAFile;
  std::string what;
  InputOptions how;
};

// Options live as long as the App that owns them (all of main), so their addresses are keys.
std::map<const CLI::Option*, Tag>& tags() {
  static std::map<const CLI::Option*, Tag> registry;
  return registry;
}

CLI::Option* tag(CLI::Option* option, Tag t) {
  tags()[option] = std::move(t);
  return option;
}

std::string display_name(const CLI::Option& option) {
  if (!option.get_lnames().empty()) return "--" + option.get_lnames().front();
  if (option.get_positional()) return option.get_name(true);
  return "-" + option.get_snames().front();
}

const char* class_name(std::optional<FileClass> c) {
  if (!c) return "UNCLASSIFIED";
  switch (*c) {
    case FileClass::NotAFile: return "not-a-file";
    case FileClass::Input: return "input";
    case FileClass::SearchPath: return "search-path";
    case FileClass::Output: return "output";
    case FileClass::OutputDir: return "output-dir";
  }
  return "UNCLASSIFIED";
}

// Same file: same device and inode when both exist (links followed), else the same resolved path
// (two outputs neither of which exists yet).
bool same_file(const fs::path& a, const fs::path& b) {
  struct stat sa {}, sb {};
  const bool ea = ::stat(a.c_str(), &sa) == 0, eb = ::stat(b.c_str(), &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (ea != eb) return false;
  std::error_code ec1, ec2;
  const auto ca = fs::weakly_canonical(a, ec1), cb = fs::weakly_canonical(b, ec2);
  return !ec1 && !ec2 && ca == cb;
}

// "request JSON (--request)" out of "a request JSON file": what the input is, and its option.
std::string input_label(std::string_view what, std::string_view flag) {
  for (std::string_view article : {"a ", "an "})
    if (what.starts_with(article)) what.remove_prefix(article.size());
  if (what.ends_with(" file")) what.remove_suffix(5);
  return fmt::format("{} ({})", what, flag);
}

[[noreturn]] void refuse(std::string_view flag, const std::string& path, std::string_view what) {
  throw InputError(fmt::format("{} {}: {}", flag, escape_text(path), what));
}

}  // namespace

CLI::Option* input_file(CLI::Option* option, std::string what, InputOptions how) {
  return tag(option, {FileClass::Input, std::move(what), how});
}
CLI::Option* search_path(CLI::Option* option, std::string what) {
  return tag(option, {FileClass::SearchPath, std::move(what), {}});
}
CLI::Option* output_file(CLI::Option* option, std::string what) {
  return tag(option, {FileClass::Output, std::move(what), {}});
}
CLI::Option* output_directory(CLI::Option* option, std::string what) {
  return tag(option, {FileClass::OutputDir, std::move(what), {}});
}
CLI::Option* not_a_file(CLI::Option* option) { return tag(option, {FileClass::NotAFile, "", {}}); }

std::optional<FileClass> file_class_of(const CLI::Option& option) {
  if (const auto it = tags().find(&option); it != tags().end()) return it->second.file_class;
  if (option.get_items_expected_max() == 0) return FileClass::NotAFile;  // a flag: no value at all
  // CLI11's type names for numbers (before ":" and a validator's description); a path is TEXT.
  std::string type = option.get_type_name();
  type = type.substr(0, type.find(':'));
  for (const char* number : {"INT", "UINT", "FLOAT", "NUMBER", "BOOLEAN"})
    if (type == number) return FileClass::NotAFile;
  return std::nullopt;
}

std::string list_file_options(const CLI::App& app) {
  std::string out;
  const std::function<bool(const CLI::App*)> every = [](const CLI::App*) { return true; };
  for (const auto* command : app.get_subcommands(every)) {
    for (const auto* option : command->get_options()) {
      if (option == command->get_help_ptr() || option == command->get_help_all_ptr()) continue;
      const auto cls = file_class_of(*option);
      out += fmt::format("{} {} {}", command->get_name(), display_name(*option), class_name(cls));
      if (option->get_positional() && !option->nonpositional()) out += " positional";
      if (const auto it = tags().find(option); it != tags().end()) {
        if (it->second.how.directory_ok) out += " dir-ok";
        if (it->second.how.stdin_ok) out += " stdin-ok";
      }
      if (option->get_required()) out += " required";
      for (const auto* need : option->get_needs()) out += " needs=" + display_name(*need);
      out += '\n';
    }
  }
  return out;
}

void check_file_options(const CLI::App& command) {
  std::vector<NamedPath> inputs;
  for (const auto* option : command.get_options()) {
    const auto it = tags().find(option);
    if (it == tags().end() || option->count() == 0) continue;
    const Tag& t = it->second;
    const std::string flag = display_name(*option);
    for (const auto& value : option->results()) {
      if (value.empty() && (t.file_class == FileClass::Input || t.file_class == FileClass::OutputDir))
        throw InputError(fmt::format("{}: the file name is empty{}", flag,
                                     t.how.stdin_ok ? " (give a file, or - for stdin)" : ""));
      if (t.file_class == FileClass::Input) {
        if (value == "-" && t.how.stdin_ok) continue;
        struct stat st {};
        if (t.how.directory_ok && ::stat(value.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
          // A model directory's files are inputs as much as a file named directly.
          std::error_code ec;
          for (const auto& entry : fs::directory_iterator(value, ec))
            if (entry.is_regular_file(ec)) inputs.push_back({fmt::format("file of the model directory ({})", flag), entry.path()});
          continue;
        }
        try {
          const InputFile file(value, t.what);
        } catch (const InputError& e) {
          // "FILE: what is wrong", the form of every input error, with the option that named it.
          throw InputError(fmt::format("{} ({})", e.what(),
                                       option->nonpositional() ? flag : fmt::format("the {} argument", flag)));
        }
        inputs.push_back({input_label(t.what, flag), value});
      } else if (t.file_class == FileClass::OutputDir) {
        struct stat st {};
        if (::stat(value.c_str(), &st) != 0) {
          if (errno != ENOENT) refuse(flag, value, describe_open_error(errno));
        } else if (!S_ISDIR(st.st_mode)) {
          refuse(flag, value, fmt::format("exists and is not a directory, expected {}", t.what));
        }
      }
    }
  }
  std::vector<NamedPath> outputs;
  for (const auto* option : command.get_options()) {
    const auto it = tags().find(option);
    if (it == tags().end() || option->count() == 0 || it->second.file_class != FileClass::Output) continue;
    const std::string flag = display_name(*option);
    for (const auto& value : option->results()) {
      if (value.empty()) throw InputError(fmt::format("{}: the file name is empty", flag));
      struct stat st {};
      const bool exists = ::stat(value.c_str(), &st) == 0;
      if (!exists && errno != ENOENT) refuse(flag, value, describe_open_error(errno));
      if (exists && S_ISDIR(st.st_mode)) refuse(flag, value, "is a directory, expected a file name");
      check_output_is_not_an_input(flag, value, inputs);
      // Two outputs onto one regular file would leave only the second; a device takes both.
      if (!exists || S_ISREG(st.st_mode))
        for (const auto& other : outputs)
          if (same_file(value, other.path))
            refuse(flag, value,
                   fmt::format("is the same file as the {} output {}; one file cannot hold both", other.what,
                               escape_text(other.path.string())));
      outputs.push_back({flag, value});
    }
  }
}

}  // namespace zoo::cli
