// CUDA chunkwise retention (retention_cuda.h; CPU twin lib/retention/chunkwise.cpp): intra-chunk products with the
// pair kernel windowed to chunks, then the state walk, one block per (state tile, b·h) with the tile in shared
// memory: O_c += scale (Q_c S_prev) ⊙ xi, S = gamma^L S + K_c^T (V_c ⊙ zeta) (RETENTION.md §1).
// Backward is chunkwise too: three windowed pair kernels, then dQ (forward walk), dK + dh0 and dV (reverse walks).
// bf16 with chunk 64 and head dims the tensor-core walk takes, on a device that lets a block have its shared memory
// (plan_chunkwise, retention/retention_launch.h), runs the fused walk of retention_chunk_mma.cuh instead (mma.sync,
// one or two load stages): one walk for the forward, three for the backward. RETRO_RETENTION_KERNELS=wmma selects
// the older wmma walk (retention_chunk_tc.cuh) where its shared memory fits, for an A/B on a GPU.
#include "retention_chunk_mma.cuh"
#include "retention_chunk_tc.cuh"
#include "retention_common.cuh"

#include <cstdlib>
#include <string>
#include <type_traits>

namespace retro::retention::cuda {
using namespace cuda_detail;

namespace {

// RETRO_RETENTION_KERNELS: unset or "mma" the mma.sync walk, "wmma" the older one; anything else is a UserError.
bool wmma_walk_requested() {
    static const bool wmma = [] {
        const char* v = std::getenv("RETRO_RETENTION_KERNELS");
        if (!v || !*v || std::string(v) == "mma") return false;
        if (std::string(v) == "wmma") return true;
        user_error("RETRO_RETENTION_KERNELS=", v, ": not mma (the default) or wmma");
    }();
    return wmma;
}

// cp.async moves 16 bytes at a time: every operand of the mma walk must start on a 16-byte boundary (a view at
// another offset takes the CUDA-core walk).
bool aligned16(const void* a, const void* b, const void* c, const void* out) {
    const auto bits = reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) |
                      reinterpret_cast<std::uintptr_t>(c) | reinterpret_cast<std::uintptr_t>(out);
    return bits % 16 == 0;
}

template <int DA, bool REV, int STAGES>
void launch_chunk_mma_da(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                         bool state_transposed, const Dims& d, int Dc, float scale, const Gammas& g,
                         cudaStream_t stream) {
    using chunk_mma::u16;
    constexpr int smem = chunk_mma::chunk_smem<DA, STAGES>();
    static const bool attr_set = [] {   // once per instantiation
        RETRO_CUDA_CHECK(cudaFuncSetAttribute(chunk_mma::retention_chunk_mma<DA, REV, STAGES>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        return true;
    }();
    (void)attr_set;
    chunk_mma::PairDecays lg2{};
    for (long h = 0; h < d.H; ++h) lg2.lg2[h] = g.lg[h] * chunk_mma::kLog2e;   // natural log -> log2
    const chunk_mma::ChunkArgs args{d.B, d.T, d.H, Dc, scale, state_transposed};
    const dim3 grid(static_cast<unsigned>(Dc / chunk_mma::kTile), static_cast<unsigned>(d.B * d.H));
    chunk_mma::retention_chunk_mma<DA, REV, STAGES><<<grid, chunk_mma::kThreads, smem, stream>>>(
        reinterpret_cast<u16*>(out), reinterpret_cast<const u16*>(a), reinterpret_cast<const u16*>(b),
        reinterpret_cast<const u16*>(c), init, fin, args, lg2);
    RETRO_CUDA_LAUNCH_CHECK(REV ? "retention_chunk_mma (reverse)" : "retention_chunk_mma", stream);
}

template <bool REV, int STAGES>
void launch_chunk_mma(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                      bool state_transposed, const Dims& d, int Da, int Dc, float scale, const Gammas& g,
                      cudaStream_t stream) {
    switch (Da) {   // chunk_mma_supported: the register tiles need Da at compile time
    case 32: return launch_chunk_mma_da<32, REV, STAGES>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 64: return launch_chunk_mma_da<64, REV, STAGES>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 96: return launch_chunk_mma_da<96, REV, STAGES>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 128: return launch_chunk_mma_da<128, REV, STAGES>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    default: RETRO_CHECK(false, "tensor-core retention: unsupported Da ", Da);
    }
}

// One tensor-core walk (the plan said it fits): out = the walk of (a, b, c) with M's init and fin, Da rows of M.
template <bool REV>
void launch_tc_walk(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                    bool state_transposed, const Dims& d, int Da, int Dc, float scale, const Gammas& g,
                    const ChunkwisePlan& plan, cudaStream_t stream) {
    if (wmma_walk_requested() && TcLayout(Da).total <= optin_shared_bytes())
        return launch_chunk_tc<REV>(a, b, c, out, init, fin, state_transposed, d, Da, Dc, scale, g, stream);
    if (plan.stages == 2) return launch_chunk_mma<REV, 2>(a, b, c, out, init, fin, state_transposed, d, Da, Dc, scale, g, stream);
    launch_chunk_mma<REV, 1>(a, b, c, out, init, fin, state_transposed, d, Da, Dc, scale, g, stream);
}

}  // namespace

template <typename T>
void chunkwise_forward(const Shape& s, const Options& opt, const T* q, const T* k, const T* v, const float* h0, T* o,
                       float* ht, CudaStream stream) {
    double scale;
    const Gammas g = prepare(s, opt, &scale, stream, "retention::cuda::chunkwise_forward");
    const Dims d{s.B, s.T, s.H, s.K, s.V};
    const long C = std::min<long>(opt.chunk_size, s.T);
    const float sc = static_cast<float>(scale);
    if constexpr (std::is_same_v<T, bf16>) {
        const ChunkwisePlan plan = plan_chunkwise(true, s.K, s.V, C, false, optin_shared_bytes());
        if (plan.tensor_cores && aligned16(q, k, v, o)) {   // (A,B,C) = (q,k,v), M = S
            launch_tc_walk<false>(q, k, v, o, h0, ht, false, d, static_cast<int>(s.K), static_cast<int>(s.V), sc, g,
                                  plan, stream);
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
        const ChunkwisePlan plan = plan_chunkwise(true, K, V, C, true, optin_shared_bytes());
        if (plan.tensor_cores && aligned16(q, k, v, dO) && aligned16(dq, dk, dv, dO)) {
            launch_tc_walk<false>(dO, v, k, dq, h0, nullptr, true, d, V, K, sc, g, plan, stream);   // M = S^T
            launch_tc_walk<true>(v, dO, q, dk, dht, dh0, true, d, V, K, sc, g, plan, stream);       // M = G^T
            launch_tc_walk<true>(k, q, dO, dv, dht, nullptr, false, d, K, V, sc, g, plan, stream);  // M = G
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
