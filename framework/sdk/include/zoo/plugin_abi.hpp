#pragma once
// The boundary between the host and a plugin shared object.
//
// Every plugin exports two C symbols, both constant pointers to functions:
//   zoo_plugin_descriptor: `const ZooPluginDescriptor* ()`, plain C data the host reads first;
//   zoo_plugin_create:     `zoo::PluginCreateFn`, called only after the ABI version and the
//                          toolchain fingerprint matched.
// Use ZOO_DEFINE_PLUGIN from this header rather than writing them by hand. This header needs no
// Boost: the host reads the two symbols with Boost.DLL, plugins only define them.
#include <cstdint>
#include <memory>
#include <type_traits>

#include <nlohmann/json.hpp>  // its version is part of the fingerprint (model.hpp includes it anyway)

#include "zoo/host.hpp"
#include "zoo/model.hpp"

// Bumped on any change to ZooPluginDescriptor, ModelArgs, Model, Session, Host or the create
// signature. 3: row tables (Model::add_row_table, TableRows); the descriptor carries the toolchain
// fingerprint; the exports need no Boost. 4: sampling on the device (OutputRequest::sample,
// ForwardResult::sampled). 5: sampling a row table head on the device (OutputRequest::head_sample,
// ForwardResult::head_sampled). 6: Model::code_encoder (appended after every other virtual).
// 7: the batch runtime (zoo/batch.hpp, Model::new_runner appended), min-p and logprobs in sampling.
// 8: extensions found at run time (Model::find_extension, zoo/extension.hpp); row tables, speech
// and the codec left Model for the RowTables, Speech and Codec extensions. 9: scoring given ids
// (OutputRequest::score_ids, ForwardResult::scores), RunnerOptions::kv_memory_fraction. 10: penalties
// in SampleRequest (repetition, frequency, presence over the sequence's own tokens). 11: streamed
// speech (SpeechProgress::new_frames, CodeDecoder::context_frames appended). 12: tensor parallelism
// (ModelArgs::tensor_parallel appended; the TensorParallel extension). 13: batch invariance
// (ModelArgs::batch_invariant appended; the BatchInvariant extension).
#define ZOO_PLUGIN_ABI_VERSION 13u

#define ZOO_PLUGIN_STR_(x) #x
#define ZOO_PLUGIN_STR(x) ZOO_PLUGIN_STR_(x)

// The toolchain fingerprint: what else must match for C++ objects (std::string, std::unique_ptr,
// nlohmann::json, exceptions) to cross the boundary. The ABI version covers Zoo's own types; this
// covers the compiler (family and major version), the standard library (and libstdc++'s string
// ABI) and the nlohmann json release, whose object layout the two sides share.
#if defined(__clang__)
#define ZOO_PLUGIN_COMPILER "clang " ZOO_PLUGIN_STR(__clang_major__)
#elif defined(__GNUC__)
#define ZOO_PLUGIN_COMPILER "gcc " ZOO_PLUGIN_STR(__GNUC__)
#elif defined(_MSC_VER)
#define ZOO_PLUGIN_COMPILER "msvc " ZOO_PLUGIN_STR(_MSC_VER)
#else
#define ZOO_PLUGIN_COMPILER "unknown compiler"
#endif
#if defined(_LIBCPP_VERSION)
#define ZOO_PLUGIN_STDLIB "libc++ " ZOO_PLUGIN_STR(_LIBCPP_VERSION)
#elif defined(_GLIBCXX_RELEASE)
#define ZOO_PLUGIN_STDLIB "libstdc++ " ZOO_PLUGIN_STR(_GLIBCXX_RELEASE) " cxx11-abi=" ZOO_PLUGIN_STR(_GLIBCXX_USE_CXX11_ABI)
#else
#define ZOO_PLUGIN_STDLIB "unknown standard library"
#endif
#define ZOO_PLUGIN_TOOLCHAIN                                                                       \
  ZOO_PLUGIN_COMPILER ", " ZOO_PLUGIN_STDLIB ", nlohmann_json " ZOO_PLUGIN_STR(                    \
      NLOHMANN_JSON_VERSION_MAJOR) "." ZOO_PLUGIN_STR(NLOHMANN_JSON_VERSION_MINOR) "." ZOO_PLUGIN_STR(NLOHMANN_JSON_VERSION_PATCH)

extern "C" {
struct ZooPluginDescriptor {
  std::uint32_t abi_version;
  const char* name;
  const char* version;
  const char* const* model_types;    // nullptr-terminated, HF config.json "model_type"
  const char* const* architectures;  // nullptr-terminated, HF config.json "architectures"
  // Filled in by the compiler that builds the plugin: leave it out of the initializer.
  const char* toolchain = ZOO_PLUGIN_TOOLCHAIN;
};
}

namespace zoo {
using PluginDescriptorFn = const ZooPluginDescriptor*();
using PluginCreateFn = std::unique_ptr<Model>(const ModelArgs& args, Host& host);
// The fingerprint of the code including this header (the host compares a plugin's with its own).
inline constexpr const char* kPluginToolchain = ZOO_PLUGIN_TOOLCHAIN;
}  // namespace zoo

// Exported with default visibility, so this works in plugins built with -fvisibility=hidden
// (zoo_add_plugin does that). A declaration directly inside `extern "C"` has external linkage even
// when const.
#define ZOO_PLUGIN_EXPORT extern "C" __attribute__((visibility("default"), used))

// In exactly one .cpp of a plugin, at namespace scope:
//   ZOO_DEFINE_PLUGIN(my_descriptor_fn, my_create_fn)
// The exports are pointers the host reads by name, which erases the functions' types, so they are
// checked here: a mismatch would otherwise be undefined behaviour when the host calls them.
#define ZOO_DEFINE_PLUGIN(descriptor_fn, create_fn)                                                \
  static_assert(std::is_convertible_v<decltype(&descriptor_fn), ::zoo::PluginDescriptorFn*>,      \
                "ZOO_DEFINE_PLUGIN: descriptor must be `const ZooPluginDescriptor* ()`");          \
  static_assert(std::is_convertible_v<decltype(&create_fn), ::zoo::PluginCreateFn*>,              \
                "ZOO_DEFINE_PLUGIN: create must be "                                               \
                "`std::unique_ptr<zoo::Model> (const zoo::ModelArgs&, zoo::Host&)`");              \
  ZOO_PLUGIN_EXPORT ::zoo::PluginDescriptorFn* const zoo_plugin_descriptor = &descriptor_fn;       \
  ZOO_PLUGIN_EXPORT ::zoo::PluginCreateFn* const zoo_plugin_create = &create_fn;
