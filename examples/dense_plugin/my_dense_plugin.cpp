// A new dense-decoder family as a Zoo plugin, out of tree, in one short file: the model is the
// SDK's decoder runtime (zoo/layers/decoder.hpp, CPU float32 and CUDA bf16); the plugin says which
// config.json it serves and what differs from the defaults.
//
// "my_dense" here is a Llama-style decoder (pre-norm RMSNorm, GQA, RoPE with any HF scaling,
// SwiGLU) that also normalizes each q/k head, stored under the usual Hugging Face tensor names.
// A family that stores tensors under other names changes `spec.names` (e.g.
// spec.names.layer_prefix = "transformer.h.{}."; spec.names.q_proj = "attn.q"); one with biases
// sets spec.qkv_bias / o_bias / mlp_bias.
#include <zoo/layers/hf_config.hpp>
#include <zoo/plugin_abi.hpp>

namespace {

const ZooPluginDescriptor* descriptor() {
  static const char* const model_types[] = {"my_dense", nullptr};
  static const char* const architectures[] = {"MyDenseForCausalLM", nullptr};
  static const ZooPluginDescriptor d{ZOO_PLUGIN_ABI_VERSION, "my_dense", "0.1.0", model_types, architectures};
  return &d;
}

std::unique_ptr<zoo::Model> create(const zoo::ModelArgs& args, zoo::Host& host) {
  // Sizes, eps, RoPE (both config layouts, all scaling types), tied head, biases: read and checked;
  // fields that change the math and are not computed (partial rotary, sliding windows, ...) refused.
  zoo::layers::DecoderSpec spec = zoo::layers::read_hf_decoder_config(args.config, "my_dense", "my_dense config");
  spec.qk_norm = zoo::layers::QkNorm::per_head;  // what makes this family differ
  return zoo::layers::make_decoder_model(std::move(spec), args, host);
}

}  // namespace

ZOO_DEFINE_PLUGIN(descriptor, create)
