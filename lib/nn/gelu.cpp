#include "nn/gelu.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "nn/fast_math.h"
#include "nn/parallel.h"

namespace retro::nn {

namespace {
RETRO_FAST_MATH_BEGIN
// float: call-free erf / exp so that the loops vectorise (nn/fast_math.h); double: libm.
RETRO_ALWAYS_INLINE float erf_of(float x) { return fast_erf(x); }
RETRO_ALWAYS_INLINE double erf_of(double x) { return std::erf(x); }
RETRO_ALWAYS_INLINE float exp_neg_of(float x) { return fast_exp_neg(x); }
RETRO_ALWAYS_INLINE double exp_neg_of(double x) { return std::exp(x); }

template <typename T>
RETRO_ALWAYS_INLINE void forward_range(T* y, const T* x, std::int64_t n) {
    const T r2 = static_cast<T>(0.70710678118654752440);
#pragma omp simd
    for (std::int64_t i = 0; i < n; i++) y[i] = T(0.5) * x[i] * (T(1) + erf_of(x[i] * r2));
}

template <typename T>
RETRO_ALWAYS_INLINE void backward_range(T* dx, const T* dy, const T* x, std::int64_t n) {
    const T r2 = static_cast<T>(0.70710678118654752440);
    const T inv_sqrt_2pi = static_cast<T>(0.39894228040143267794);
#pragma omp simd
    for (std::int64_t i = 0; i < n; i++) {
        const T v = x[i];
        const T cdf = T(0.5) * (T(1) + erf_of(v * r2));
        const T pdf = exp_neg_of(T(-0.5) * v * v) * inv_sqrt_2pi;
        dx[i] = dy[i] * (cdf + v * pdf);
    }
}

RETRO_SIMD_CLONES void forward_f32(float* y, const float* x, std::int64_t n) { forward_range(y, x, n); }
RETRO_SIMD_CLONES void backward_f32(float* dx, const float* dy, const float* x, std::int64_t n) {
    backward_range(dx, dy, x, n);
}
void forward_f64(double* y, const double* x, std::int64_t n) { forward_range(y, x, n); }
void backward_f64(double* dx, const double* dy, const double* x, std::int64_t n) { backward_range(dx, dy, x, n); }
RETRO_FAST_MATH_END
}  // namespace

// The elements go in blocks the length alone fixes, each taken whole by a thread: a vectorised loop computes the
// elements of its remainder (the last few of a range, in narrower vectors or one by one) in other bits than those
// of its body, so ranges cut by the thread count gave a few elements other values at 3 threads than at 1, 2, 4 or 8,
// and retro-train's weights with them (a helper's reproducibility campaign, session 56). A block is a multiple of
// every vector width: only the array's own end is a remainder, as in one loop over the whole array.
constexpr std::int64_t kBlock = 4096;

template <typename T>
void gelu_forward(T* y, const T* x, std::int64_t N) {
    for_each((N + kBlock - 1) / kBlock, 30 * N, [&](std::int64_t k) {
        const std::int64_t b = k * kBlock, n = std::min(kBlock, N - b);
        if constexpr (std::is_same_v<T, float>) forward_f32(y + b, x + b, n);
        else forward_f64(y + b, x + b, n);
    });
}

template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, std::int64_t N) {
    for_each((N + kBlock - 1) / kBlock, 40 * N, [&](std::int64_t k) {
        const std::int64_t b = k * kBlock, n = std::min(kBlock, N - b);
        if constexpr (std::is_same_v<T, float>) backward_f32(dx + b, dy + b, x + b, n);
        else backward_f64(dx + b, dy + b, x + b, n);
    });
}

template void gelu_forward<float>(float*, const float*, std::int64_t);
template void gelu_forward<double>(double*, const double*, std::int64_t);
template void gelu_backward<float>(float*, const float*, const float*, std::int64_t);
template void gelu_backward<double>(double*, const double*, const double*, std::int64_t);

}  // namespace retro::nn
