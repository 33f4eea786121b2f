#pragma once
// The CLI's one declared I/O layer. Every option of every command is classified: an input file, an
// plugin search path, an output file, an output directory, or not a file. Options that take a value
// of a type that cannot name a file (a number) and flags are classified by their type; every
// other option must be tagged with one of the functions below when it is added, or
// `zoo --list-file-options` prints it as UNCLASSIFIED and tests/scripts/cli_file_options.sh fails.
// The same listing drives that test's hostile files (FIFO, directory, /dev/zero, symlink loops,
// outputs that are inputs), so a new file option is covered the moment it is declared.
//
// Before a command runs, check_file_options() opens every given input through zoo::InputFile
// (regular files only, never a blocking open) and refuses any output that is the same file as an
// input of the command or as another of its outputs. The command then writes through
// AtomicFileWriter (zoo/output_file.hpp), and compares its outputs with the model's files (known
// only once the YAML is read) through check_output (run_helpers.hpp).
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace zoo::cli {

enum class FileClass { NotAFile, Input, SearchPath, Output, OutputDir };

struct InputOptions {
  bool directory_ok = false;  // a model directory, a checkpoint directory
  bool stdin_ok = false;      // "-" reads standard input (size-capped by the command)
};

// Tag `option` (returned, for chaining) with its class. `what` says what the file is ("a request
// JSON file") for error messages.
CLI::Option* input_file(CLI::Option* option, std::string what, InputOptions how = {});
// A plugin directory or plugin file: the plugin registry's own rules apply (a missing entry is
// skipped, an unusable one listed as a problem; plugins are opened through InputFile).
CLI::Option* search_path(CLI::Option* option, std::string what);
CLI::Option* output_file(CLI::Option* option, std::string what);
CLI::Option* output_directory(CLI::Option* option, std::string what);
CLI::Option* not_a_file(CLI::Option* option);

// The class of `option`: its tag, else NotAFile for flags and number-valued options; nullopt for an
// untagged option taking text.
std::optional<FileClass> file_class_of(const CLI::Option& option);

// For `zoo --list-file-options`: one line per option of every command, "COMMAND OPTION CLASS
// [positional] [required] [needs=OPTION,...]", OPTION the long name (or the positional's name).
std::string list_file_options(const CLI::App& app);

// Checks the given file options of `command` (the parsed subcommand), as described above. Throws
// InputError "FLAG PATH: what is wrong".
void check_file_options(const CLI::App& command);

}  // namespace zoo::cli
