#pragma once
// The version of libzoo_layers' binary interface: the layout of DecoderSpec, RopeTable and the
// other types its headers declare, and the signatures of the functions it exports.
//
// A plugin that builds its model from these layers passes a DecoderSpec by value into the
// library, so a plugin compiled against another layout would hand over bytes the library reads as
// different fields. Everything the library declares lives in the inline namespace
// zoo::layers::ZOO_LAYERS_ABI, which is part of every exported symbol's name: such a plugin fails
// to load (an undefined symbol naming the version it was built for), and `zoo plugins` lists it
// as a problem saying which version it wants. Bump it on any change to a layers header's types or
// function signatures (docs/plugins.md).
#define ZOO_LAYERS_ABI_VERSION 4
#define ZOO_LAYERS_ABI abi_v4
