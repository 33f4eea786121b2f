#pragma once

namespace zoo::cli {

// The project version and the git commit the binary was built from ("unknown" outside a git
// checkout; "+dirty" when tracked files had changes), recorded by --version and `zoo bench --json`.
const char* zoo_version();
const char* zoo_commit();

}  // namespace zoo::cli
