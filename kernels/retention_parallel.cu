// CUDA parallel retention (retention_cuda.h; CPU twin lib/retention/parallel.cpp): o = scale(QK^T ⊙ D)V with the
// causal pair kernel over the whole sequence, plus the h0 row-state term and ht = gamma^T h0 + K^T(V ⊙ zeta).
// Backward (RETENTION.md §6): dQ = dP K, dK = dP^T Q, dV = A^T dO as pair kernels (dK and dV from one dual kernel
// where the tensor-core form applies: launch_pair_dk_dv), plus the h0/dht terms.
#include "retention_common.cuh"

namespace retro::retention::cuda {
using namespace cuda_detail;

template <typename T>
void parallel_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0, T* o,
                      float* ht, CudaStream stream) {
    double scale;
    const Gammas g = prepare(s, opt, &scale, stream, "retention::cuda::parallel_forward");
    const Dims d{s.B, s.T, s.H, s.K, s.V};
    const int K = static_cast<int>(s.K), V = static_cast<int>(s.V);
    launch_pair<T, false>(q, k, v, o, d, K, V, s.T, static_cast<float>(scale), g, false, stream);
    if (h0) launch_row_state<T, false>(q, h0, o, d, K, V, Coef::xi, static_cast<float>(scale), g, stream);
    if (ht) launch_outer<T>(k, v, h0, ht, d, Coef::zeta, 1.0f, g, stream);
}

template <typename T>
void parallel_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                       const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0, CudaStream stream) {
    double scale;
    const Gammas g = prepare(s, opt, &scale, stream, "retention::cuda::parallel_backward");
    const Dims d{s.B, s.T, s.H, s.K, s.V};
    const int K = static_cast<int>(s.K), V = static_cast<int>(s.V);
    const float sc = static_cast<float>(scale);
    launch_pair<T, false>(dO, v, k, dq, d, V, K, s.T, sc, g, false, stream);   // dQ_n = Σ_{m<=n} scale D (dO_n·v_m) k_m
    launch_pair_dk_dv<T>(q, k, v, dO, dk, dv, d, K, V, s.T, sc, g, stream);     // dK_m = Σ_{n>=m} scale D (v_m·dO_n) q_n,
                                                                               // dV_m = Σ_{n>=m} scale D (k_m·q_n) dO_n
    if (h0) launch_row_state<T, true>(dO, h0, dq, d, V, K, Coef::xi, sc, g, stream);
    if (dht) {
        launch_row_state<T, true>(v, dht, dk, d, V, K, Coef::zeta, sc, g, stream);
        launch_row_state<T, false>(k, dht, dv, d, K, V, Coef::zeta, sc, g, stream);
    }
    if (dh0) launch_outer<T>(q, dO, dht, dh0, d, Coef::xi, sc, g, stream);
}

#define RETRO_PARALLEL_CUDA(T)                                                                                      \
    template void parallel_forward<T>(const Shape&, const Options&, const T*, const T*, const T*, const float*, T*, \
                                      float*, CudaStream);                                                          \
    template void parallel_backward<T>(const Shape&, const Options&, const T*, const T*, const T*, const float*,    \
                                       const T*, const float*, T*, T*, T*, float*, CudaStream);
RETRO_PARALLEL_CUDA(float)
RETRO_PARALLEL_CUDA(bf16)

}  // namespace retro::retention::cuda
