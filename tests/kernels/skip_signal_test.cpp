// Hidden cases ([.]) that exercise the skip signal of tests/test_main.cpp; tests/scripts/skip_signal.sh
// runs them one at a time and checks the exit codes ctest maps (77 = Skipped, never for a failure).
#include <catch2/catch.hpp>

#include "test_skip.hpp"

TEST_CASE("skip signal: a skipped case", "[.skip_signal]") { ZOO_SKIP("demonstration"); }

TEST_CASE("skip signal: a passing case", "[.skip_signal]") { CHECK(1 + 1 == 2); }

TEST_CASE("skip signal: a case that skips after a failed check", "[.skip_signal]") {
  CHECK(1 + 1 == 3);
  ZOO_SKIP("must not hide the failure");
}
