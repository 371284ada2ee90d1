// RMSNorm exactly as RETRO-pytorch 0.3.9 defines it (RMSNorm class, gated=False):
//   norm[n] = ||x[n, :]||_2 * C^(-1/2);   d[n] = max(norm[n], eps);   y[n, c] = x[n, c] / d[n] * gamma[c]
// eps = 1e-8 clamps the RMS (it is not added under the square root). Shapes: x, y [N, C]; gamma [C].
// backward (torch's clamp passes the gradient where norm >= eps):
//   dgamma[c] += sum_n dy[n, c] x[n, c] / d[n]                                  (parameters: +=)
//   dx[n, c]   = gamma[c] dy[n, c] / d[n] - [norm >= eps] x[n, c] (sum_j gamma_j dy_j x_j) / (d^2 norm C)  (=)
#pragma once
#include <cstdint>

namespace retro::nn {

inline constexpr double RMSNORM_EPS = 1e-8;

// `norm` [N] is saved for the backward pass.
template <typename T>
void rmsnorm_forward(T* y, T* norm, const T* x, const T* gamma, std::int64_t N, std::int64_t C);
template <typename T>
void rmsnorm_backward(T* dx, T* dgamma, const T* dy, const T* x, const T* gamma, const T* norm, std::int64_t N,
                      std::int64_t C);

}  // namespace retro::nn
