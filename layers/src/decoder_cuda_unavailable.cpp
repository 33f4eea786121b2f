// Built when Zoo is configured without CUDA: the cuda device is a clear error, not a missing symbol.
#ifndef ZOO_WITH_CUDA
#include "decoder_backend.hpp"
#include "zoo/error.hpp"

namespace zoo::layers::inline ZOO_LAYERS_ABI {

std::shared_ptr<DecoderBackend> make_cuda_backend(const DecoderSpec& spec, const ModelArgs& args) {
  throw SettingError(spec.family + ": device " + args.device.str() + " requested, but this build of Zoo has no CUDA backend");
}

}  // namespace zoo::layers
#endif
