// A plugin of the current ABI whose toolchain fingerprint says another compiler and json release
// built it (as a plugin built elsewhere would). The host must refuse it before calling its create
// function, which therefore only fails the test if reached.
#include <cstdlib>

#include "zoo/plugin_abi.hpp"

namespace {

const char* const kTypes[] = {"wrong_toolchain_lm", nullptr};

const ZooPluginDescriptor* describe() {
  static const ZooPluginDescriptor descriptor{ZOO_PLUGIN_ABI_VERSION, "wrong_toolchain", "1.0.0", kTypes, nullptr,
                                              "gcc 1, libstdc++ 1 cxx11-abi=0, nlohmann_json 0.0.1"};
  return &descriptor;
}

std::unique_ptr<zoo::Model> create(const zoo::ModelArgs&, zoo::Host&) { std::abort(); }

}  // namespace

ZOO_DEFINE_PLUGIN(describe, create)
