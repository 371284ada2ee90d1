// Element-wise activations of the CPU encoders, in place over floats: BERT's and CLIP's hidden_act and T5's
// feed_forward_proj name them as transformers' ACT2FN does:
//   gelu                                  0.5·x·(1 + erf(x/√2))        (nn::gelu_erf_inplace)
//   gelu_new, gelu_pytorch_tanh, gelu_fast 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
//   relu                                  max(x, 0)
//   silu, swish                           x·sigmoid(x)
//   quick_gelu                            x·sigmoid(1.702·x)               (CLIP)
#pragma once
#include <cstdint>
#include <string>

namespace retro {

enum class Activation { GELU_ERF, GELU_TANH, RELU, SILU, QUICK_GELU };

// False when transformers' name is not one of the above.
bool activation_from_name(const std::string& name, Activation& out);
void activation_inplace(float* x, std::int64_t n, Activation act);

}  // namespace retro
