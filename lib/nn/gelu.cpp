#include "nn/gelu.h"

#include <cmath>

#include "nn/parallel.h"

namespace retro::nn {

template <typename T>
void gelu_forward(T* y, const T* x, std::int64_t N) {
    const T r2 = static_cast<T>(0.70710678118654752440);
    ranges(N, 30 * N, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t i = b; i < e; i++) y[i] = T(0.5) * x[i] * (T(1) + std::erf(x[i] * r2));
    });
}

template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t N) {
    const T r2 = static_cast<T>(0.70710678118654752440);
    const T inv_sqrt_2pi = static_cast<T>(0.39894228040143267794);
    ranges(N, 40 * N, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t i = b; i < e; i++) {
            const T v = x[i];
            const T cdf = T(0.5) * (T(1) + std::erf(v * r2));
            const T pdf = std::exp(T(-0.5) * v * v) * inv_sqrt_2pi;
            dx[i] = dy[i] * (cdf + v * pdf);
        }
    });
}

template void gelu_forward<float>(float*, const float*, std::int64_t);
template void gelu_forward<double>(double*, const double*, std::int64_t);
template void gelu_backward<float>(float*, const float*, const float*, std::int64_t);
template void gelu_backward<double>(double*, const double*, const double*, std::int64_t);

}  // namespace retro::nn
