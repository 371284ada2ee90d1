// Tensor-core chunkwise retention for bf16 (chunk 64): one fused walk per (tile of 64 output columns, b·h) that
// keeps its 64-column tile of the state in shared memory and, chunk by chunk, computes with bf16 mma (fp32
// accumulate, nvcuda::wmma 16x16x16):
//   forward (REV=false):  out_c = (scale A_c B_c^T ⊙ D) C_c + diag(scale gamma^(n+1)) A_c M
//                         M     = gamma^L M + (B_c ⊙ gamma^(L-1-n))^T C_c
//   reverse (REV=true):   out_c = (scale A_c B_c^T ⊙ D^T) C_c + diag(gamma^(L-1-n)) A_c M
//                         M     = gamma^L M + (B_c ⊙ scale gamma^(n+1))^T C_c,   chunks last to first
// (RETENTION.md §1 and §6; the CUDA-core twin is pair_kernel + walk_kernel in retention_common.cuh). With
// (A,B,C) = (q,k,v) this is the forward; (dO,v,k) gives dq, reverse (v,dO,q) dk and (k,q,dO) dv, where M is the
// state S (or its gradient G) or their transpose. M (Da x 64, fp32) lives in shared memory and is rounded to
// bf16 only as an mma operand, as fla rounds its stored chunk states. Inputs bf16 [B,T,H,D]; states fp32 [B,H,K,V].
// Block: 8 warps; warp w owns the 16-row strip w%4 and the 32-column half w/4 of the 64x64 products (P, X, O) and
// 16 columns x Da/2 rows of M. Per chunk: the next chunk's rows are fetched into registers while this one computes;
// P and X share one pass over A; the strip's two warps meet at a named barrier (1 + strip) between Pb and O; each
// warp writes its own block of the output and of M's bf16 copy. Three block-wide barriers per chunk.
// Measured on an H100 (docs/performance.md): ~5.4 ms per walk at B=8 H=32 T=16384 K=V=128.
#pragma once
#include <mma.h>

#include "retention/retention_launch.h"
#include "retention_common.cuh"

namespace retro::retention::cuda_detail {

// kTcChunk, kTcTile, kTcMaxDa, tc_supported and TcLayout (the shared-memory carve-up) live in
// retention/retention_launch.h, where the launch decisions use them without CUDA.
constexpr int kTcWarps = 8, kTcThreads = kTcWarps * 32;

// The next chunk's rows, fetched into registers while the current one computes (16-byte loads, zeros past L).
template <int Da>
struct TcPrefetch {
    static constexpr int kAB = kTcChunk * Da / 8 / kTcThreads, kC = kTcChunk * kTcTile / 8 / kTcThreads;
    uint4 a[kAB], b[kAB], c[kC];
    __device__ void load(const __nv_bfloat16* A, const __nv_bfloat16* Bm, const __nv_bfloat16* Cm, long base_a,
                         long base_c, long rs_a, long rs_c, int L) {
        constexpr int vecs = Da / 8;
#pragma unroll
        for (int u = 0; u < kAB; ++u) {
            const int e = threadIdx.x + u * kTcThreads, r = e / vecs, v = e % vecs;
            const bool ok = r < L;
            a[u] = ok ? *reinterpret_cast<const uint4*>(A + base_a + r * rs_a + v * 8) : make_uint4(0, 0, 0, 0);
            b[u] = ok ? *reinterpret_cast<const uint4*>(Bm + base_a + r * rs_a + v * 8) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kC; ++u) {
            const int e = threadIdx.x + u * kTcThreads, r = e / (kTcTile / 8), v = e % (kTcTile / 8);
            c[u] = r < L ? *reinterpret_cast<const uint4*>(Cm + base_c + r * rs_c + v * 8) : make_uint4(0, 0, 0, 0);
        }
    }
    // to shared memory; B also times each row's update coefficient into Bsc: gamma^(L-1-r) forward, scale
    // gamma^(r+1) reverse (pw[d] = gamma^d)
    template <bool REV>
    __device__ void store(__nv_bfloat16* As, __nv_bfloat16* Bs, __nv_bfloat16* Bsc, __nv_bfloat16* Cs, int lda, int ldc,
                          const float* pw, int L, float scale) const {
        constexpr int vecs = Da / 8;
#pragma unroll
        for (int u = 0; u < kAB; ++u) {
            const int e = threadIdx.x + u * kTcThreads, r = e / vecs, v = e % vecs;
            *reinterpret_cast<uint4*>(As + r * lda + v * 8) = a[u];
            *reinterpret_cast<uint4*>(Bs + r * lda + v * 8) = b[u];
            uint4 sc = b[u];
            auto* h = reinterpret_cast<__nv_bfloat162*>(&sc);
            const float f = r < L ? (REV ? scale * pw[r + 1] : pw[L - 1 - r]) : 0.0f;
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const float2 x = __bfloat1622float2(h[t]);
                h[t] = __floats2bfloat162_rn(x.x * f, x.y * f);
            }
            *reinterpret_cast<uint4*>(Bsc + r * lda + v * 8) = sc;
        }
#pragma unroll
        for (int u = 0; u < kC; ++u) {
            const int e = threadIdx.x + u * kTcThreads, r = e / (kTcTile / 8), v = e % (kTcTile / 8);
            *reinterpret_cast<uint4*>(Cs + r * ldc + v * 8) = c[u];
        }
    }
};

template <bool REV, int Da>
__global__ void __launch_bounds__(kTcThreads, 1) chunk_tc_kernel(const __nv_bfloat16* A, const __nv_bfloat16* Bm,
                                                                 const __nv_bfloat16* Cm, __nv_bfloat16* out,
                                                                 const float* init, float* fin, bool state_transposed,
                                                                 Dims d, int Dc, float scale, Gammas g) {
    using namespace nvcuda;
    using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
    using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
    using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
    using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
    using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
    extern __shared__ __align__(128) unsigned char smem[];
    const TcLayout lay(Da);
    auto* As = reinterpret_cast<__nv_bfloat16*>(smem + lay.a);
    auto* Bs = reinterpret_cast<__nv_bfloat16*>(smem + lay.b);
    auto* Bsc = reinterpret_cast<__nv_bfloat16*>(smem + lay.bs);
    auto* Cs = reinterpret_cast<__nv_bfloat16*>(smem + lay.c);
    auto* Pf = reinterpret_cast<float*>(smem + lay.p);
    auto* Xf = reinterpret_cast<float*>(smem + lay.x);
    auto* Pb = reinterpret_cast<__nv_bfloat16*>(smem + lay.pb);
    auto* Mf = reinterpret_cast<float*>(smem + lay.mf);
    auto* Mb = reinterpret_cast<__nv_bfloat16*>(smem + lay.mb);
    auto* pw = reinterpret_cast<float*>(smem + lay.pw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
    const int strip = warp % 4, half = warp / 4;   // 16-row strip of the 64-row outputs, 32-column half
    const long bh = blockIdx.y, bi = bh / d.H, h = bh % d.H;
    const int col0 = blockIdx.x * kTcTile;
    const float lg = g.lg[h];
    const int ldf = lay.ldf, lda = lay.lda, ldc = lay.ldc;
    auto state_index = [&](int i, int j) -> long {   // tile element (i, j) in the fp32 [B,H,K,V] state
        return bh * static_cast<long>(Da) * Dc + (state_transposed ? static_cast<long>(col0 + j) * Da + i
                                                                   : static_cast<long>(i) * Dc + col0 + j);
    };
    for (int e = tid; e <= kTcChunk; e += kTcThreads) pw[e] = decay(lg, e);
    for (int e = tid; e < Da * kTcTile; e += kTcThreads) {
        const int i = e / kTcTile, j = e % kTcTile;
        const float m = init ? init[state_index(i, j)] : 0.0f;
        Mf[i * ldf + j] = m;
        Mb[i * ldc + j] = __float2bfloat16(m);
    }
    const long chunks = (d.T + kTcChunk - 1) / kTcChunk;
    const long rs_a = d.H * Da, rs_c = d.H * Dc;   // row strides of the [B,T,H,D] tensors
    auto chunk_of = [&](long step) { return REV ? chunks - 1 - step : step; };
    auto base_a = [&](long c) { return ((bi * d.T + c * kTcChunk) * d.H + h) * Da; };
    auto base_c = [&](long c) { return ((bi * d.T + c * kTcChunk) * d.H + h) * static_cast<long>(Dc) + col0; };
    auto len = [&](long c) { return static_cast<int>(min(static_cast<long>(kTcChunk), d.T - c * kTcChunk)); };
    TcPrefetch<Da> next;
    next.load(A, Bm, Cm, base_a(chunk_of(0)), base_c(chunk_of(0)), rs_a, rs_c, len(chunk_of(0)));
    __syncthreads();   // pw
    for (long step = 0; step < chunks; ++step) {
        const long c = chunk_of(step);
        const int L = len(c);
        __syncthreads();   // last step's readers of As, Bs, Bsc, Cs, Pb and writers of Mb are done
        next.template store<REV>(As, Bs, Bsc, Cs, lda, ldc, pw, L, scale);
        if (step + 1 < chunks) {
            const long cn = chunk_of(step + 1);
            next.load(A, Bm, Cm, base_a(cn), base_c(cn), rs_a, rs_c, len(cn));
        }
        __syncthreads();
        {   // P = A B^T (this warp's 2 blocks; blocks beyond the causal side skipped) and X = A M, one pass over A
            Acc p[2], x[2];
            bool need[2];
#pragma unroll
            for (int f = 0; f < 2; ++f) {
                const int col = half * 2 + f;
                need[f] = REV ? col >= strip : col <= strip;
                wmma::fill_fragment(p[f], 0.0f);
                wmma::fill_fragment(x[f], 0.0f);
            }
#pragma unroll
            for (int kk = 0; kk < Da; kk += 16) {
                FragA fa;
                wmma::load_matrix_sync(fa, As + strip * 16 * lda + kk, lda);
#pragma unroll
                for (int f = 0; f < 2; ++f) {
                    const int col = half * 2 + f;
                    if (need[f]) {
                        FragBT fb;
                        wmma::load_matrix_sync(fb, Bs + col * 16 * lda + kk, lda);
                        wmma::mma_sync(p[f], fa, fb, p[f]);
                    }
                    FragB fm;
                    wmma::load_matrix_sync(fm, Mb + kk * ldc + col * 16, ldc);
                    wmma::mma_sync(x[f], fa, fm, x[f]);
                }
            }
#pragma unroll
            for (int f = 0; f < 2; ++f) {
                const int col = half * 2 + f;
                wmma::store_matrix_sync(Pf + strip * 16 * ldf + col * 16, p[f], ldf, wmma::mem_row_major);
                wmma::store_matrix_sync(Xf + strip * 16 * ldf + col * 16, x[f], ldf, wmma::mem_row_major);
            }
        }
        __syncthreads();   // every warp's X has read Mb: from here each warp may rewrite its blocks of M
        // Pb = scale gamma^|i-j| P on the causal side, 0 elsewhere: this warp's 16 x 32 block of it (4 per lane per
        // pass); the strip's two warps then meet at barrier 1 + strip, since O needs the whole strip of Pb
        for (int e = lane; e < 16 * 8; e += 32) {
            const int i = strip * 16 + e / 8, j0 = half * 32 + (e % 8) * 4;
            const float4 v = *reinterpret_cast<const float4*>(Pf + i * ldf + j0);
            const float in[4] = {v.x, v.y, v.z, v.w};
            __align__(8) __nv_bfloat16 o4[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int j = j0 + u;
                const bool keep = REV ? j >= i : j <= i;
                o4[u] = __float2bfloat16(keep ? in[u] * scale * pw[REV ? j - i : i - j] : 0.0f);
            }
            *reinterpret_cast<uint2*>(Pb + i * ldc + j0) = *reinterpret_cast<const uint2*>(o4);
        }
        asm volatile("bar.sync %0, %1;" ::"r"(1 + strip), "r"(64) : "memory");
        {   // O = Pb C into Pf; M = gamma^L M + (B scaled)^T C (this warp: column strip `strip`, Da/32 row blocks)
            Acc o[2];
#pragma unroll
            for (int f = 0; f < 2; ++f) wmma::fill_fragment(o[f], 0.0f);
#pragma unroll
            for (int kk = 0; kk < kTcChunk; kk += 16) {
                if (REV ? kk + 15 < strip * 16 : kk > strip * 16) continue;   // Pb's zero blocks
                FragA fa;
                wmma::load_matrix_sync(fa, Pb + strip * 16 * ldc + kk, ldc);
#pragma unroll
                for (int f = 0; f < 2; ++f) {
                    FragB fb;
                    wmma::load_matrix_sync(fb, Cs + kk * ldc + (half * 2 + f) * 16, ldc);
                    wmma::mma_sync(o[f], fa, fb, o[f]);
                }
            }
            constexpr int R = Da / 32;   // row blocks of M per warp
            Acc m[R];
            const float aL = pw[L];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                wmma::load_matrix_sync(m[r], Mf + (half * R + r) * 16 * ldf + strip * 16, ldf, wmma::mem_row_major);
#pragma unroll
                for (int t = 0; t < m[r].num_elements; ++t) m[r].x[t] *= aL;
            }
#pragma unroll
            for (int kk = 0; kk < kTcChunk; kk += 16) {
                FragB fb;
                wmma::load_matrix_sync(fb, Cs + kk * ldc + strip * 16, ldc);
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    FragAT fa;   // (B scaled)^T
                    wmma::load_matrix_sync(fa, Bsc + kk * lda + (half * R + r) * 16, lda);
                    wmma::mma_sync(m[r], fa, fb, m[r]);
                }
            }
#pragma unroll
            for (int r = 0; r < R; ++r)
                wmma::store_matrix_sync(Mf + (half * R + r) * 16 * ldf + strip * 16, m[r], ldf, wmma::mem_row_major);
#pragma unroll
            for (int f = 0; f < 2; ++f)
                wmma::store_matrix_sync(Pf + strip * 16 * ldf + (half * 2 + f) * 16, o[f], ldf, wmma::mem_row_major);
            __syncwarp();
            // this warp's 16 x 32 block of out = O + coef_n X (8 per 16-byte store; X is this warp's own block too)
            const long bc = base_c(c);
            for (int e = lane; e < 16 * 4; e += 32) {
                const int n = strip * 16 + e / 4, j0 = half * 32 + (e % 4) * 8;
                if (n >= L) continue;
                const float coef = REV ? pw[L - 1 - n] : scale * pw[n + 1];
                __align__(16) __nv_bfloat16 v8[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) v8[u] = __float2bfloat16(Pf[n * ldf + j0 + u] + coef * Xf[n * ldf + j0 + u]);
                *reinterpret_cast<uint4*>(out + bc + n * rs_c + j0) = *reinterpret_cast<const uint4*>(v8);
            }
            // and the bf16 copy of its blocks of the new M, for the next chunk's X
            for (int e = lane; e < R * 16 * 4; e += 32) {
                const int i = half * R * 16 + e / 4, j0 = strip * 16 + (e % 4) * 4;
                const float4 v = *reinterpret_cast<const float4*>(Mf + i * ldf + j0);
                __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(Mb + i * ldc + j0);
                dst[0] = __floats2bfloat162_rn(v.x, v.y);
                dst[1] = __floats2bfloat162_rn(v.z, v.w);
            }
        }
    }
    if (fin) {
        __syncthreads();
        for (int e = tid; e < Da * kTcTile; e += kTcThreads)
            fin[state_index(e / kTcTile, e % kTcTile)] = Mf[(e / kTcTile) * ldf + e % kTcTile];
    }
}

// a, b: [B,T,H,Da]; c, out: [B,T,H,Dc] (bf16); init/fin: fp32 states, [Da][Dc] per head or [Dc][Da] when
// state_transposed; either may be null.
template <bool REV, int Da>
void launch_chunk_tc_da(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                        bool state_transposed, const Dims& d, int Dc, float scale, const Gammas& g, cudaStream_t stream) {
    const TcLayout lay(Da);
    auto kernel = chunk_tc_kernel<REV, Da>;
    RETRO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, lay.total));
    dim3 grid(static_cast<unsigned>(Dc / kTcTile), static_cast<unsigned>(d.B * d.H));
    kernel<<<grid, kTcThreads, lay.total, stream>>>(dp(a), dp(b), dp(c), dp(out), init, fin, state_transposed, d, Dc,
                                                    scale, g);
    RETRO_CUDA_LAUNCH_CHECK(REV ? "retention chunk_tc_kernel (reverse)" : "retention chunk_tc_kernel", stream);
}

template <bool REV>
void launch_chunk_tc(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                     bool state_transposed, const Dims& d, int Da, int Dc, float scale, const Gammas& g,
                     cudaStream_t stream) {
    switch (Da) {   // tc_supported: Da a multiple of 16 up to 128; the register tiles need it at compile time
    case 32: return launch_chunk_tc_da<REV, 32>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 64: return launch_chunk_tc_da<REV, 64>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 96: return launch_chunk_tc_da<REV, 96>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    case 128: return launch_chunk_tc_da<REV, 128>(a, b, c, out, init, fin, state_transposed, d, Dc, scale, g, stream);
    default: RETRO_CHECK(false, "tensor-core retention: unsupported Da ", Da);
    }
}

}  // namespace retro::retention::cuda_detail
