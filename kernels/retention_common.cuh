// Building blocks shared by the retention CUDA modes (retention_{parallel,recurrent,chunkwise}.cu):
// a causal "pair" kernel out_i = scale Σ_j gamma^|i-j| (a_i·b_j) c_j (windowed to chunks), a state-row kernel,
// an outer-product state kernel, and the chunk/recurrent state walk with the K×V state tile in shared memory.
// Each launcher runs its kernel on the caller's stream and checks the launch (cuda_check.cuh).
#pragma once
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda_device.h"
#include "core/error.h"
#include "cuda_check.cuh"
#include "retention/retention_cuda.h"
#include "retention/retention_launch.h"
#include "retention_pair_mma.cuh"

namespace retro::retention::cuda_detail {

static_assert(sizeof(__nv_bfloat16) == sizeof(bf16), "retro::bf16 must mirror __nv_bfloat16");

constexpr int kMaxHeads = 128, kMaxDim = 256, kThreads = 256;

struct Gammas {   // natural log of gamma per head, by value (no allocation per call)
    float lg[kMaxHeads];
};

template <typename T> struct Dev { using type = T; };
template <> struct Dev<bf16> { using type = __nv_bfloat16; };
template <typename T> using dev_t = typename Dev<T>::type;
template <typename T> const dev_t<T>* dp(const T* p) { return reinterpret_cast<const dev_t<T>*>(p); }
template <typename T> dev_t<T>* dp(T* p) { return reinterpret_cast<dev_t<T>*>(p); }

__device__ __forceinline__ float ld(const float* p) { return *p; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(float* p, float x) { *p = x; }
__device__ __forceinline__ void st(__nv_bfloat16* p, float x) { *p = __float2bfloat16(x); }
__device__ __forceinline__ float decay(float lg, long d) { return expf(lg * static_cast<float>(d)); }   // d >= 0

struct Dims {
    long B, T, H, K, V;
};

// The shared memory one block may opt into on device 0 (bytes), read once per process.
inline long optin_shared_bytes() {
    static const long bytes = [] {
        int v = 0;
        RETRO_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
        return static_cast<long>(v);
    }();
    return bytes;
}

// The shared memory of one SM of device 0 (bytes; the blocks resident on it share it, each with 1 KB reserved).
inline long sm_shared_bytes() {
    static const long bytes = [] {
        int v = 0;
        RETRO_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0));
        return static_cast<long>(v);
    }();
    return bytes;
}

// Whether device 0 has the sm_80 instructions the tensor-core kernels use (mma.sync bf16, cp.async, ldmatrix), read
// once per process; an older card takes the CUDA-core kernels.
inline bool tensor_core_capable() {
    static const bool capable = [] {
        int major = 0;
        RETRO_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
        return major >= 8;
    }();
    return capable;
}

// Checks the shape and the stream (`entry` names the entry point in the error) and resolves the decays; a shape
// the kernels cannot launch on this device (retention/retention_launch.h) is refused in one line before any launch.
inline Gammas prepare(const Shape& s, const Options& opt, double* scale, cudaStream_t stream, const char* entry) {
    cuda_stream_require(stream, entry);
    const Resolved r = resolve(s, opt);
    if (s.H > kMaxHeads || s.K > kMaxDim || s.V > kMaxDim)
        user_error("retention (CUDA): needs H <= ", kMaxHeads, " and K, V <= ", kMaxDim, " (got H=", s.H, " K=", s.K,
                   " V=", s.V, ")");
    const std::string refusal = retention_launch_refusal(s.B, s.H, s.K, s.V, optin_shared_bytes());
    if (!refusal.empty()) user_error("retention (CUDA): ", refusal);
    Gammas g{};
    for (long h = 0; h < s.H; ++h) g.lg[h] = static_cast<float>(r.log_gamma[h]);
    *scale = r.scale;
    return g;
}

// out_i (=|+=) scale Σ_j gamma^|i-j| (a_i·b_j) c_j over j in i's chunk (chunk = C), j <= i (or j >= i when REV).
// a, b: [B,T,H,Da]; c, out: [B,T,H,Dc]. Grid (ceil(T/16), B*H), 256 threads, dynamic shared memory.
template <typename X, bool REV>
__global__ void pair_kernel(const X* a, const X* b, const X* c, X* out, Dims d, int Da, int Dc, long C, float scale,
                            Gammas g, bool accumulate) {
    constexpr int BQ = 16, BK = 32;
    extern __shared__ float sm[];
    float* As = sm;                 // BQ × Da
    float* Bs = As + BQ * Da;       // BK × Da
    float* Cs = Bs + BK * Da;       // BK × Dc
    float* P = Cs + BK * Dc;        // BQ × BK
    const long bh = blockIdx.y, bi = bh / d.H, h = bh % d.H, i0 = static_cast<long>(blockIdx.x) * BQ;
    const long i1 = min(i0 + BQ, d.T);
    const float lg = g.lg[h];
    auto row = [&](auto* base, long t, int D) { return base + ((bi * d.T + t) * d.H + h) * D; };
    for (int e = threadIdx.x; e < BQ * Da; e += blockDim.x) {
        const long i = i0 + e / Da;
        As[e] = i < d.T ? ld(row(a, i, Da) + e % Da) : 0.0f;
    }
    float acc[BQ * kMaxDim / kThreads];
    for (float& x : acc) x = 0.0f;
    const long j_begin = REV ? i0 : (i0 / C) * C;
    const long j_end = REV ? min(d.T, ((i1 - 1) / C + 1) * C) : i1;
    for (long j0 = j_begin; j0 < j_end; j0 += BK) {
        __syncthreads();
        for (int e = threadIdx.x; e < BK * Da; e += blockDim.x) {
            const long j = j0 + e / Da;
            Bs[e] = j < j_end ? ld(row(b, j, Da) + e % Da) : 0.0f;
        }
        for (int e = threadIdx.x; e < BK * Dc; e += blockDim.x) {
            const long j = j0 + e / Dc;
            Cs[e] = j < j_end ? ld(row(c, j, Dc) + e % Dc) : 0.0f;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < BQ * BK; e += blockDim.x) {
            const long i = i0 + e / BK, j = j0 + e % BK;
            const bool ok = i < d.T && j < j_end && i / C == j / C && (REV ? j >= i : j <= i);
            float x = 0.0f;
            if (ok) {
                const float* ar = As + (e / BK) * Da;
                const float* br = Bs + (e % BK) * Da;
                for (int t = 0; t < Da; ++t) x += ar[t] * br[t];
                x *= scale * decay(lg, REV ? j - i : i - j);
            }
            P[e] = x;
        }
        __syncthreads();
        for (int r = 0; r < BQ * kMaxDim / kThreads; ++r) {
            const int e = threadIdx.x + r * kThreads;
            if (e >= BQ * Dc) break;
            const float* pr = P + (e / Dc) * BK;
            const float* cc = Cs + e % Dc;
            float x = 0.0f;
            for (int t = 0; t < BK; ++t) x += pr[t] * cc[t * Dc];
            acc[r] += x;
        }
    }
    for (int r = 0; r < BQ * kMaxDim / kThreads; ++r) {
        const int e = threadIdx.x + r * kThreads;
        if (e >= BQ * Dc) break;
        const long i = i0 + e / Dc;
        if (i >= d.T) continue;
        X* p = row(out, i, Dc) + e % Dc;
        st(p, accumulate ? ld(p) + acc[r] : acc[r]);
    }
}

// The tensor-core form (kernels/retention_pair_mma.cuh) for one (Da, Dc) pair of head sizes; DUAL: out2 = the pair
// of (a2, c, b) from the same loads (launch_pair_dk_dv).
template <int DA, int DC, bool REV, bool DUAL = false>
void launch_pair_mma(const bf16* a, const bf16* b, const bf16* c, bf16* out, const Dims& d, long C, float scale,
                     const Gammas& g, bool accumulate, cudaStream_t stream, const bf16* a2 = nullptr,
                     bf16* out2 = nullptr) {
    using pair_mma::u16;
    constexpr int smem = pair_mma::pair_smem<DA, DC, DUAL>();
    static const bool attr_set = [] {   // once per instantiation
        RETRO_CUDA_CHECK(cudaFuncSetAttribute(pair_mma::retention_pair_mma<DA, DC, REV, DUAL>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        return true;
    }();
    (void)attr_set;
    pair_mma::PairDecays lg2{};
    for (long h = 0; h < d.H; ++h) lg2.lg2[h] = g.lg[h] * pair_mma::kLog2e;   // natural log -> log2
    const pair_mma::PairArgs args{d.B, d.T, d.H, C, scale, accumulate};
    const dim3 grid(static_cast<unsigned>((d.T + pair_mma::kTile - 1) / pair_mma::kTile), static_cast<unsigned>(d.B * d.H));
    pair_mma::retention_pair_mma<DA, DC, REV, DUAL><<<grid, pair_mma::kThreads, smem, stream>>>(
        reinterpret_cast<u16*>(out), reinterpret_cast<const u16*>(a), reinterpret_cast<const u16*>(b),
        reinterpret_cast<const u16*>(c), args, lg2, reinterpret_cast<const u16*>(a2), reinterpret_cast<u16*>(out2));
    RETRO_CUDA_LAUNCH_CHECK(DUAL ? "retention_pair_mma (dual)" : REV ? "retention_pair_mma (reverse)" : "retention_pair_mma",
                            stream);
}

// Whether launch_pair's bf16 form takes the tensor cores: head sizes it is instantiated for, its shared memory, and
// operands it may read by cp.async's 16 bytes (a, b, c 16-byte aligned) and write as pairs of bf16 (out 4-byte
// aligned); a view at another offset takes the CUDA-core kernel.
inline bool pair_on_tensor_cores(int Da, int Dc, const void* a, const void* b, const void* c, const void* out) {
    const auto in = reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) | reinterpret_cast<std::uintptr_t>(c);
    return tensor_core_capable() && pair_mma::pair_mma_supported(Da, Dc) && in % 16 == 0 &&
           reinterpret_cast<std::uintptr_t>(out) % 4 == 0 && pair_mma_shared_bytes(Da, Dc) <= optin_shared_bytes();
}

template <typename T, bool REV>
void launch_pair(const T* a, const T* b, const T* c, T* out, const Dims& d, int Da, int Dc, long C, float scale,
                 const Gammas& g, bool accumulate, cudaStream_t stream) {
    if constexpr (std::is_same_v<T, bf16>) {
        if (pair_on_tensor_cores(Da, Dc, a, b, c, out)) {   // Da, Dc each 64 or 128
            if (Da == 64 && Dc == 64) launch_pair_mma<64, 64, REV>(a, b, c, out, d, C, scale, g, accumulate, stream);
            else if (Da == 64) launch_pair_mma<64, 128, REV>(a, b, c, out, d, C, scale, g, accumulate, stream);
            else if (Dc == 64) launch_pair_mma<128, 64, REV>(a, b, c, out, d, C, scale, g, accumulate, stream);
            else launch_pair_mma<128, 128, REV>(a, b, c, out, d, C, scale, g, accumulate, stream);
            return;
        }
    }
    const std::size_t smem = static_cast<std::size_t>(pair_shared_bytes(Da, Dc));   // checked by prepare()
    auto kernel = pair_kernel<dev_t<T>, REV>;
    RETRO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    dim3 grid(static_cast<unsigned>((d.T + 15) / 16), static_cast<unsigned>(d.B * d.H));
    kernel<<<grid, kThreads, smem, stream>>>(dp(a), dp(b), dp(c), dp(out), d, Da, Dc, C, scale, g, accumulate);
    RETRO_CUDA_LAUNCH_CHECK(REV ? "retention pair_kernel (reverse)" : "retention pair_kernel", stream);
}

// dk = Σ_{n>=m} scale D (v_m·dO_n) q_n and dv = Σ_{n>=m} scale D (k_m·q_n) dO_n over C-row windows (the backward's
// reverse pairs, RETENTION.md §6): one dual tensor-core kernel reading each q and dO tile once where it applies
// (bf16, head sizes 64/128, operands 16-byte aligned, its shared memory allowed), else two launch_pair calls.
template <typename T>
void launch_pair_dk_dv(const T* q, const T* k, const T* v, const T* dO, T* dk, T* dv, const Dims& d, int K, int V,
                       long C, float scale, const Gammas& g, cudaStream_t stream) {
    if constexpr (std::is_same_v<T, bf16>) {
        const bool dual = pair_on_tensor_cores(V, K, v, dO, q, dk) && reinterpret_cast<std::uintptr_t>(k) % 16 == 0 &&
                          reinterpret_cast<std::uintptr_t>(dv) % 4 == 0 && pair_mma_shared_bytes(V, K, true) <= optin_shared_bytes();
        if (dual) {   // Da = V (v, dO), Dc = K (q); a2 = k (K), out2 = dv (V)
            if (V == 64 && K == 64) launch_pair_mma<64, 64, true, true>(v, dO, q, dk, d, C, scale, g, false, stream, k, dv);
            else if (V == 64) launch_pair_mma<64, 128, true, true>(v, dO, q, dk, d, C, scale, g, false, stream, k, dv);
            else if (K == 64) launch_pair_mma<128, 64, true, true>(v, dO, q, dk, d, C, scale, g, false, stream, k, dv);
            else launch_pair_mma<128, 128, true, true>(v, dO, q, dk, d, C, scale, g, false, stream, k, dv);
            return;
        }
    }
    launch_pair<T, true>(v, dO, q, dk, d, V, K, C, scale, g, false, stream);
    launch_pair<T, true>(k, q, dO, dv, d, K, V, C, scale, g, false, stream);
}

enum class Coef { xi, zeta };   // xi_n = scale gamma^(n+1); zeta_n = gamma^(T-1-n)

// out_n += coef_n · x_n M, M a fp32 [B,H,K,V] state; TRANS uses M^T. x: [.., Dx], out: [.., Dout].
template <typename X, bool TRANS>
__global__ void row_state_kernel(const X* x, const float* M, X* out, Dims d, int Dx, int Dout, Coef coef, float scale,
                                 Gammas g) {
    const long n = blockIdx.x, bh = blockIdx.y, bi = bh / d.H, h = bh % d.H;
    const X* xr = x + ((bi * d.T + n) * d.H + h) * Dx;
    X* orow = out + ((bi * d.T + n) * d.H + h) * Dout;
    const float* Mb = M + bh * d.K * d.V;
    const float c = coef == Coef::xi ? scale * decay(g.lg[h], n + 1) : decay(g.lg[h], d.T - 1 - n);
    for (int y = threadIdx.x; y < Dout; y += blockDim.x) {
        float acc = 0.0f;
        for (int t = 0; t < Dx; ++t) acc += ld(xr + t) * (TRANS ? Mb[y * Dx + t] : Mb[t * Dout + y]);
        st(orow + y, ld(orow + y) + c * acc);
    }
}

template <typename T, bool TRANS>
void launch_row_state(const T* x, const float* M, T* out, const Dims& d, int Dx, int Dout, Coef coef, float scale,
                      const Gammas& g, cudaStream_t stream) {
    dim3 grid(static_cast<unsigned>(d.T), static_cast<unsigned>(d.B * d.H));
    row_state_kernel<dev_t<T>, TRANS><<<grid, 128, 0, stream>>>(dp(x), M, dp(out), d, Dx, Dout, coef, scale, g);
    RETRO_CUDA_LAUNCH_CHECK(TRANS ? "retention row_state_kernel (transposed)" : "retention row_state_kernel", stream);
}

// M_out = gamma^T M_init + Σ_n coef_n a_n^T b_n (a: [..,K], b: [..,V]); M_init nullable. One thread per entry.
template <typename X>
__global__ void outer_kernel(const X* a, const X* b, const float* Minit, float* Mout, Dims d, Coef coef, float scale,
                             Gammas g) {
    const long bh = blockIdx.y, bi = bh / d.H, h = bh % d.H;
    const long e = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= d.K * d.V) return;
    const long i = e / d.V, j = e % d.V;
    const float lg = g.lg[h];
    float acc = Minit ? decay(lg, d.T) * Minit[bh * d.K * d.V + e] : 0.0f;
    for (long n = 0; n < d.T; ++n) {
        const float c = coef == Coef::xi ? scale * decay(lg, n + 1) : decay(lg, d.T - 1 - n);
        acc += c * ld(a + ((bi * d.T + n) * d.H + h) * d.K + i) * ld(b + ((bi * d.T + n) * d.H + h) * d.V + j);
    }
    Mout[bh * d.K * d.V + e] = acc;
}

template <typename T>
void launch_outer(const T* a, const T* b, const float* Minit, float* Mout, const Dims& d, Coef coef, float scale,
                  const Gammas& g, cudaStream_t stream) {
    dim3 grid(static_cast<unsigned>((d.K * d.V + 255) / 256), static_cast<unsigned>(d.B * d.H));
    outer_kernel<dev_t<T>><<<grid, 256, 0, stream>>>(dp(a), dp(b), Minit, Mout, d, coef, scale, g);
    RETRO_CUDA_LAUNCH_CHECK("retention outer_kernel", stream);
}

// The state walk: one block per (state tile, b·h); the tile of S (or of its gradient G) stays in shared memory
// while the block walks the chunks (forward modes in order, reverse modes backwards).
//   fwd_o:  o_n[j]  (+)= c_n Σ_i q_n[i] S[i][j]     (column tile)   S = a S + Σ zeta_n k_n[i] v_n[j]
//   fwd_dq: dq_n[i] (+)= c_n Σ_j S[i][j] dO_n[j]    (row tile)
//   rev_dk: dk_n[i] (+)= c_n Σ_j G[i][j] v_n[j]     (row tile)      G = a G + Σ xi_n q_n[i] dO_n[j]
//   rev_dv: dv_n[j] (+)= c_n Σ_i G[i][j] k_n[i]     (column tile)
// Chunk form (RECUR=false): output uses the state before the update, out +=; recurrent (C=1): update first, out =.
enum class Walk { fwd_o, fwd_dq, rev_dk, rev_dv };
constexpr int kTile = 32;

template <typename X, Walk W, bool RECUR>
__global__ void walk_kernel(const X* q, const X* k, const X* v, const X* dO, X* out, const float* init, float* fin,
                            Dims d, long C, float scale, Gammas g) {
    constexpr bool rows_tiled = W == Walk::fwd_dq || W == Walk::rev_dk;
    constexpr bool reverse = W == Walk::rev_dk || W == Walk::rev_dv;
    __shared__ float St[kMaxDim * kTile];
    const long bh = blockIdx.y, bi = bh / d.H, h = bh % d.H;
    const long i0 = rows_tiled ? static_cast<long>(blockIdx.x) * kTile : 0;
    const long j0 = rows_tiled ? 0 : static_cast<long>(blockIdx.x) * kTile;
    const long R = rows_tiled ? min(static_cast<long>(kTile), d.K - i0) : d.K;
    const long Cc = rows_tiled ? d.V : min(static_cast<long>(kTile), d.V - j0);
    const float lg = g.lg[h];
    const float* S0 = init ? init + bh * d.K * d.V : nullptr;
    for (long e = threadIdx.x; e < R * Cc; e += blockDim.x)
        St[e] = S0 ? S0[(i0 + e / Cc) * d.V + j0 + e % Cc] : 0.0f;
    auto at = [&](auto* base, long t, long D) { return base + ((bi * d.T + t) * d.H + h) * D; };
    const long chunks = (d.T + C - 1) / C;
    for (long step = 0; step < chunks; ++step) {
        const long c = reverse ? chunks - 1 - step : step;
        const long t0 = c * C, L = min(C, d.T - t0);
        auto output = [&] {
            __syncthreads();
            const long width = rows_tiled ? R : Cc;
            for (long e = threadIdx.x; e < L * width; e += blockDim.x) {
                const long n = t0 + e / width, x = e % width, jn = n - t0;
                float coef;
                if (RECUR) coef = (W == Walk::fwd_o || W == Walk::fwd_dq) ? scale : 1.0f;
                else coef = reverse ? decay(lg, L - 1 - jn) : scale * decay(lg, jn + 1);
                float acc = 0.0f;
                if (W == Walk::fwd_o) { const X* qr = at(q, n, d.K); for (long i = 0; i < R; ++i) acc += ld(qr + i) * St[i * Cc + x]; }
                if (W == Walk::fwd_dq) { const X* r = at(dO, n, d.V); for (long j = 0; j < Cc; ++j) acc += St[x * Cc + j] * ld(r + j); }
                if (W == Walk::rev_dk) { const X* r = at(v, n, d.V); for (long j = 0; j < Cc; ++j) acc += St[x * Cc + j] * ld(r + j); }
                if (W == Walk::rev_dv) { const X* r = at(k, n, d.K); for (long i = 0; i < R; ++i) acc += St[i * Cc + x] * ld(r + i); }
                const long D = rows_tiled ? d.K : d.V, off = rows_tiled ? i0 + x : j0 + x;
                X* p = at(out, n, D) + off;
                st(p, RECUR ? coef * acc : ld(p) + coef * acc);
            }
            __syncthreads();
        };
        auto update = [&] {
            __syncthreads();
            const float a = RECUR ? ((reverse && c == chunks - 1) ? 1.0f : decay(lg, 1)) : decay(lg, L);
            for (long e = threadIdx.x; e < R * Cc; e += blockDim.x) {
                const long i = i0 + e / Cc, j = j0 + e % Cc;
                float acc = a * St[e];
                for (long n = t0; n < t0 + L; ++n) {
                    const long jn = n - t0;
                    if (reverse) acc += (RECUR ? scale : scale * decay(lg, jn + 1)) * ld(at(q, n, d.K) + i) * ld(at(dO, n, d.V) + j);
                    else acc += (RECUR ? 1.0f : decay(lg, L - 1 - jn)) * ld(at(k, n, d.K) + i) * ld(at(v, n, d.V) + j);
                }
                St[e] = acc;
            }
            __syncthreads();
        };
        if (RECUR) { update(); output(); }
        else { output(); update(); }
    }
    if (fin) {   // ht (fwd_o), or dh0 (rev_dk): chunk form ends at G_{-1}; recurrent needs one more gamma
        const float a = (RECUR && reverse) ? decay(lg, 1) : 1.0f;
        for (long e = threadIdx.x; e < R * Cc; e += blockDim.x)
            fin[bh * d.K * d.V + (i0 + e / Cc) * d.V + j0 + e % Cc] = a * St[e];
    }
}

template <typename T, Walk W, bool RECUR>
void launch_walk(const T* q, const T* k, const T* v, const T* dO, T* out, const float* init, float* fin, const Dims& d,
                 long C, float scale, const Gammas& g, cudaStream_t stream) {
    constexpr bool rows_tiled = W == Walk::fwd_dq || W == Walk::rev_dk;
    const long tiles = ((rows_tiled ? d.K : d.V) + kTile - 1) / kTile;
    dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(d.B * d.H));
    walk_kernel<dev_t<T>, W, RECUR>
        <<<grid, kThreads, 0, stream>>>(dp(q), dp(k), dp(v), dp(dO), dp(out), init, fin, d, C, scale, g);
    constexpr const char* names[2][4] = {
        {"retention walk_kernel (chunk, fwd_o)", "retention walk_kernel (chunk, fwd_dq)",
         "retention walk_kernel (chunk, rev_dk)", "retention walk_kernel (chunk, rev_dv)"},
        {"retention walk_kernel (recurrent, fwd_o)", "retention walk_kernel (recurrent, fwd_dq)",
         "retention walk_kernel (recurrent, rev_dk)", "retention walk_kernel (recurrent, rev_dv)"}};
    RETRO_CUDA_LAUNCH_CHECK(names[RECUR][static_cast<int>(W)], stream);
}

}  // namespace retro::retention::cuda_detail
