// CUDA recurrent retention (retention_cuda.h; CPU twin lib/retention/recurrent.cpp): the state walk one token at a
// time with the state tile in shared memory: S_n = gamma S_{n-1} + k_n^T v_n, o_n = scale q_n S_n. Backward as fla's
// fused_recurrent (RETENTION.md §6): dq by replaying the states, dk (+ dh0) and dv by reverse walks of G.
#include "retention_common.cuh"

namespace retro::retention::cuda {
using namespace cuda_detail;

template <typename T>
void recurrent_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0, T* o,
                       float* ht, CudaStream stream) {
    double scale;
    const Gammas g = prepare(s, opt, &scale, stream, "retention::cuda::recurrent_forward");
    const Dims d{s.B, s.T, s.H, s.K, s.V};
    launch_walk<T, Walk::fwd_o, true>(q, k, v, nullptr, o, h0, ht, d, 1, static_cast<float>(scale), g, stream);
}

template <typename T>
void recurrent_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                        const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0, CudaStream stream) {
    double scale;
    const Gammas g = prepare(s, opt, &scale, stream, "retention::cuda::recurrent_backward");
    const Dims d{s.B, s.T, s.H, s.K, s.V};
    const float sc = static_cast<float>(scale);
    launch_walk<T, Walk::fwd_dq, true>(q, k, v, dO, dq, h0, nullptr, d, 1, sc, g, stream);
    launch_walk<T, Walk::rev_dk, true>(q, k, v, dO, dk, dht, dh0, d, 1, sc, g, stream);
    launch_walk<T, Walk::rev_dv, true>(q, k, v, dO, dv, dht, nullptr, d, 1, sc, g, stream);
}

#define RETRO_RECURRENT_CUDA(T)                                                                                      \
    template void recurrent_forward<T>(const Shape&, const Options&, const T*, const T*, const T*, const float*, T*, \
                                       float*, CudaStream);                                                          \
    template void recurrent_backward<T>(const Shape&, const Options&, const T*, const T*, const T*, const float*,    \
                                        const T*, const float*, T*, T*, T*, float*, CudaStream);
RETRO_RECURRENT_CUDA(float)
RETRO_RECURRENT_CUDA(bf16)

}  // namespace retro::retention::cuda
