#pragma once
#include <stdexcept>
#include <string>

namespace zoo {

// Bad input from a user: a file, YAML, JSON, CLI argument or plugin. The CLI turns it into a
// one-line message on stderr and exit code 2. Messages start with the file they are about.
// The destructors are defined in the framework library (their key function), so the vtable and
// type info live there: an error thrown inside a plugin can be caught and printed by the host even
// after that plugin's library is gone.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~InputError() override;
};

// A plugin cannot run with a setting the caller chose (device, dtype), as opposed to a problem of
// the checkpoint's config.json: the host prefixes where the setting came from (the YAML line or the
// command-line flag) instead of blaming config.json. Exit code 2, like any InputError.
class SettingError : public InputError {
 public:
  using InputError::InputError;
  ~SettingError() override;
};

// The input was well formed but did not pass a check (load plan, gates). Exit code 1.
class ValidationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~ValidationError() override;
};

}  // namespace zoo
