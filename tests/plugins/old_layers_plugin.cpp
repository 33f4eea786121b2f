// A plugin as it would be built against an older libzoo_layers: its model comes from
// make_decoder_model of ABI version 0, whose DecoderSpec had another layout. The host and the
// plugin ABI match; only the layers library differs, so the load must fail on that symbol (dlopen
// resolves it at once) and say which version the plugin wants, never call into the library.
#include <memory>

#include "zoo/plugin_abi.hpp"

namespace zoo::layers::abi_v0 {
struct DecoderSpec {
  int layout_of_an_older_release = 0;
};
std::unique_ptr<Model> make_decoder_model(DecoderSpec spec, const ModelArgs& args, Host& host);
}  // namespace zoo::layers::abi_v0

namespace {

const char* const kTypes[] = {"old_layers_lm", nullptr};

const ZooPluginDescriptor* describe() {
  static const ZooPluginDescriptor descriptor{ZOO_PLUGIN_ABI_VERSION, "old_layers", "0.0.1", kTypes, nullptr};
  return &descriptor;
}

std::unique_ptr<zoo::Model> create(const zoo::ModelArgs& args, zoo::Host& host) {
  return zoo::layers::abi_v0::make_decoder_model({}, args, host);
}

}  // namespace

ZOO_DEFINE_PLUGIN(describe, create)
