#pragma once
// Everything written to stderr while a StderrCapture lives (the plugin registry logs there).
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace zoo::test {

class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()) {
    if (!file_) throw std::runtime_error("StderrCapture: tmpfile failed");
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(::fileno(file_), STDERR_FILENO);
  }
  ~StderrCapture() {
    restore();
    std::fclose(file_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // What was written so far; stops capturing.
  std::string text() {
    restore();
    std::string out;
    std::rewind(file_);
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file_)) > 0;) out.append(buffer, n);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  std::FILE* file_;
  int saved_ = -1;
};

}  // namespace zoo::test
