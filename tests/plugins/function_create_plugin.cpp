// A valid descriptor, but zoo_plugin_create is the create function itself rather than a constant
// pointer to it: refused by the symbol's type when loaded, so no command ever calls code bytes.
#include <cstdlib>

#include "zoo/plugin_abi.hpp"

namespace {

const char* const kTypes[] = {"function_create_lm", nullptr};

const ZooPluginDescriptor* describe() {
  static const ZooPluginDescriptor descriptor{ZOO_PLUGIN_ABI_VERSION, "function_create", "0.0.1", kTypes, nullptr};
  return &descriptor;
}

}  // namespace

ZOO_PLUGIN_EXPORT ::zoo::PluginDescriptorFn* const zoo_plugin_descriptor = &describe;
ZOO_PLUGIN_EXPORT std::unique_ptr<zoo::Model> zoo_plugin_create(const zoo::ModelArgs&, zoo::Host&) { std::abort(); }
