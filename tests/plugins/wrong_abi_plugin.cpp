// A plugin built against a future ABI. It deliberately exports no zoo_plugin_create: the host must
// reject it on the version alone, before it looks for the create function.
#include "zoo/plugin_abi.hpp"

namespace {

const char* const kTypes[] = {"wrong_abi_lm", nullptr};

const ZooPluginDescriptor* describe() {
  static const ZooPluginDescriptor descriptor{999u, "wrong_abi", "9.9.9", kTypes, nullptr};
  return &descriptor;
}

}  // namespace

ZOO_PLUGIN_EXPORT ::zoo::PluginDescriptorFn* const zoo_plugin_descriptor = &describe;
