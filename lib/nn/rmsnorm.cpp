#include "nn/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "nn/fast_math.h"
#include "nn/parallel.h"

namespace retro::nn {

namespace {
RETRO_FAST_MATH_BEGIN
// Rows [b, e) of the forward and backward passes; float runs in vectorised clones (nn/fast_math.h).
template <typename T>
RETRO_ALWAYS_INLINE void forward_rows(T* y, T* norm, const T* x, const T* gamma, std::int64_t b, std::int64_t e,
                                      std::int64_t C) {
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(C)));
    const T eps = static_cast<T>(RMSNORM_EPS);
    for (std::int64_t n = b; n < e; n++) {
        const T* xr = x + n * C;
        T ss = 0;
#pragma omp simd reduction(+ : ss)
        for (std::int64_t c = 0; c < C; c++) ss += xr[c] * xr[c];
        const T nm = std::sqrt(ss) * scale;
        norm[n] = nm;
        const T inv = T(1) / (nm < eps ? eps : nm);
        T* yr = y + n * C;
#pragma omp simd
        for (std::int64_t c = 0; c < C; c++) yr[c] = xr[c] * inv * gamma[c];
    }
}

template <typename T>
RETRO_ALWAYS_INLINE void backward_rows(T* dx, T* pg, const T* dy, const T* x, const T* gamma, const T* norm,
                                       std::int64_t b, std::int64_t e, std::int64_t C) {
    const T eps = static_cast<T>(RMSNORM_EPS);
    for (std::int64_t n = b; n < e; n++) {
        const T* xr = x + n * C;
        const T* gr = dy + n * C;
        const T nm = norm[n];
        const T inv = T(1) / (nm < eps ? eps : nm);
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (std::int64_t c = 0; c < C; c++) {
            dot += gamma[c] * gr[c] * xr[c];
            pg[c] += gr[c] * xr[c] * inv;
        }
        T* dxr = dx + n * C;
        const T k = (nm >= eps && nm > T(0)) ? dot * inv * inv / (nm * static_cast<T>(C)) : T(0);
#pragma omp simd
        for (std::int64_t c = 0; c < C; c++) dxr[c] = gamma[c] * gr[c] * inv - k * xr[c];
    }
}

RETRO_SIMD_CLONES void forward_rows_f32(float* y, float* norm, const float* x, const float* gamma, std::int64_t b,
                                        std::int64_t e, std::int64_t C) {
    forward_rows(y, norm, x, gamma, b, e, C);
}
RETRO_SIMD_CLONES void backward_rows_f32(float* dx, float* pg, const float* dy, const float* x, const float* gamma,
                                         const float* norm, std::int64_t b, std::int64_t e, std::int64_t C) {
    backward_rows(dx, pg, dy, x, gamma, norm, b, e, C);
}
RETRO_FAST_MATH_END
}  // namespace

template <typename T>
void rmsnorm_forward(T* y, T* norm, const T* x, const T* gamma, std::int64_t N, std::int64_t C) {
    ranges(N, 4 * N * C, [&](std::int64_t b, std::int64_t e, int) {
        if constexpr (std::is_same_v<T, float>) forward_rows_f32(y, norm, x, gamma, b, e, C);
        else forward_rows(y, norm, x, gamma, b, e, C);
    });
}

template <typename T>
void rmsnorm_backward(T* dx, T* dgamma, const T* dy, const T* x, const T* gamma, const T* norm, std::int64_t N,
                      std::int64_t C) {
    // dgamma: a partial sum per block of kBlockRows rows (in row order), the partials added in block order: blocks
    // the shape alone fixes, so the sums do not depend on the thread count (as nn/linear.h's tiles)
    constexpr std::int64_t kBlockRows = 256;
    const std::int64_t blocks = (N + kBlockRows - 1) / kBlockRows;
    std::vector<T> part(static_cast<std::size_t>(blocks * C), T(0));
    for_each(blocks, 8 * N * C, [&](std::int64_t k) {
        T* pg = part.data() + k * C;
        const std::int64_t b = k * kBlockRows, e = std::min(N, b + kBlockRows);
        if constexpr (std::is_same_v<T, float>) backward_rows_f32(dx, pg, dy, x, gamma, norm, b, e, C);
        else backward_rows(dx, pg, dy, x, gamma, norm, b, e, C);
    });
    for (std::int64_t k = 0; k < blocks; k++)
        for (std::int64_t c = 0; c < C; c++) dgamma[c] += part[static_cast<std::size_t>(k * C + c)];
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, std::int64_t, std::int64_t);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, std::int64_t, std::int64_t);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*, const float*,
                                      std::int64_t, std::int64_t);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*, const double*, const double*,
                                       std::int64_t, std::int64_t);

}  // namespace retro::nn
