#include "nn/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/parallel.h"

namespace retro::nn {

template <typename T>
void rmsnorm_forward(T* y, T* norm, const T* x, const T* gamma, std::int64_t N, std::int64_t C) {
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(C)));
    const T eps = static_cast<T>(RMSNORM_EPS);
    ranges(N, 4 * N * C, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t n = b; n < e; n++) {
            const T* xr = x + n * C;
            T ss = 0;
            for (std::int64_t c = 0; c < C; c++) ss += xr[c] * xr[c];
            const T nm = std::sqrt(ss) * scale;
            norm[n] = nm;
            const T inv = T(1) / std::max(nm, eps);
            T* yr = y + n * C;
            for (std::int64_t c = 0; c < C; c++) yr[c] = xr[c] * inv * gamma[c];
        }
    });
}

template <typename T>
void rmsnorm_backward(T* dx, T* dgamma, const T* dy, const T* x, const T* gamma, const T* norm, std::int64_t N,
                      std::int64_t C) {
    const T eps = static_cast<T>(RMSNORM_EPS);
    const int nt = thread_count();
    std::vector<T> part(static_cast<std::size_t>(nt) * C, T(0));
    ranges(N, 8 * N * C, [&](std::int64_t b, std::int64_t e, int t) {
        T* pg = part.data() + static_cast<std::int64_t>(t) * C;
        for (std::int64_t n = b; n < e; n++) {
            const T* xr = x + n * C;
            const T* gr = dy + n * C;
            const T nm = norm[n];
            const T d = std::max(nm, eps);
            const T inv = T(1) / d;
            T dot = 0;
            for (std::int64_t c = 0; c < C; c++) {
                dot += gamma[c] * gr[c] * xr[c];
                pg[c] += gr[c] * xr[c] * inv;
            }
            T* dxr = dx + n * C;
            const T k = (nm >= eps && nm > T(0)) ? dot * inv * inv / (nm * static_cast<T>(C)) : T(0);
            for (std::int64_t c = 0; c < C; c++) dxr[c] = gamma[c] * gr[c] * inv - k * xr[c];
        }
    });
    for (int t = 0; t < nt; t++)
        for (std::int64_t c = 0; c < C; c++) dgamma[c] += part[static_cast<std::size_t>(t) * C + c];
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, std::int64_t, std::int64_t);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, std::int64_t, std::int64_t);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*, const float*,
                                      std::int64_t, std::int64_t);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*, const double*, const double*,
                                       std::int64_t, std::int64_t);

}  // namespace retro::nn
