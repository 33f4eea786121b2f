// The ZOO_* switches: unset or empty is the default, anything else must parse.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "scoped_env.hpp"
#include "zoo/kernels/env.hpp"

namespace {

using zoo::test::ScopedEnv;

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("env_int: default when unset or empty, the value in range, a one-line error otherwise", "[env]") {
  using zoo::kernels::env_int;
  const char* name = "ZOO_TEST_ENV_INT";
  {
    ScopedEnv e(name, nullptr);
    CHECK_FALSE(env_int(name, 0, 8).has_value());
  }
  {
    ScopedEnv e(name, "");
    CHECK_FALSE(env_int(name, 0, 8).has_value());
  }
  for (const char* ok : {"0", "3", "8"}) {
    ScopedEnv e(name, ok);
    CHECK(env_int(name, 0, 8) == std::atol(ok));
  }
  for (const char* bad : {"9", "-1", "two", "3x", " 3", "99999999999999999999999"}) {
    INFO("value '" << bad << "'");
    ScopedEnv e(name, bad);
    CHECK(error_of([&] { (void)env_int(name, 0, 8); }) ==
          std::string("ZOO_TEST_ENV_INT must be an integer from 0 to 8, got '") + bad + "'");
  }
}

TEST_CASE("env_flag: 0 or 1, the fallback when unset or empty, a one-line error otherwise", "[env]") {
  using zoo::kernels::env_flag;
  const char* name = "ZOO_TEST_ENV_FLAG";
  for (const bool fallback : {true, false}) {
    ScopedEnv e(name, nullptr);
    CHECK(env_flag(name, fallback) == fallback);
  }
  {
    ScopedEnv e(name, "");
    CHECK(env_flag(name, true));
  }
  {
    ScopedEnv e(name, "0");
    CHECK_FALSE(env_flag(name, true));
  }
  {
    ScopedEnv e(name, "1");
    CHECK(env_flag(name, false));
  }
  for (const char* bad : {"off", "yes", "2", "true"}) {
    ScopedEnv e(name, bad);
    CHECK(error_of([&] { (void)env_flag(name, true); }) == std::string("ZOO_TEST_ENV_FLAG must be 0 or 1, got '") + bad + "'");
  }
}
