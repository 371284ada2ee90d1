// GELU, exact (erf) form as torch.nn.GELU() default:
//   y = x/2 (1 + erf(x/sqrt 2));   dy/dx = (1 + erf(x/sqrt 2))/2 + x exp(-x^2/2)/sqrt(2 pi)
// Elementwise over N values; dx = dy * dy/dx (activations: =).
#pragma once
#include <cstdint>

namespace retro::nn {

template <typename T>
void gelu_forward(T* y, const T* x, std::int64_t N);
template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t N);

}  // namespace retro::nn
