// A shared object whose zoo_plugin_descriptor is the descriptor function itself, not the constant
// pointer to it that ZOO_DEFINE_PLUGIN exports: a host that read the symbol as a pointer would
// call the function's first code bytes. It must be refused by the symbol's type, before any call.
#include "zoo/plugin_abi.hpp"

namespace {
const char* const kTypes[] = {"function_descriptor_lm", nullptr};
}  // namespace

ZOO_PLUGIN_EXPORT const ZooPluginDescriptor* zoo_plugin_descriptor() {
  static const ZooPluginDescriptor descriptor{ZOO_PLUGIN_ABI_VERSION, "function_descriptor", "0.0.1", kTypes,
                                              nullptr};
  return &descriptor;
}
