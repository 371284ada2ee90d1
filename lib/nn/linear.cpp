#include "nn/linear.h"

#include <vector>

#include "nn/parallel.h"
#include "nn/blas.h"

namespace retro::nn {

template <typename T>
void linear_forward(T* y, const T* x, const T* W, const T* b, std::int64_t N, std::int64_t I, std::int64_t O) {
    if (N == 0) return;
    gemm(false, true, N, O, I, T(1), x, I, W, I, T(0), y, O);
    if (b) {
        ranges(N, N * O, [&](std::int64_t r0, std::int64_t r1, int) {
            for (std::int64_t n = r0; n < r1; n++)
                for (std::int64_t o = 0; o < O; o++) y[n * O + o] += b[o];
        });
    }
}

template <typename T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, std::int64_t N, std::int64_t I,
                     std::int64_t O) {
    if (N == 0) return;
    if (dx) gemm(false, false, N, I, O, T(1), dy, O, W, I, T(0), dx, I);
    gemm(true, false, O, I, N, T(1), dy, O, x, I, T(1), dW, I);
    if (db) {
        ranges(O, N * O, [&](std::int64_t o0, std::int64_t o1, int) {
            for (std::int64_t n = 0; n < N; n++)
                for (std::int64_t o = o0; o < o1; o++) db[o] += dy[n * O + o];
        });
    }
}

template void linear_forward<float>(float*, const float*, const float*, const float*, std::int64_t, std::int64_t,
                                    std::int64_t);
template void linear_forward<double>(double*, const double*, const double*, const double*, std::int64_t,
                                     std::int64_t, std::int64_t);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, std::int64_t,
                                     std::int64_t, std::int64_t);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      std::int64_t, std::int64_t, std::int64_t);

}  // namespace retro::nn
