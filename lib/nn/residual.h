// Residual-stream adds of the pre-norm blocks (x <- x + f(Norm x), RETRO.md B.3), forward and backward, threaded
// like the nn ops (nn/parallel.h): residual_sum for the forward stream, residual_add to accumulate gradients.
//   residual_sum: dst[i] = a[i] + b[i]          residual_add: dst[i] += src[i]          (n elements)
#pragma once
#include <cstdint>

#include "nn/parallel.h"

namespace retro::nn {

template <typename T>
void residual_sum(T* dst, const T* a, const T* b, std::int64_t n) {
    ranges(n, n, [&](std::int64_t s, std::int64_t e, int) {
        for (std::int64_t i = s; i < e; i++) dst[i] = a[i] + b[i];
    });
}

template <typename T>
void residual_add(T* dst, const T* src, std::int64_t n) {
    ranges(n, n, [&](std::int64_t s, std::int64_t e, int) {
        for (std::int64_t i = s; i < e; i++) dst[i] += src[i];
    });
}

}  // namespace retro::nn
