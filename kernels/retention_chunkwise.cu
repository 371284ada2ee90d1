// CUDA chunkwise retention (retention_cuda.h; CPU twin lib/retention/chunkwise.cpp): intra-chunk products with the
// pair kernel windowed to chunks (shared-memory tiles), then the state walk, one block per (state tile, b·h) with
// the tile in shared memory: O_c += scale (Q_c S_prev) ⊙ xi, S = gamma^L S + K_c^T (V_c ⊙ zeta) (RETENTION.md §1).
// Backward is chunkwise too: three windowed pair kernels, then dQ (forward walk), dK + dh0 and dV (reverse walks).
// bf16 with chunk 64 and head dims the tensor-core walk takes, on a device that lets a block have its shared memory
// (plan_chunkwise, retention/retention_launch.h), runs retention_chunk_tc.cuh instead: one fused walk for the
// forward, three for the backward; elsewhere (an sm_86/89 card at K = 128) the CUDA-core walk below.
#include "retention_chunk_tc.cuh"
#include "retention_common.cuh"

#include <type_traits>

namespace retro::retention::cuda {
using namespace cuda_detail;

template <typename T>
void chunkwise_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0, T* o,
                       float* ht, CudaStream stream) {
    double scale;
    const Gammas g = prepare(s, opt, &scale, stream, "retention::cuda::chunkwise_forward");
    const Dims d{s.B, s.T, s.H, s.K, s.V};
    const long C = std::min<long>(opt.chunk_size, s.T);
    const float sc = static_cast<float>(scale);
    if constexpr (std::is_same_v<T, bf16>) {
        if (plan_chunkwise(true, s.K, s.V, C, false, optin_shared_bytes()).tensor_cores) {   // (A,B,C) = (q,k,v), M = S
            launch_chunk_tc<false>(q, k, v, o, h0, ht, false, d, static_cast<int>(s.K), static_cast<int>(s.V), sc, g,
                                   stream);
            return;
        }
    }
    launch_pair<T, false>(q, k, v, o, d, static_cast<int>(s.K), static_cast<int>(s.V), C, sc, g, false, stream);
    launch_walk<T, Walk::fwd_o, false>(q, k, v, nullptr, o, h0, ht, d, C, sc, g, stream);
}

template <typename T>
void chunkwise_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                        const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0, CudaStream stream) {
    double scale;
    const Gammas g = prepare(s, opt, &scale, stream, "retention::cuda::chunkwise_backward");
    const Dims d{s.B, s.T, s.H, s.K, s.V};
    const long C = std::min<long>(opt.chunk_size, s.T);
    const int K = static_cast<int>(s.K), V = static_cast<int>(s.V);
    const float sc = static_cast<float>(scale);
    if constexpr (std::is_same_v<T, bf16>) {
        if (plan_chunkwise(true, K, V, C, true, optin_shared_bytes()).tensor_cores) {   // retention_chunk_tc.cuh
            launch_chunk_tc<false>(dO, v, k, dq, h0, nullptr, true, d, V, K, sc, g, stream);   // M = S^T
            launch_chunk_tc<true>(v, dO, q, dk, dht, dh0, true, d, V, K, sc, g, stream);       // M = G^T
            launch_chunk_tc<true>(k, q, dO, dv, dht, nullptr, false, d, K, V, sc, g, stream);  // M = G
            return;
        }
    }
    launch_pair<T, false>(dO, v, k, dq, d, V, K, C, sc, g, false, stream);
    launch_pair<T, true>(v, dO, q, dk, d, V, K, C, sc, g, false, stream);
    launch_pair<T, true>(k, q, dO, dv, d, K, V, C, sc, g, false, stream);
    launch_walk<T, Walk::fwd_dq, false>(q, k, v, dO, dq, h0, nullptr, d, C, sc, g, stream);
    launch_walk<T, Walk::rev_dk, false>(q, k, v, dO, dk, dht, dh0, d, C, sc, g, stream);
    launch_walk<T, Walk::rev_dv, false>(q, k, v, dO, dv, dht, nullptr, d, C, sc, g, stream);
}

#define RETRO_CHUNKWISE_CUDA(T)                                                                                      \
    template void chunkwise_forward<T>(const Shape&, const Options&, const T*, const T*, const T*, const float*, T*, \
                                       float*, CudaStream);                                                          \
    template void chunkwise_backward<T>(const Shape&, const Options&, const T*, const T*, const T*, const float*,    \
                                        const T*, const float*, T*, T*, T*, float*, CudaStream);
RETRO_CHUNKWISE_CUDA(float)
RETRO_CHUNKWISE_CUDA(bf16)

}  // namespace retro::retention::cuda
