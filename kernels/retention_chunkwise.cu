// CUDA chunkwise retention (retention_cuda.h; CPU twin lib/retention/chunkwise.cpp): intra-chunk products with the
// pair kernel windowed to chunks, then the state walk, one block per (state tile, b·h) with the tile in shared
// memory: O_c += scale (Q_c S_prev) ⊙ xi, S = gamma^L S + K_c^T (V_c ⊙ zeta) (RETENTION.md §1).
// Backward is chunkwise too: three windowed pair kernels, then dQ (forward walk), dK + dh0 and dV (reverse walks).
// bf16 with chunk 64 and head dims the tensor-core walk takes, on a device that lets a block have its shared memory
// (plan_chunkwise, retention/retention_launch.h), runs the fused walk of retention_chunk_mma.cuh instead (mma.sync;
// 128 or 64 output columns a block, one or two load stages): one walk for the forward, three for the backward.
// dk and dv come from one dual walk over G where K = V = 64 or 128. For A/Bs on a GPU, RETRO_RETENTION_KERNELS=
// mma-split runs dk and dv as two walks, =mma64 also keeps to 64 columns a block, =mma-1copy keeps one copy of the
// state (two block barriers a chunk: session 23's walks), =mma16 takes the 16-warp walk (retention_chunk_mma16.cuh:
// the same bits, half the registers a thread) where a walk is 128 columns with two stages and two copies, =wmma
// selects the older wmma walk (retention_chunk_tc.cuh) where its shared memory fits.
#include "retention_chunk_mma16.cuh"
#include "retention_chunk_tc.cuh"
#include "retention_common.cuh"

#include <cstdlib>
#include <string>
#include <type_traits>

namespace retro::retention::cuda {
using namespace cuda_detail;

namespace {

enum class WalkKernels { mma, mma_split, mma64, mma1, mma_1copy, mma16, wmma };
// RETRO_RETENTION_KERNELS: unset or "mma" the mma.sync walks as planned, "mma-split" without the dual dk+dv walk,
// "mma64" also with 64 columns a block, "mma1" one load stage (the sm_86/89 form, to test it on an H100), "mma-1copy"
// one copy of the state (the A100 form, and session 23's walks on an H100), "mma16" the 16-warp walk where it applies,
// "wmma" the older walk; anything else is a UserError.
WalkKernels walk_kernels_requested() {
    static const WalkKernels kind = [] {
        const char* v = std::getenv("RETRO_RETENTION_KERNELS");
        const std::string s = v ? v : "";
        if (s.empty() || s == "mma") return WalkKernels::mma;
        if (s == "mma-split") return WalkKernels::mma_split;
        if (s == "mma64") return WalkKernels::mma64;
        if (s == "mma1") return WalkKernels::mma1;
        if (s == "mma-1copy") return WalkKernels::mma_1copy;
        if (s == "mma16") return WalkKernels::mma16;
        if (s == "wmma") return WalkKernels::wmma;
        user_error("RETRO_RETENTION_KERNELS=", s, ": not mma (the default), mma-split, mma64, mma1, mma-1copy, mma16 or wmma");
    }();
    return kind;
}

ChunkwisePlan plan_for(long K, long V, long C, bool backward) {
    const WalkKernels kind = walk_kernels_requested();
    if (!tensor_core_capable()) return {};   // before sm_80: no mma.sync bf16, cp.async or ldmatrix
    return plan_chunkwise(true, K, V, C, backward, optin_shared_bytes(), kind == WalkKernels::mma64,
                          kind != WalkKernels::mma && kind != WalkKernels::mma_1copy && kind != WalkKernels::mma16,
                          kind == WalkKernels::mma1, kind == WalkKernels::mma_1copy, sm_shared_bytes(),
                          kind == WalkKernels::mma16);
}

// cp.async moves 16 bytes at a time: every operand of the mma walk must start on a 16-byte boundary (a view at
// another offset takes the CUDA-core walk).
bool aligned16(const void* a, const void* b, const void* c, const void* out) {
    const auto bits = reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) |
                      reinterpret_cast<std::uintptr_t>(c) | reinterpret_cast<std::uintptr_t>(out);
    return bits % 16 == 0;
}

// A walk kernel's dynamic shared memory beyond the default 48 KB (called once per instantiation, from a static).
template <typename Kernel>
bool allow_shared_bytes(Kernel kernel, int bytes) {
    RETRO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
}
// Each head's decay as log2(gamma), the walks' form.
chunk_mma::PairDecays log2_decays(const Dims& d, const Gammas& g) {
    chunk_mma::PairDecays lg2{};
    for (long h = 0; h < d.H; ++h) lg2.lg2[h] = g.lg[h] * chunk_mma::kLog2e;   // natural log -> log2
    return lg2;
}

// a2, out2: the dual walk's (DUAL), else null.
template <int DA, int NC, bool REV, int STAGES, bool DUAL = false, int COPIES = 1>
void launch_chunk_mma_da(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                         bool state_transposed, const Dims& d, int Dc, float scale, const Gammas& g,
                         cudaStream_t stream, const bf16* a2 = nullptr, bf16* out2 = nullptr) {
    using chunk_mma::u16;
    RETRO_CHECK(chunk_mma::chunk_mma_supported(DA, Dc, NC) && (!DUAL || Dc == NC),
                "retention_chunk_mma: Dc = ", Dc, " is not whole ", NC, "-column tiles (or not one tile for the dual walk)");
    constexpr int smem = chunk_mma::chunk_smem<DA, NC, STAGES, DUAL, COPIES>();
    static const bool attr_set = allow_shared_bytes(chunk_mma::retention_chunk_mma<DA, NC, REV, STAGES, DUAL, COPIES>, smem);
    (void)attr_set;
    const chunk_mma::PairDecays lg2 = log2_decays(d, g);
    const chunk_mma::ChunkArgs args{d.B, d.T, d.H, Dc, scale, state_transposed};
    const dim3 grid(static_cast<unsigned>(Dc / NC), static_cast<unsigned>(d.B * d.H));
    chunk_mma::retention_chunk_mma<DA, NC, REV, STAGES, DUAL, COPIES><<<grid, chunk_mma::chunk_threads<NC>(), smem, stream>>>(
        reinterpret_cast<u16*>(out), reinterpret_cast<const u16*>(a), reinterpret_cast<const u16*>(b),
        reinterpret_cast<const u16*>(c), init, fin, args, lg2, reinterpret_cast<const u16*>(a2),
        reinterpret_cast<u16*>(out2));
    RETRO_CUDA_LAUNCH_CHECK(DUAL ? "retention_chunk_mma (dual, reverse)"
                                 : REV ? "retention_chunk_mma (reverse)" : "retention_chunk_mma", stream);
}

template <int NC, bool REV, int STAGES, int COPIES>
void launch_chunk_mma(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                      bool state_transposed, const Dims& d, int Da, int Dc, float scale, const Gammas& g,
                      cudaStream_t stream) {
    switch (Da) {   // chunk_mma_supported: the register tiles need Da at compile time
    case 32: return launch_chunk_mma_da<32, NC, REV, STAGES, false, COPIES>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 64: return launch_chunk_mma_da<64, NC, REV, STAGES, false, COPIES>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 96: return launch_chunk_mma_da<96, NC, REV, STAGES, false, COPIES>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 128: return launch_chunk_mma_da<128, NC, REV, STAGES, false, COPIES>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    default: RETRO_CHECK(false, "tensor-core retention: unsupported Da ", Da);
    }
}

// The 16-warp walk (retention_chunk_mma16.cuh) of Dc / 128 blocks a head.
template <int DA, bool REV>
void launch_chunk_mma16_da(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                           bool state_transposed, const Dims& d, int Dc, float scale, const Gammas& g,
                           cudaStream_t stream) {
    using chunk_mma::u16;
    RETRO_CHECK(chunk_mma::chunk_mma_supported(DA, Dc, chunk_mma::kWideColumns),
                "retention_chunk_mma16: Dc = ", Dc, " is not whole 128-column tiles");
    constexpr int smem = chunk_mma::chunk16_smem<DA>();
    static const bool attr_set = allow_shared_bytes(chunk_mma::retention_chunk_mma16<DA, REV>, smem);
    (void)attr_set;
    const chunk_mma::PairDecays lg2 = log2_decays(d, g);
    const chunk_mma::ChunkArgs args{d.B, d.T, d.H, Dc, scale, state_transposed};
    const dim3 grid(static_cast<unsigned>(Dc / chunk_mma::kWideColumns), static_cast<unsigned>(d.B * d.H));
    chunk_mma::retention_chunk_mma16<DA, REV><<<grid, chunk_mma::kWideThreads, smem, stream>>>(
        reinterpret_cast<u16*>(out), reinterpret_cast<const u16*>(a), reinterpret_cast<const u16*>(b),
        reinterpret_cast<const u16*>(c), init, fin, args, lg2);
    RETRO_CUDA_LAUNCH_CHECK(REV ? "retention_chunk_mma16 (reverse)" : "retention_chunk_mma16", stream);
}
template <bool REV>
void launch_chunk_mma16(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                        bool state_transposed, const Dims& d, int Da, int Dc, float scale, const Gammas& g,
                        cudaStream_t stream) {
    switch (Da) {
    case 32: return launch_chunk_mma16_da<32, REV>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 64: return launch_chunk_mma16_da<64, REV>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 96: return launch_chunk_mma16_da<96, REV>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 128: return launch_chunk_mma16_da<128, REV>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    default: RETRO_CHECK(false, "tensor-core retention: unsupported Da ", Da);
    }
}

// One tensor-core walk as configured (the plan said it fits): out = the walk of (a, b, c) with M's init and fin,
// Da rows of M.
template <bool REV>
void launch_tc_walk(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                    bool state_transposed, const Dims& d, int Da, int Dc, float scale, const Gammas& g,
                    const ChunkWalkConfig& walk, cudaStream_t stream) {
    if (walk_kernels_requested() == WalkKernels::wmma && TcLayout(Da).total <= optin_shared_bytes())
        return launch_chunk_tc<REV>(a, b, c, out, init, fin, state_transposed, d, Da, Dc, scale, g, stream);
    if (walk.wide) return launch_chunk_mma16<REV>(a, b, c, out, init, fin, state_transposed, d, Da, Dc, scale, g, stream);
    const bool two = walk.copies == 2;   // (two copies come with two stages only)
    const auto launch =
        walk.columns == 128
            ? (walk.stages == 2 ? (two ? &launch_chunk_mma<128, REV, 2, 2> : &launch_chunk_mma<128, REV, 2, 1>)
                                : &launch_chunk_mma<128, REV, 1, 1>)
            : (walk.stages == 2 ? (two ? &launch_chunk_mma<64, REV, 2, 2> : &launch_chunk_mma<64, REV, 2, 1>)
                                : &launch_chunk_mma<64, REV, 1, 1>);
    launch(a, b, c, out, init, fin, state_transposed, d, Da, Dc, scale, g, stream);
}

// dk and dv in one reverse walk over G (K = V = D, one block of D columns a head, two load stages: dual_walk_config
// offers no other): out = dv = walk(k, q, dO; G) with dh0 = the final G, out2 = dk = walk(v, dO, q; G^T).
void launch_dual_walk(const bf16* q, const bf16* k, const bf16* v, const bf16* dO, const float* dht, bf16* dk, bf16* dv,
                      float* dh0, const Dims& d, int D, float scale, const Gammas& g, const ChunkWalkConfig& walk,
                      cudaStream_t stream) {
    RETRO_CHECK(walk.stages == 2 && (D == 64 || D == 128), "dual retention walk: D = ", D, ", ", walk.stages, " stages");
    if (D == 128)
        return walk.copies == 2
                   ? launch_chunk_mma_da<128, 128, true, 2, true, 2>(k, q, dO, dv, dht, dh0, false, d, D, scale, g, stream, v, dk)
                   : launch_chunk_mma_da<128, 128, true, 2, true, 1>(k, q, dO, dv, dht, dh0, false, d, D, scale, g, stream, v, dk);
    if (walk.copies == 2)
        return launch_chunk_mma_da<64, 64, true, 2, true, 2>(k, q, dO, dv, dht, dh0, false, d, D, scale, g, stream, v, dk);
    launch_chunk_mma_da<64, 64, true, 2, true, 1>(k, q, dO, dv, dht, dh0, false, d, D, scale, g, stream, v, dk);
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
        const ChunkwisePlan plan = plan_for(s.K, s.V, C, false);
        if (plan.tensor_cores && aligned16(q, k, v, o)) {   // (A,B,C) = (q,k,v), M = S
            launch_tc_walk<false>(q, k, v, o, h0, ht, false, d, static_cast<int>(s.K), static_cast<int>(s.V), sc, g,
                                  plan.da_k, stream);
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
        const ChunkwisePlan plan = plan_for(K, V, C, true);
        if (plan.tensor_cores && aligned16(q, k, v, dO) && aligned16(dq, dk, dv, dO)) {
            launch_tc_walk<false>(dO, v, k, dq, h0, nullptr, true, d, V, K, sc, g, plan.da_v, stream);   // M = S^T
            if (plan.dkdv.ok) {   // (the plan leaves it out under every RETRO_RETENTION_KERNELS but mma)
                launch_dual_walk(q, k, v, dO, dht, dk, dv, dh0, d, K, sc, g, plan.dkdv, stream);   // M = G, both sides
                return;
            }
            launch_tc_walk<true>(v, dO, q, dk, dht, dh0, true, d, V, K, sc, g, plan.da_v, stream);       // M = G^T
            launch_tc_walk<true>(k, q, dO, dv, dht, nullptr, false, d, K, V, sc, g, plan.da_k, stream);  // M = G
            return;
        }
    }
    launch_pair<T, false>(dO, v, k, dq, d, V, K, C, sc, g, false, stream);
    launch_pair_dk_dv<T>(q, k, v, dO, dk, dv, d, K, V, C, sc, g, stream);
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
