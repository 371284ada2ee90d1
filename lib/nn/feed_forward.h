// RETRO-pytorch's FeedForward: Linear(dim -> inner, bias) -> GELU (erf) -> Dropout(0) -> Linear(inner -> dim, bias),
// inner = 4 dim. Parameter names: ff.0.weight [inner, dim], ff.0.bias [inner], ff.3.weight [dim, inner], ff.3.bias [dim].
//   h = x W1^T + b1;  g = gelu(h);  y = g W2^T + b2           x, y [N, dim]; h, g [N, inner]
// backward: dx (=), parameter gradients (+=).
#pragma once
#include <cstdint>
#include <vector>

namespace retro::nn {

template <typename T>
struct FeedForwardParams {
    T* w1 = nullptr;
    T* b1 = nullptr;
    T* w2 = nullptr;
    T* b2 = nullptr;
};

template <typename T>
struct FeedForwardCache {
    const T* x = nullptr;
    std::vector<T> h, g;
};

template <typename T>
void feed_forward_forward(T* y, FeedForwardCache<T>& cache, const T* x, const FeedForwardParams<T>& p, std::int64_t N,
                          std::int64_t dim, std::int64_t inner);
template <typename T>
void feed_forward_backward(T* dx, const FeedForwardParams<T>& grads, const T* dy, const FeedForwardCache<T>& cache,
                           const FeedForwardParams<T>& p, std::int64_t N, std::int64_t dim, std::int64_t inner);

}  // namespace retro::nn
