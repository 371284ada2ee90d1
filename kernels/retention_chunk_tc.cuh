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
#pragma once
#include <mma.h>

#include "retention_common.cuh"

namespace retro::retention::cuda_detail {

constexpr int kTcChunk = 64, kTcTile = 64, kTcWarps = 4, kTcMaxDa = 128;

inline bool tc_supported(long Da, long Dc, long C) {
    return C == kTcChunk && Da % 16 == 0 && Da <= kTcMaxDa && Dc % kTcTile == 0;
}

struct TcLayout {   // shared-memory carve-up (bytes), padded rows against bank conflicts
    int lda, ldc, ldf, ldm;   // bf16 row stride of A/B (Da+8), of C/Pb (72); fp32 stride of 64-wide (68); bf16 of Mb (72)
    int a, b, c, p, pb, mf, mb, total;
    __host__ __device__ explicit TcLayout(int Da) {
        lda = Da + 8, ldc = kTcTile + 8, ldf = kTcTile + 4, ldm = kTcTile + 8;
        a = 0;                                   // A_c (bf16 64 x lda); later the intra product O (fp32 64 x ldf)
        b = a + (kTcChunk * lda * 2 > kTcChunk * ldf * 4 ? kTcChunk * lda * 2 : kTcChunk * ldf * 4);
        c = b + kTcChunk * lda * 2;              // B_c, then B_c scaled by the update coefficients
        p = c + kTcChunk * ldc * 2;              // C_c tile
        pb = p + kTcChunk * ldf * 4;             // P = A B^T (fp32), then X = A M (fp32)
        mf = pb + kTcChunk * ldc * 2;            // P masked/decayed (bf16)
        mb = mf + Da * ldf * 4;                  // M (fp32)
        total = mb + Da * ldm * 2;               // M (bf16)
    }
};

// 16-byte copies of rows [t0, t0+L) of x[b, :, h, col0 : col0+width] into s (row stride lds), zero rows L..63.
__device__ __forceinline__ void tc_load_rows(const __nv_bfloat16* x, long row0, long row_stride, int L, int width,
                                             __nv_bfloat16* s, int lds) {
    const int vecs = width / 8;
    for (int e = threadIdx.x; e < kTcChunk * vecs; e += blockDim.x) {
        const int r = e / vecs, v = e % vecs;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < L) val = *reinterpret_cast<const uint4*>(x + row0 + r * row_stride + v * 8);
        *reinterpret_cast<uint4*>(s + r * lds + v * 8) = val;
    }
}

template <bool REV>
__global__ void __launch_bounds__(kTcWarps * 32) chunk_tc_kernel(const __nv_bfloat16* A, const __nv_bfloat16* Bm,
                                                                 const __nv_bfloat16* Cm, __nv_bfloat16* out,
                                                                 const float* init, float* fin, bool state_transposed,
                                                                 Dims d, int Da, int Dc, float scale, Gammas g) {
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char smem[];
    const TcLayout lay(Da);
    auto* As = reinterpret_cast<__nv_bfloat16*>(smem + lay.a);
    auto* Of = reinterpret_cast<float*>(smem + lay.a);
    auto* Bs = reinterpret_cast<__nv_bfloat16*>(smem + lay.b);
    auto* Cs = reinterpret_cast<__nv_bfloat16*>(smem + lay.c);
    auto* Pf = reinterpret_cast<float*>(smem + lay.p);
    auto* Pb = reinterpret_cast<__nv_bfloat16*>(smem + lay.pb);
    auto* Mf = reinterpret_cast<float*>(smem + lay.mf);
    auto* Mb = reinterpret_cast<__nv_bfloat16*>(smem + lay.mb);
    const int warp = threadIdx.x / 32, tid = threadIdx.x, nt = blockDim.x;
    const long bh = blockIdx.y, bi = bh / d.H, h = bh % d.H;
    const int col0 = blockIdx.x * kTcTile;
    const float lg = g.lg[h];
    // state element (i, j) of the tile: i in [0, Da), j in [0, 64); global state is [Dc-or-Da rows][...] fp32
    auto state_index = [&](int i, int j) -> long {
        return bh * static_cast<long>(Da) * Dc + (state_transposed ? static_cast<long>(col0 + j) * Da + i
                                                                   : static_cast<long>(i) * Dc + col0 + j);
    };
    for (int e = tid; e < Da * kTcTile; e += nt) {
        const int i = e / kTcTile, j = e % kTcTile;
        const float m = init ? init[state_index(i, j)] : 0.0f;
        Mf[i * lay.ldf + j] = m;
        Mb[i * lay.ldm + j] = __float2bfloat16(m);
    }
    const long chunks = (d.T + kTcChunk - 1) / kTcChunk;
    const long rs_a = d.H * Da, rs_c = d.H * Dc;   // row strides of the [B,T,H,D] tensors
    for (long step = 0; step < chunks; ++step) {
        const long c = REV ? chunks - 1 - step : step;
        const long t0 = c * kTcChunk;
        const int L = static_cast<int>(min(static_cast<long>(kTcChunk), d.T - t0));
        const long base_a = ((bi * d.T + t0) * d.H + h) * Da, base_c = ((bi * d.T + t0) * d.H + h) * Dc + col0;
        __syncthreads();   // the previous step's readers of As/Of, Bs, Cs, Pf are done
        tc_load_rows(A, base_a, rs_a, L, Da, As, lay.lda);
        tc_load_rows(Bm, base_a, rs_a, L, Da, Bs, lay.lda);
        tc_load_rows(Cm, base_c, rs_c, L, kTcTile, Cs, lay.ldc);
        __syncthreads();
        // P = A B^T: warp w owns row strip w; strips entirely above (forward) / below (reverse) the diagonal skip
        for (int f = 0; f < 4; ++f) {
            if (REV ? f < warp : f > warp) continue;
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < Da; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
                wmma::load_matrix_sync(fa, As + warp * 16 * lay.lda + kk, lay.lda);
                wmma::load_matrix_sync(fb, Bs + f * 16 * lay.lda + kk, lay.lda);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(Pf + warp * 16 * lay.ldf + f * 16, acc, lay.ldf, wmma::mem_row_major);
        }
        __syncthreads();
        // Pb = scale gamma^|i-j| P on the causal side, 0 elsewhere; B rows *= their update coefficient
        for (int e = tid; e < kTcChunk * kTcChunk; e += nt) {
            const int i = e / kTcChunk, j = e % kTcChunk;
            const bool keep = REV ? j >= i : j <= i;
            const float x = keep ? Pf[i * lay.ldf + j] * scale * decay(lg, REV ? j - i : i - j) : 0.0f;
            Pb[i * lay.ldc + j] = __float2bfloat16(x);
        }
        for (int e = tid; e < L * Da; e += nt) {
            const int n = e / Da, x = e % Da;
            const float coef = REV ? scale * decay(lg, n + 1) : decay(lg, L - 1 - n);
            __nv_bfloat16* p = Bs + n * lay.lda + x;
            *p = __float2bfloat16(__bfloat162float(*p) * coef);
        }
        __syncthreads();
        // X = A M (the inter-chunk term, before the update) into Pf
        for (int f = 0; f < 4; ++f) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < Da; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, As + warp * 16 * lay.lda + kk, lay.lda);
                wmma::load_matrix_sync(fb, Mb + kk * lay.ldm + f * 16, lay.ldm);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(Pf + warp * 16 * lay.ldf + f * 16, acc, lay.ldf, wmma::mem_row_major);
        }
        __syncthreads();   // As is dead from here: its bytes hold O
        // O = Pb C (intra), and M = gamma^L M + (B scaled)^T C (warp w owns column strip w of M)
        for (int f = 0; f < 4; ++f) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < kTcChunk; kk += 16) {
                if (REV ? kk + 15 < warp * 16 : kk > warp * 16 + 15) continue;   // Pb's zero blocks
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, Pb + warp * 16 * lay.ldc + kk, lay.ldc);
                wmma::load_matrix_sync(fb, Cs + kk * lay.ldc + f * 16, lay.ldc);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(Of + warp * 16 * lay.ldf + f * 16, acc, lay.ldf, wmma::mem_row_major);
        }
        const float aL = decay(lg, L);
        for (int r = 0; r < Da / 16; ++r) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            float* mp = Mf + r * 16 * lay.ldf + warp * 16;
            wmma::load_matrix_sync(acc, mp, lay.ldf, wmma::mem_row_major);
            for (int t = 0; t < acc.num_elements; ++t) acc.x[t] *= aL;
            for (int kk = 0; kk < kTcChunk; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> fa;   // (B scaled)^T
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, Bs + kk * lay.lda + r * 16, lay.lda);
                wmma::load_matrix_sync(fb, Cs + kk * lay.ldc + warp * 16, lay.ldc);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(mp, acc, lay.ldf, wmma::mem_row_major);
        }
        __syncthreads();
        // out = O + coef_n X (8 bf16 per 16-byte store), and the bf16 copy of the new M
        for (int e = tid; e < L * (kTcTile / 8); e += nt) {
            const int n = e / (kTcTile / 8), j0 = (e % (kTcTile / 8)) * 8;
            const float coef = REV ? decay(lg, L - 1 - n) : scale * decay(lg, n + 1);
            __align__(16) __nv_bfloat16 v8[8];
            for (int u = 0; u < 8; ++u)
                v8[u] = __float2bfloat16(Of[n * lay.ldf + j0 + u] + coef * Pf[n * lay.ldf + j0 + u]);
            *reinterpret_cast<uint4*>(out + base_c + n * rs_c + j0) = *reinterpret_cast<const uint4*>(v8);
        }
        for (int e = tid; e < Da * kTcTile; e += nt) {
            const int i = e / kTcTile, j = e % kTcTile;
            Mb[i * lay.ldm + j] = __float2bfloat16(Mf[i * lay.ldf + j]);
        }
    }
    if (fin) {
        __syncthreads();
        for (int e = tid; e < Da * kTcTile; e += nt) fin[state_index(e / kTcTile, e % kTcTile)] = Mf[(e / kTcTile) * lay.ldf + e % kTcTile];
    }
}

// a, b: [B,T,H,Da]; c, out: [B,T,H,Dc] (bf16); init/fin: fp32 states, [Da][Dc] per head or [Dc][Da] when
// state_transposed; either may be null.
template <bool REV>
void launch_chunk_tc(const bf16* a, const bf16* b, const bf16* c, bf16* out, const float* init, float* fin,
                     bool state_transposed, const Dims& d, int Da, int Dc, float scale, const Gammas& g) {
    const TcLayout lay(Da);
    auto kernel = chunk_tc_kernel<REV>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, lay.total);
    dim3 grid(static_cast<unsigned>(Dc / kTcTile), static_cast<unsigned>(d.B * d.H));
    kernel<<<grid, kTcWarps * 32, lay.total>>>(dp(a), dp(b), dp(c), dp(out), init, fin, state_transposed, d, Da, Dc,
                                              scale, g);
    check_launch("retention tensor-core chunk kernel");
}

}  // namespace retro::retention::cuda_detail
