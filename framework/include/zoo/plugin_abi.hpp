#pragma once
// The boundary between the host and a plugin shared object.
//
// Every plugin exports two symbols with BOOST_DLL_ALIAS:
//   zoo_plugin_descriptor: `const ZooPluginDescriptor* ()`, plain C data the host reads first;
//   zoo_plugin_create:     `zoo::PluginCreateFn`, called only after the ABI version matched.
// Use ZOO_DEFINE_PLUGIN from this header rather than writing them by hand.
#include <cstdint>
#include <memory>
#include <type_traits>

#include <boost/dll/alias.hpp>

#include "zoo/host.hpp"
#include "zoo/model.hpp"

// Bumped on any change to ZooPluginDescriptor, ModelArgs, Model, Session, Host or the create
// signature.
#define ZOO_PLUGIN_ABI_VERSION 3u

extern "C" {
struct ZooPluginDescriptor {
  std::uint32_t abi_version;
  const char* name;
  const char* version;
  const char* const* model_types;    // nullptr-terminated, HF config.json "model_type"
  const char* const* architectures;  // nullptr-terminated, HF config.json "architectures"
};
}

namespace zoo {
using PluginDescriptorFn = const ZooPluginDescriptor*();
using PluginCreateFn = std::unique_ptr<Model>(const ModelArgs& args, Host& host);
}  // namespace zoo

// In exactly one .cpp of a plugin, at namespace scope:
//   ZOO_DEFINE_PLUGIN(my_descriptor_fn, my_create_fn)
// The aliases are exported with default visibility, so this works in plugins built with
// -fvisibility=hidden (zoo_add_plugin does that). BOOST_DLL_ALIAS erases the functions' types, so
// they are checked here: a mismatch would otherwise be undefined behaviour when the host calls them.
#define ZOO_DEFINE_PLUGIN(descriptor_fn, create_fn)                                                \
  static_assert(std::is_convertible_v<decltype(&descriptor_fn), ::zoo::PluginDescriptorFn*>,      \
                "ZOO_DEFINE_PLUGIN: descriptor must be `const ZooPluginDescriptor* ()`");          \
  static_assert(std::is_convertible_v<decltype(&create_fn), ::zoo::PluginCreateFn*>,              \
                "ZOO_DEFINE_PLUGIN: create must be "                                               \
                "`std::unique_ptr<zoo::Model> (const zoo::ModelArgs&, zoo::Host&)`");              \
  BOOST_DLL_ALIAS(descriptor_fn, zoo_plugin_descriptor)                                            \
  BOOST_DLL_ALIAS(create_fn, zoo_plugin_create)
