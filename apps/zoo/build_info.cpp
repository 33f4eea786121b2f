#include "build_info.hpp"

#include "zoo_build_info.hpp"  // generated at build time by cmake/BuildInfo.cmake

namespace zoo::cli {

const char* zoo_version() { return ZOO_BUILD_VERSION; }
const char* zoo_commit() { return ZOO_BUILD_COMMIT; }

}  // namespace zoo::cli
