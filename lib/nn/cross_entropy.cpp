#include "nn/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "nn/parallel.h"

namespace retro::nn {

template <typename T>
T cross_entropy_forward(T* lse, std::int64_t* valid, const T* logits, const std::int32_t* targets, std::int64_t N,
                        std::int64_t V, std::int32_t ignore_index) {
    std::vector<T> row_loss(static_cast<std::size_t>(N), T(0));
    ranges(N, 30 * N * V, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t n = b; n < e; n++) {
            const T* l = logits + n * V;
            T mx = l[0];
            for (std::int64_t v = 1; v < V; v++) mx = std::max(mx, l[v]);
            T sum = 0;
            for (std::int64_t v = 0; v < V; v++) sum += std::exp(l[v] - mx);
            lse[n] = mx + std::log(sum);
            if (targets[n] != ignore_index) {
                RETRO_CHECK(targets[n] >= 0 && targets[n] < V, "target ", targets[n], " outside [0, ", V, ")");
                row_loss[n] = lse[n] - l[targets[n]];
            }
        }
    });
    std::int64_t m = 0;
    T total = 0;
    for (std::int64_t n = 0; n < N; n++)
        if (targets[n] != ignore_index) {
            m++;
            total += row_loss[n];
        }
    *valid = m;
    return m ? total / static_cast<T>(m) : T(0);
}

template <typename T>
void cross_entropy_backward(T* dlogits, T dloss, const T* logits, const T* lse, const std::int32_t* targets,
                            std::int64_t N, std::int64_t V, std::int32_t ignore_index, std::int64_t valid) {
    const T scale = valid ? dloss / static_cast<T>(valid) : T(0);
    ranges(N, 30 * N * V, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t n = b; n < e; n++) {
            T* d = dlogits + n * V;
            if (targets[n] == ignore_index || !valid) {
                std::fill(d, d + V, T(0));
                continue;
            }
            const T* l = logits + n * V;
            for (std::int64_t v = 0; v < V; v++) d[v] = std::exp(l[v] - lse[n]) * scale;
            d[targets[n]] -= scale;
        }
    });
}

#define RETRO_INSTANTIATE(T)                                                                                    \
    template T cross_entropy_forward<T>(T*, std::int64_t*, const T*, const std::int32_t*, std::int64_t,         \
                                        std::int64_t, std::int32_t);                                            \
    template void cross_entropy_backward<T>(T*, T, const T*, const T*, const std::int32_t*, std::int64_t,       \
                                            std::int64_t, std::int32_t, std::int64_t);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
