// Built when Zoo is configured without CUDA: the cuda device is a clear error, not a missing symbol.
#ifndef ZOO_WITH_CUDA
#include "qwen3_backend.hpp"
#include "zoo/error.hpp"

namespace zoo::qwen3 {

std::shared_ptr<Qwen3Backend> make_cuda_backend(const Qwen3Config&, const ModelArgs& args) {
  throw SettingError("qwen3: device " + args.device.str() + " requested, but this build of Zoo has no CUDA backend");
}

}  // namespace zoo::qwen3
#endif
