// Implementation of layer_norm.h.
#include "embed/layer_norm.h"

#include <cmath>
#include <cstring>

#include "nn/fast_math.h"

namespace retro {

RETRO_FAST_MATH_BEGIN

RETRO_SIMD_CLONES void add_layer_norm_rows(float* X, const float* Y, std::int64_t rows, int n, const float* g,
                                          const float* b, float eps) {
    for (std::int64_t r = 0; r < rows; ++r) {
        float* x = X + r * n;
        float sum = 0;
        if (Y) {
            const float* y = Y + r * n;
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < n; ++j) {
                x[j] += y[j];
                sum += x[j];
            }
        } else {
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < n; ++j) sum += x[j];
        }
        float mean = sum / static_cast<float>(n), var = 0;
#pragma omp simd reduction(+ : var)
        for (int j = 0; j < n; ++j) var += (x[j] - mean) * (x[j] - mean);
        float inv = 1.0f / std::sqrt(var / static_cast<float>(n) + eps);
#pragma omp simd
        for (int j = 0; j < n; ++j) x[j] = (x[j] - mean) * inv * g[j] + b[j];
    }
}

RETRO_FAST_MATH_END

void layer_norm_rows(const float* X, float* Y, std::int64_t rows, int n, const float* g, const float* b, float eps) {
    std::memcpy(Y, X, static_cast<std::size_t>(rows) * n * sizeof(float));
    add_layer_norm_rows(Y, nullptr, rows, n, g, b, eps);
}

}  // namespace retro
