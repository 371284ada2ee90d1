#include "nn/feed_forward.h"

#include <memory>

#include "nn/gelu.h"
#include "nn/linear.h"

namespace retro::nn {

template <typename T>
void feed_forward_forward(T* y, FeedForwardCache<T>& c, const T* x, const FeedForwardParams<T>& p, std::int64_t N,
                          std::int64_t dim, std::int64_t inner) {
    c.x = x;
    c.h.resize(static_cast<std::size_t>(N * inner));
    c.g.resize(c.h.size());
    linear_forward(c.h.data(), x, p.w1, p.b1, N, dim, inner);
    gelu_forward(c.g.data(), c.h.data(), N * inner);
    linear_forward(y, c.g.data(), p.w2, p.b2, N, inner, dim);
}

template <typename T>
void feed_forward_backward(T* dx, const FeedForwardParams<T>& g, const T* dy, const FeedForwardCache<T>& c,
                           const FeedForwardParams<T>& p, std::int64_t N, std::int64_t dim, std::int64_t inner) {
    std::unique_ptr<T[]> dgel(new T[static_cast<std::size_t>(N * inner)]);   // written before read: no zero fill
    linear_backward(dgel.get(), g.w2, g.b2, dy, c.g.data(), p.w2, N, inner, dim);
    gelu_backward(dgel.get(), dgel.get(), c.h.data(), N * inner);
    linear_backward(dx, g.w1, g.b1, dgel.get(), c.x, p.w1, N, dim, inner);
}

#define RETRO_INSTANTIATE(T)                                                                                   \
    template void feed_forward_forward<T>(T*, FeedForwardCache<T>&, const T*, const FeedForwardParams<T>&,     \
                                          std::int64_t, std::int64_t, std::int64_t);                           \
    template void feed_forward_backward<T>(T*, const FeedForwardParams<T>&, const T*, const FeedForwardCache<T>&, \
                                           const FeedForwardParams<T>&, std::int64_t, std::int64_t, std::int64_t);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
