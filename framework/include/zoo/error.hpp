#pragma once
#include <stdexcept>
#include <string>

namespace zoo {

// Bad input from a user: a file, YAML, JSON, CLI argument or plugin. The CLI turns it into a
// one-line message on stderr and exit code 2. Messages start with the file they are about.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The input was well formed but did not pass a check (load plan, gates). Exit code 1.
class ValidationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace zoo
