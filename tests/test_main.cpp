// The main of every Catch2 test binary: Catch2's runner plus the skip signal of test_skip.hpp.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "test_skip.hpp"

namespace {
std::mutex g_skip_mutex;
std::vector<std::string> g_skipped;  // "test case: reason"
}  // namespace

namespace zoo::test {

void mark_skipped(const std::string& reason) {
  const std::string name = Catch::getResultCapture().getCurrentTestName();
  std::lock_guard lock(g_skip_mutex);
  g_skipped.push_back(name + ": " + reason);
}

}  // namespace zoo::test

int main(int argc, char** argv) {
  const int failures = Catch::Session().run(argc, argv);
  // Catch2 returns the number of failed assertions (at most 255): never let a failure read as a skip.
  if (failures != 0) return failures == zoo::test::kSkipReturnCode ? 1 : failures;
  if (g_skipped.empty()) return 0;
  for (const auto& line : g_skipped) std::printf("SKIPPED %s\n", line.c_str());
  return zoo::test::kSkipReturnCode;
}
