// CUDA recurrent retention (retention_cuda.h; CPU twin lib/retention/recurrent.cpp): S_n = gamma S_{n-1} + k_n^T v_n,
// o_n = scale q_n S_n. Backward as fla's fused_recurrent (RETENTION.md §6): dq by replaying the states, dk (+ dh0) and
// dv by reverse walks of G. Each walk whose state line (K for o and dv, V for dq and dk) is at most 128 runs fused
// over time with the state in registers (retention_recurrent_warp.cuh, session 21); longer lines the walk with the
// state tile in shared memory (retention_common.cuh).
#include "retention_common.cuh"
#include "retention_recurrent_warp.cuh"

namespace retro::retention::cuda {
using namespace cuda_detail;

namespace {

namespace rw = recurrent_warp;

template <typename T> struct WarpData { using type = float; };
template <> struct WarpData<bf16> { using type = rw::u16; };

template <int LMAX, typename T, rw::WalkKind W>
void launch_warp_walk(const T* q, const T* k, const T* v, const T* dO, T* out, const float* init, float* fin,
                      const Dims& d, float scale, const Gammas& g, cudaStream_t stream) {
    using X = typename WarpData<T>::type;
    constexpr bool column = W == rw::WalkKind::fwd_o || W == rw::WalkKind::rev_dv;
    rw::WalkDecays lg{};
    for (long h = 0; h < d.H; ++h) lg.lg[h] = g.lg[h];
    const rw::WalkArgs args{d.B, d.T, d.H, d.K, d.V, scale};
    const dim3 grid(static_cast<unsigned>(((column ? d.V : d.K) + rw::kLines - 1) / rw::kLines),
                    static_cast<unsigned>(d.B * d.H));
    auto x = [](const T* p) { return reinterpret_cast<const X*>(p); };
    rw::recurrent_walk_warp<LMAX, X, W><<<grid, rw::kThreads, 0, stream>>>(x(q), x(k), x(v), x(dO),
                                                                          reinterpret_cast<X*>(out), init, fin, args, lg);
    constexpr const char* names[4] = {"retention recurrent_walk_warp (o)", "retention recurrent_walk_warp (dq)",
                                      "retention recurrent_walk_warp (dk)", "retention recurrent_walk_warp (dv)"};
    RETRO_CUDA_LAUNCH_CHECK(names[static_cast<int>(W)], stream);
}

// One recurrent walk: fused over time in registers where its line fits 64 or 128, else the shared-memory walk.
template <typename T, rw::WalkKind W, Walk SharedWalk>
void recurrent_walk(const T* q, const T* k, const T* v, const T* dO, T* out, const float* init, float* fin,
                    const Dims& d, float scale, const Gammas& g, cudaStream_t stream) {
    if (rw::fits(W, d.K, d.V, 64))
        return launch_warp_walk<64, T, W>(q, k, v, dO, out, init, fin, d, scale, g, stream);
    if (rw::fits(W, d.K, d.V, 128))
        return launch_warp_walk<128, T, W>(q, k, v, dO, out, init, fin, d, scale, g, stream);
    launch_walk<T, SharedWalk, true>(q, k, v, dO, out, init, fin, d, 1, scale, g, stream);
}

}  // namespace

template <typename T>
void recurrent_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0, T* o,
                       float* ht, CudaStream stream) {
    double scale;
    const Gammas g = prepare(s, opt, &scale, stream, "retention::cuda::recurrent_forward");
    const Dims d{s.B, s.T, s.H, s.K, s.V};
    recurrent_walk<T, rw::WalkKind::fwd_o, Walk::fwd_o>(q, k, v, nullptr, o, h0, ht, d, static_cast<float>(scale), g,
                                                        stream);
}

template <typename T>
void recurrent_backward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0,
                        const T* dO, const float* dht, T* dq, T* dk, T* dv, float* dh0, CudaStream stream) {
    double scale;
    const Gammas g = prepare(s, opt, &scale, stream, "retention::cuda::recurrent_backward");
    const Dims d{s.B, s.T, s.H, s.K, s.V};
    const float sc = static_cast<float>(scale);
    recurrent_walk<T, rw::WalkKind::fwd_dq, Walk::fwd_dq>(q, k, v, dO, dq, h0, nullptr, d, sc, g, stream);
    recurrent_walk<T, rw::WalkKind::rev_dk, Walk::rev_dk>(q, k, v, dO, dk, dht, dh0, d, sc, g, stream);
    recurrent_walk<T, rw::WalkKind::rev_dv, Walk::rev_dv>(q, k, v, dO, dv, dht, nullptr, d, sc, g, stream);
}

#define RETRO_RECURRENT_CUDA(T)                                                                                      \
    template void recurrent_forward<T>(const Shape&, const Options&, const T*, const T*, const T*, const float*, T*, \
                                       float*, CudaStream);                                                          \
    template void recurrent_backward<T>(const Shape&, const Options&, const T*, const T*, const T*, const float*,    \
                                        const T*, const float*, T*, T*, T*, float*, CudaStream);
RETRO_RECURRENT_CUDA(float)
RETRO_RECURRENT_CUDA(bf16)

}  // namespace retro::retention::cuda
