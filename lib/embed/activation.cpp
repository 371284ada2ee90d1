// Implementation of activation.h.
#include "embed/activation.h"

#include <algorithm>
#include <cmath>

#include "nn/packed_linear.h"

namespace retro {

bool activation_from_name(const std::string& name, Activation& out) {
    if (name == "gelu") out = Activation::GELU_ERF;
    else if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") out = Activation::GELU_TANH;
    else if (name == "relu") out = Activation::RELU;
    else if (name == "silu" || name == "swish") out = Activation::SILU;
    else if (name == "quick_gelu") out = Activation::QUICK_GELU;
    else return false;
    return true;
}

void activation_inplace(float* x, std::int64_t n, Activation act) {
    switch (act) {
        case Activation::GELU_ERF: nn::gelu_erf_inplace(x, n); break;
        case Activation::GELU_TANH:
            for (std::int64_t i = 0; i < n; ++i) {
                float v = x[i];
                x[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
            }
            break;
        case Activation::RELU:
            for (std::int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
            break;
        case Activation::SILU:
            for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
            break;
        case Activation::QUICK_GELU:
            for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-1.702f * x[i]));
            break;
    }
}

}  // namespace retro
