// Fused (flash-style) attention for the CUDA NnBackend's bf16 mode (issue 21): softmax(Q K^T) V for self-attention
// without a null key/value column or a key mask (the decoder's causal self-attention), never writing the [Nq, Nk]
// probabilities. Two sets of kernels, one algorithm (FlashAttention-2, Dao 2023, Algorithms 1 and 2):
//   - kernels/nn_flash_mma.cuh (the default since session 21): raw mma.sync with S, P and dS in registers, checked
//     on the host by tests/test_flash_mma_host.cpp's block emulator and on a GPU by the op harness;
//   - the nvcuda::wmma kernels below (sessions 12-20), whose 16x16 tiles go through shared memory between the
//     products: kept, for one A/B on a GPU, behind RETRO_FLASH_KERNELS=wmma (read once, when the backend is made);
//     remove them once the mma kernels have run there (docs/gpu.md).
// The wmma kernels:
//   forward:  per block of 64 query rows, walk the key blocks (up to the diagonal when causal) keeping per row the
//             running max m and sum l of exp(s - m) and the unnormalised output O in fp32; P = exp(S - m) is rounded
//             to bf16 for P V. Writes out = O / l and, in the `probs` buffer the caller gives for backward,
//             lse = m + log l [B, H, N] followed by a copy of out [B, N, H*D] (backward's Delta needs it).
//   backward: Delta_i = sum_d dO_id O_id; P is recomputed from lse, dP = dO V^T, dS = P (dP - Delta) (bf16 for the
//             products). dK, dV: one block per 64 keys walks the query blocks (dV += P^T dO, dK += dS^T Q); dQ: one
//             block per 64 queries walks the key blocks (dQ += dS K). Two kernels instead of FA-2's atomics on dQ,
//             so every sum has a fixed order and a run repeats bit for bit.
// The queries arrive scaled (nn/attention_layer.cpp applies dim_head^-1/2), so S = Q K^T as in the GEMM path.
// Block: 4 warps, warp w owns 16 rows of the block's 64 (queries, or keys for dK/dV); shared-memory rows are padded
// (bf16 +8, fp32 +4) against bank conflicts. Written for sm_80+ (bf16 mma); the backend uses them only when asked
// (NnBackend::set_fused_attention) in bf16 mode on such a device, and only for the shapes flash_applies() takes, where
// the device lets a block have the kernels' shared memory (mma: up to 107 KB at D = 128, the wmma kernels 157 KB:
// an A100 or H100, not an sm_86/89 card's 99 KB at D = 128).
#include <cuda_bf16.h>
#include <mma.h>

#include <cfloat>
#include <climits>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"
#include "nn_flash_mma.cuh"

namespace retro::nn::detail {
namespace {

using namespace nvcuda;
using ll = long long;
using bf16 = __nv_bfloat16;

constexpr int kBlock = 64, kWarps = 4, kFlashThreads = kWarps * 32;
constexpr int kLdS = kBlock + 4;   // fp32 64-wide tiles
constexpr int kLdP = kBlock + 8;   // bf16 64-wide tiles

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

using flash::FlashDims;

// Rows [r0, r0 + 64) of one (item, head) operand [B, N, H*D] (fp32) into shared bf16 rows of stride D + 8; rows
// past N are zero.
template <int D>
__device__ void load_rows_bf16(bf16* dst, const float* __restrict__ src, ll r0, const FlashDims& m) {
    constexpr int ld = D + 8;
    for (int e = threadIdx.x; e < kBlock * D; e += kFlashThreads) {
        const int r = e / D, c = e % D;
        const ll row = r0 + r;
        dst[r * ld + c] = __float2bfloat16_rn(row < m.Nq ? src[row * m.HD + c] : 0.0f);
    }
}

// Key j is hidden from query i (both within the sequence of N): past the end, or in the future when causal.
__device__ __forceinline__ bool flash_hidden(ll i, ll j, const FlashDims& m) {
    return i >= m.Nq || j >= m.Nq || (m.causal && j > i);
}

// C[16 x 64] (fp32, stride kLdS) = A[16 x D] (bf16 rows, stride D + 8) times the 64 rows of Bt [64 x D] transposed.
template <int D>
__device__ void rows_times_rows_t(float* C, const bf16* A, const bf16* Bt) {
    constexpr int ld = D + 8;
#pragma unroll
    for (int t = 0; t < kBlock / 16; ++t) {
        Acc acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            FragA a;
            FragBT b;
            wmma::load_matrix_sync(a, A + kk * 16, ld);
            wmma::load_matrix_sync(b, Bt + t * 16 * ld + kk * 16, ld);
            wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(C + t * 16, acc, kLdS, wmma::mem_row_major);
    }
}

// acc[u] (16 x 16 tiles of a 16 x D product) += P[16 x 64] (bf16, stride kLdP) times X[64 x D] (bf16 rows, stride D + 8).
template <int D>
__device__ void accumulate_p_times_rows(Acc (&acc)[D / 16], const bf16* P, const bf16* X) {
    constexpr int ld = D + 8;
#pragma unroll
    for (int kk = 0; kk < kBlock / 16; ++kk) {
        FragA a;
        wmma::load_matrix_sync(a, P + kk * 16, kLdP);
#pragma unroll
        for (int u = 0; u < D / 16; ++u) {
            FragB b;
            wmma::load_matrix_sync(b, X + kk * 16 * ld + u * 16, ld);
            wmma::mma_sync(acc[u], a, b, acc[u]);
        }
    }
}

// A warp's 16 x D accumulators out to global rows [r0, r0 + 16) of dst [B, N, H*D] (only rows < N), through the
// warp's 16 x (D + 4) fp32 staging rows.
template <int D>
__device__ void store_rows(float* __restrict__ dst, Acc (&acc)[D / 16], float* stage, ll r0, const FlashDims& m) {
    constexpr int ld = D + 4;
#pragma unroll
    for (int u = 0; u < D / 16; ++u) wmma::store_matrix_sync(stage + u * 16, acc[u], ld, wmma::mem_row_major);
    __syncwarp();
    const int lane = threadIdx.x % 32;
    for (int e = lane; e < 16 * D; e += 32) {
        const int r = e / D, c = e % D;
        if (r0 + r < m.Nq) dst[(r0 + r) * m.HD + c] = stage[r * ld + c];
    }
}

// Shared memory of the forward (bytes): Q, K, V rows (bf16), S (fp32), P (bf16), O (fp32).
template <int D>
constexpr int forward_smem() {
    return 3 * kBlock * (D + 8) * 2 + kBlock * kLdS * 4 + kBlock * kLdP * 2 + kBlock * (D + 4) * 4;
}

template <int D>
__global__ void __launch_bounds__(kFlashThreads) flash_forward(float* __restrict__ out, float* __restrict__ lse,
                                                               const float* __restrict__ q, const float* __restrict__ k,
                                                               const float* __restrict__ v, FlashDims m) {
    constexpr int ld = D + 8, ldo = D + 4;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16* Qs = reinterpret_cast<bf16*>(smem);
    bf16* Ks = Qs + kBlock * ld;
    bf16* Vs = Ks + kBlock * ld;
    float* S = reinterpret_cast<float*>(Vs + kBlock * ld);
    bf16* P = reinterpret_cast<bf16*>(S + kBlock * kLdS);
    float* O = reinterpret_cast<float*>(P + kBlock * kLdP);

    const ll qb = blockIdx.x, bh = blockIdx.y, b = bh / m.H, h = bh % m.H;
    const ll base = b * m.Nq * m.HD + h * m.D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = lane / 2, half = lane % 2;   // the lane pair (2 row, 2 row + 1) shares row `row` of the warp's 16
    const ll q0 = qb * kBlock, i = q0 + warp * 16 + row;

    load_rows_bf16<D>(Qs, q + base, q0, m);
    for (int e = threadIdx.x; e < kBlock * ldo; e += kFlashThreads) O[e] = 0.0f;
    float mx = -FLT_MAX, l = 0.0f;   // this row's running max and sum (both lanes of the pair hold them)

    const ll key_blocks = (m.Nq + kBlock - 1) / kBlock, last = m.causal ? min(qb, key_blocks - 1) : key_blocks - 1;
    for (ll kb = 0; kb <= last; ++kb) {
        __syncthreads();   // the previous block's K, V are no longer read
        load_rows_bf16<D>(Ks, k + base, kb * kBlock, m);
        load_rows_bf16<D>(Vs, v + base, kb * kBlock, m);
        __syncthreads();
        float* Sw = S + warp * 16 * kLdS;
        bf16* Pw = P + warp * 16 * kLdP;
        rows_times_rows_t<D>(Sw, Qs + warp * 16 * ld, Ks);
        __syncwarp();
        // online softmax over this row's half of the 64 keys
        float bmax = -FLT_MAX;
        for (int c = half * 32; c < half * 32 + 32; ++c)
            if (!flash_hidden(i, kb * kBlock + c, m)) bmax = fmaxf(bmax, Sw[row * kLdS + c]);
        bmax = fmaxf(bmax, __shfl_xor_sync(0xffffffffu, bmax, 1));
        const float mnew = fmaxf(mx, bmax);
        // mnew = -FLT_MAX: nothing seen yet (a padding row past N); every p below is 0 then
        const float alpha = mx == -FLT_MAX ? 0.0f : __expf(mx - mnew);
        float sum = 0.0f;
        for (int c = half * 32; c < half * 32 + 32; ++c) {
            const bool hid = flash_hidden(i, kb * kBlock + c, m);
            const bf16 p = __float2bfloat16_rn(hid ? 0.0f : __expf(Sw[row * kLdS + c] - mnew));
            Pw[row * kLdP + c] = p;
            sum += __bfloat162float(p);   // the sum of what P V multiplies
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * alpha + sum;
        mx = mnew;
        float* Ow = O + warp * 16 * ldo;
        for (int c = half * (D / 2); c < half * (D / 2) + D / 2; ++c) Ow[row * ldo + c] *= alpha;
        __syncwarp();
        // O_w += P_w V, the fp32 O tile loaded as the accumulators
        Acc o[D / 16];
#pragma unroll
        for (int u = 0; u < D / 16; ++u) wmma::load_matrix_sync(o[u], Ow + u * 16, ldo, wmma::mem_row_major);
        accumulate_p_times_rows<D>(o, Pw, Vs);
#pragma unroll
        for (int u = 0; u < D / 16; ++u) wmma::store_matrix_sync(Ow + u * 16, o[u], ldo, wmma::mem_row_major);
        __syncwarp();
    }
    if (i < m.Nq) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        const float* Ow = O + (warp * 16 + row) * ldo;
        for (int c = half * (D / 2); c < half * (D / 2) + D / 2; ++c) out[base + i * m.HD + c] = Ow[c] * inv;
        if (half == 0) lse[bh * m.Nq + i] = mx + logf(l);
    }
}

// Shared memory of a backward kernel (bytes): four operand row blocks (bf16), two fp32 64-wide tiles, one bf16
// 64-wide tile (two for dK/dV), the 64 rows' lse and Delta, and the warps' fp32 staging rows for the result.
template <int D>
constexpr int backward_smem(int p_tiles) {
    return 4 * kBlock * (D + 8) * 2 + 2 * kBlock * kLdS * 4 + p_tiles * kBlock * kLdP * 2 + 2 * kBlock * 4 +
           kBlock * (D + 4) * 4;
}

// A backward kernel's query block: rows [q0, q0 + 64) of Q and dO (bf16) with their lse and Delta (0 past N).
template <int D>
__device__ void load_query_block(bf16* Qs, bf16* dOs, float* Ls, float* Dl, const float* __restrict__ q,
                                 const float* __restrict__ dout, const float* __restrict__ lse,
                                 const float* __restrict__ delta, ll bh, ll q0, const FlashDims& m) {
    load_rows_bf16<D>(Qs, q, q0, m);
    load_rows_bf16<D>(dOs, dout, q0, m);
    for (int e = threadIdx.x; e < kBlock; e += kFlashThreads) {
        const bool in = q0 + e < m.Nq;
        Ls[e] = in ? lse[bh * m.Nq + q0 + e] : 0.0f;
        Dl[e] = in ? delta[bh * m.Nq + q0 + e] : 0.0f;
    }
}

// dK, dV for the 64 keys of block blockIdx.x of (item, head) blockIdx.y: walk the query blocks that see them.
template <int D>
__global__ void __launch_bounds__(kFlashThreads) flash_backward_dkdv(
    float* __restrict__ dk, float* __restrict__ dv, const float* __restrict__ q, const float* __restrict__ k,
    const float* __restrict__ v, const float* __restrict__ dout, const float* __restrict__ lse,
    const float* __restrict__ delta, FlashDims m) {
    constexpr int ld = D + 8;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16* Ks = reinterpret_cast<bf16*>(smem);
    bf16* Vs = Ks + kBlock * ld;
    bf16* Qs = Vs + kBlock * ld;
    bf16* dOs = Qs + kBlock * ld;
    float* St = reinterpret_cast<float*>(dOs + kBlock * ld);   // S^T: 64 keys x 64 queries
    float* dPt = St + kBlock * kLdS;                            // dP^T
    bf16* Pt = reinterpret_cast<bf16*>(dPt + kBlock * kLdS);
    bf16* dSt = Pt + kBlock * kLdP;
    float* Ls = reinterpret_cast<float*>(dSt + kBlock * kLdP);
    float* Dl = Ls + kBlock;
    float* stage = Dl + kBlock;

    const ll kb = blockIdx.x, bh = blockIdx.y, b = bh / m.H, h = bh % m.H;
    const ll base = b * m.Nq * m.HD + h * m.D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = lane / 2, half = lane % 2;   // key row of the warp's 16, half of the 64 query columns
    const ll k0 = kb * kBlock, j = k0 + warp * 16 + row;

    load_rows_bf16<D>(Ks, k + base, k0, m);
    load_rows_bf16<D>(Vs, v + base, k0, m);
    Acc dK[D / 16], dV[D / 16];
#pragma unroll
    for (int u = 0; u < D / 16; ++u) {
        wmma::fill_fragment(dK[u], 0.0f);
        wmma::fill_fragment(dV[u], 0.0f);
    }
    const ll query_blocks = (m.Nq + kBlock - 1) / kBlock;
    for (ll qb = m.causal ? kb : 0; qb < query_blocks; ++qb) {
        const ll q0 = qb * kBlock;
        __syncthreads();   // the previous query block is no longer read
        load_query_block<D>(Qs, dOs, Ls, Dl, q + base, dout + base, lse, delta, bh, q0, m);
        __syncthreads();
        float* Sw = St + warp * 16 * kLdS;
        float* dPw = dPt + warp * 16 * kLdS;
        bf16* Pw = Pt + warp * 16 * kLdP;
        bf16* dSw = dSt + warp * 16 * kLdP;
        rows_times_rows_t<D>(Sw, Ks + warp * 16 * ld, Qs);    // S^T = K Q^T
        rows_times_rows_t<D>(dPw, Vs + warp * 16 * ld, dOs);  // dP^T = V dO^T
        __syncwarp();
        for (int c = half * 32; c < half * 32 + 32; ++c) {
            const bool hid = flash_hidden(q0 + c, j, m);
            const float p = hid ? 0.0f : __expf(Sw[row * kLdS + c] - Ls[c]);
            Pw[row * kLdP + c] = __float2bfloat16_rn(p);
            dSw[row * kLdP + c] = __float2bfloat16_rn(hid ? 0.0f : p * (dPw[row * kLdS + c] - Dl[c]));
        }
        __syncwarp();
        accumulate_p_times_rows<D>(dV, Pw, dOs);   // dV += P^T dO
        accumulate_p_times_rows<D>(dK, dSw, Qs);   // dK += dS^T Q
    }
    float* stw = stage + warp * 16 * (D + 4);
    store_rows<D>(dk + base, dK, stw, k0 + warp * 16, m);
    __syncwarp();
    store_rows<D>(dv + base, dV, stw, k0 + warp * 16, m);
}

// dQ for the 64 queries of block blockIdx.x of (item, head) blockIdx.y: walk the key blocks they see.
template <int D>
__global__ void __launch_bounds__(kFlashThreads) flash_backward_dq(
    float* __restrict__ dq, const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta, FlashDims m) {
    constexpr int ld = D + 8;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16* Qs = reinterpret_cast<bf16*>(smem);
    bf16* dOs = Qs + kBlock * ld;
    bf16* Ks = dOs + kBlock * ld;
    bf16* Vs = Ks + kBlock * ld;
    float* S = reinterpret_cast<float*>(Vs + kBlock * ld);
    float* dP = S + kBlock * kLdS;
    bf16* dS = reinterpret_cast<bf16*>(dP + kBlock * kLdS);
    float* Ls = reinterpret_cast<float*>(dS + kBlock * kLdP);
    float* Dl = Ls + kBlock;
    float* stage = Dl + kBlock;

    const ll qb = blockIdx.x, bh = blockIdx.y, b = bh / m.H, h = bh % m.H;
    const ll base = b * m.Nq * m.HD + h * m.D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = lane / 2, half = lane % 2;
    const ll q0 = qb * kBlock, i = q0 + warp * 16 + row;

    load_query_block<D>(Qs, dOs, Ls, Dl, q + base, dout + base, lse, delta, bh, q0, m);
    Acc dQ[D / 16];
#pragma unroll
    for (int u = 0; u < D / 16; ++u) wmma::fill_fragment(dQ[u], 0.0f);
    const ll key_blocks = (m.Nq + kBlock - 1) / kBlock, last = m.causal ? min(qb, key_blocks - 1) : key_blocks - 1;
    for (ll kb = 0; kb <= last; ++kb) {
        __syncthreads();   // the previous key block is no longer read (and, the first time, Qs, dOs, Ls, Dl are in)
        load_rows_bf16<D>(Ks, k + base, kb * kBlock, m);
        load_rows_bf16<D>(Vs, v + base, kb * kBlock, m);
        __syncthreads();
        float* Sw = S + warp * 16 * kLdS;
        float* dPw = dP + warp * 16 * kLdS;
        bf16* dSw = dS + warp * 16 * kLdP;
        rows_times_rows_t<D>(Sw, Qs + warp * 16 * ld, Ks);    // S = Q K^T
        rows_times_rows_t<D>(dPw, dOs + warp * 16 * ld, Vs);  // dP = dO V^T
        __syncwarp();
        const int r = warp * 16 + row;
        for (int c = half * 32; c < half * 32 + 32; ++c) {
            const bool hid = flash_hidden(i, kb * kBlock + c, m);
            const float p = hid ? 0.0f : __expf(Sw[row * kLdS + c] - Ls[r]);
            dSw[row * kLdP + c] = __float2bfloat16_rn(hid ? 0.0f : p * (dPw[row * kLdS + c] - Dl[r]));
        }
        __syncwarp();
        accumulate_p_times_rows<D>(dQ, dSw, Ks);   // dQ += dS K
    }
    store_rows<D>(dq + base, dQ, stage + warp * 16 * (D + 4), q0 + warp * 16, m);
}

// Lets `kernel` have `bytes` of dynamic shared memory, once per kernel (the first launch of each instantiation).
template <auto Kernel>
void allow_smem(int bytes) {
    static const bool done = [bytes] {
        RETRO_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        return true;
    }();
    (void)done;
}

// The most shared memory any of the kernels for head size D takes (the dK/dV kernel's).
long long flash_smem_need(long long D, bool wmma) {
    if (wmma) return D == 32 ? backward_smem<32>(2) : D == 64 ? backward_smem<64>(2) : backward_smem<128>(2);
    return D == 32 ? flash::dkdv_smem<32>() : D == 64 ? flash::dkdv_smem<64>() : flash::dkdv_smem<128>();
}

dim3 flash_grid(ll rows, const FlashDims& m) {
    return {static_cast<unsigned>((rows + kBlock - 1) / kBlock), static_cast<unsigned>(m.B * m.H)};
}

// The mma kernels' grid (kernels/nn_flash_mma.cuh): the heads along x, the blocks of 64 rows along y.
dim3 flash_mma_grid(ll rows, const FlashDims& m) {
    return {static_cast<unsigned>(m.B * m.H), static_cast<unsigned>((rows + flash::kTile - 1) / flash::kTile)};
}

// out's bf16 copy for the wmma kernels (the mma forward writes its own)
__global__ void round_out_bf16(std::uint16_t* __restrict__ y, const float* __restrict__ x, ll n) {
    for (ll i = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; i < n; i += static_cast<ll>(gridDim.x) * blockDim.x)
        y[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}

// The mma kernels over operands of type In: float, or the bf16 copies (u16 bits) flash_forward / flash_backward make
// for attention without a null column or key mask (the kernels then load tiles by cp.async).
// STAGES = 2 (bf16 operands only): the next key or query block's tiles by cp.async while this one computes
template <int D, typename In, int STAGES = 1>
void forward_mma(float* out, std::uint16_t* out_bf16, float* lse, const In* q, const In* k, const In* v,
                 const FlashDims& m, cudaStream_t st, std::uint16_t* out_lo = nullptr) {
    constexpr int smem = flash::forward_smem<D, STAGES>();
    allow_smem<flash::flash_mma_forward<D, In, STAGES>>(smem);
    flash::flash_mma_forward<D, In, STAGES><<<flash_mma_grid(m.Nq, m), flash::kThreads, smem, st>>>(out, out_bf16, lse,
                                                                                                 q, k, v, m, out_lo);
    RETRO_CUDA_LAUNCH_CHECK(STAGES == 2 ? "flash_mma_forward (two stages)" : "flash_mma_forward", st);
}

// dQ, dK, dV in one launch of the one-block kernel over QB query blocks
template <int D, typename In, int QB>
void backward_one_block(float* dq, float* dk, float* dv, float* dnk_items, float* dnv_items, const In* dout,
                        const float* lse, const float* delta, const In* q, const In* k, const In* v, const FlashDims& m,
                        cudaStream_t st) {
    constexpr int smem = flash::one_block_smem<D, QB>();
    allow_smem<flash::flash_mma_backward_one_block<D, In, QB>>(smem);
    flash::flash_mma_backward_one_block<D, In, QB><<<static_cast<unsigned>(m.B * m.H), flash::kThreads, smem, st>>>(
        dq, dk, dv, dnk_items, dnv_items, q, k, v, dout, lse, delta, m);
    RETRO_CUDA_LAUNCH_CHECK(QB == 1 ? "flash_mma_backward_one_block" : "flash_mma_backward_one_block (two query blocks)", st);
}

// one_block: the query blocks the one-block kernel takes in one block (1, or 2 at D <= 64; flash_backward decides
// where its shared memory fits), or 0: the dQ and dK/dV kernels
template <int D, typename In, int STAGES = 1>
void backward_mma(float* dq, float* dk, float* dv, float* dnk_items, float* dnv_items, const In* dout, const float* lse,
                  const float* delta, const In* q, const In* k, const In* v, const FlashDims& m, int one_block,
                  cudaStream_t st) {
    if (one_block == 1)
        return backward_one_block<D, In, 1>(dq, dk, dv, dnk_items, dnv_items, dout, lse, delta, q, k, v, m, st);
    if constexpr (D <= 64)
        if (one_block == 2)
            return backward_one_block<D, In, 2>(dq, dk, dv, dnk_items, dnv_items, dout, lse, delta, q, k, v, m, st);
    constexpr int smem_kv = flash::dkdv_smem<D, STAGES>(), smem_q = flash::dq_smem<D, STAGES>();
    allow_smem<flash::flash_mma_backward_dkdv<D, In, STAGES>>(smem_kv);
    flash::flash_mma_backward_dkdv<D, In, STAGES><<<flash_mma_grid(m.keys(), m), flash::kThreads, smem_kv, st>>>(
        dk, dv, dnk_items, dnv_items, q, k, v, dout, lse, delta, m);
    RETRO_CUDA_LAUNCH_CHECK(STAGES == 2 ? "flash_mma_backward_dkdv (two stages)" : "flash_mma_backward_dkdv", st);
    allow_smem<flash::flash_mma_backward_dq<D, In, STAGES>>(smem_q);
    flash::flash_mma_backward_dq<D, In, STAGES><<<flash_mma_grid(m.Nq, m), flash::kThreads, smem_q, st>>>(
        dq, q, k, v, dout, lse, delta, m);
    RETRO_CUDA_LAUNCH_CHECK(STAGES == 2 ? "flash_mma_backward_dq (two stages)" : "flash_mma_backward_dq", st);
}

template <int D>
void forward_d(float* out, std::uint16_t* out_bf16, std::uint16_t* out_lo, float* lse, const float* q, const float* k,
               const float* v, const FlashDims& m, bool wmma, cudaStream_t st) {
    if (wmma) {   // self-attention only (flash_applies), so never out_lo (CudaNnBackend::out_lo_at)
        constexpr int smem = forward_smem<D>();
        allow_smem<flash_forward<D>>(smem);
        flash_forward<D><<<flash_grid(m.Nq, m), kFlashThreads, smem, st>>>(out, lse, q, k, v, m);
        RETRO_CUDA_LAUNCH_CHECK("flash_forward (wmma)", st);
        const ll n = m.B * m.Nq * m.HD;
        round_out_bf16<<<grid_for(n), kThreads, 0, st>>>(out_bf16, out, n);
        RETRO_CUDA_LAUNCH_CHECK("round_out_bf16", st);
        return;
    }
    forward_mma<D>(out, out_bf16, lse, q, k, v, m, st, out_lo);
}

template <int D>
void backward_d(float* dq, float* dk, float* dv, float* dnk_items, float* dnv_items, const float* dout,
                const float* lse, const float* delta, const float* q, const float* k, const float* v,
                const FlashDims& m, bool wmma, int one_block, cudaStream_t st) {
    if (wmma) {   // self-attention only (flash_applies)
        const dim3 grid = flash_grid(m.Nq, m);
        constexpr int smem_kv = backward_smem<D>(2), smem_q = backward_smem<D>(1);
        allow_smem<flash_backward_dkdv<D>>(smem_kv);
        flash_backward_dkdv<D><<<grid, kFlashThreads, smem_kv, st>>>(dk, dv, q, k, v, dout, lse, delta, m);
        RETRO_CUDA_LAUNCH_CHECK("flash_backward_dkdv (wmma)", st);
        allow_smem<flash_backward_dq<D>>(smem_q);
        flash_backward_dq<D><<<grid, kFlashThreads, smem_q, st>>>(dq, q, k, v, dout, lse, delta, m);
        RETRO_CUDA_LAUNCH_CHECK("flash_backward_dq (wmma)", st);
        return;
    }
    backward_mma<D>(dq, dk, dv, dnk_items, dnv_items, dout, lse, delta, q, k, v, m, one_block, st);
}

FlashDims flash_dims(const AttentionShape& s, const float* null_k, const float* null_v, const std::uint8_t* key_mask) {
    return {s.B, s.Nq, s.Nk, s.H, s.D, s.H * s.D, s.causal, s.null_kv, null_k, null_v, key_mask};
}

struct ItemRowsTerm {   // the null key/value gradients: row n of the per-item shares [B, H*D]
    const float* rows;
    ll C;
    __device__ float operator()(ll n, ll j) const { return rows[n * C + j]; }
};

}  // namespace

FlashKernels flash_kernels_requested() {
    const char* v = std::getenv("RETRO_FLASH_KERNELS");
    if (!v || !*v || std::string(v) == "mma") return FlashKernels::mma;
    if (std::string(v) == "mma-1stage") return FlashKernels::mma_1stage;
    if (std::string(v) == "mma-fp32") return FlashKernels::mma_fp32;
    if (std::string(v) == "wmma") return FlashKernels::wmma;
    user_error("RETRO_FLASH_KERNELS=", v, ": not mma (the default), mma-1stage, mma-fp32 or wmma");
}

bool CudaNnBackend::flash_applies(const AttentionShape& s, const std::uint8_t* key_mask) const {
    // the bf16 mode on request, on sm_80+ with the shared memory the kernels take; the stash's lse and out's bf16
    // copy (B*H*Nq*(1 + D/2) floats, the copy 256-byte aligned) fit in the probabilities, B*H*Nq*Nk' (the rule from
    // when callers sized probs so; it keeps shapes of very few keys, about D/2 or fewer, on the unfused kernels. Before
    // session 49 it left out the alignment. The remainder out_lo_at adds may take the stash past the probabilities:
    // callers size probs by attention_saved_floats). The mma kernels take every case of
    // nn/attention.h but causal cross-attention (causal needs Nq = Nk, no null column, no mask); the wmma ones
    // self-attention without null column or mask only.
    if (!fused_attention_ || gemm_inputs_ != GemmInputs::bf16 || !tensor_core_bf16_) return false;
    if (!(s.D == 32 || s.D == 64 || s.D == 128) || flash_smem_need(s.D, flash_wmma_) > optin_shared_bytes_) return false;
    if (s.B <= 0 || s.H <= 0 || s.B * s.H > 65535 || s.Nq <= 0 || s.Nk <= 0 || s.Nq > INT_MAX / 2 || s.keys() > INT_MAX / 2) return false;
    if ((std::max(s.Nq, s.keys()) + 63) / 64 > 65535) return false;   // the mma grids' y: the blocks of 64 rows
    const long long rows = s.B * s.H * s.Nq;
    if (rows > 4LL * INT_MAX) return false;   // flash_mma_delta's grid: 4 rows a block in gridDim.x
    if (bf16_copy_at(rows) + (rows * s.D + 1) / 2 > rows * s.keys()) return false;   // (< 2^63: the bounds above)
    const bool self_plain = s.Nq == s.Nk && !s.null_kv && !key_mask;
    if (flash_wmma_) return self_plain;
    return !s.causal || self_plain;
}

// The fused path's `probs` (flash_forward / flash_backward): lse [B, H, Nq], then (at NnBackend::bf16_copy_at: 256-byte
// aligned) out's bf16 copy [B, Nq, H*D] packed two to a float, then where out_lo_at says (256-byte aligned again) the
// copy's remainder, the same size.
bool CudaNnBackend::stash_only(const AttentionShape& s, bool key_mask) const {
    static const std::uint8_t any_mask = 1;   // flash_applies asks only whether there is one
    return !unfused(FusedOp::attention_saved_floats) && flash_applies(s, key_mask ? &any_mask : nullptr);
}

// Where the stash also keeps out's remainder bf16(o - bf16(o)) for Delta (flash_mma_delta): with the null column or a
// key mask (CCA, the encoder's self-attention), whose rows can put most of their probability on one column, so that
// dP - Delta cancels and the copy's rounding would stay whole in dS. With few keys (fewer than about 1 + D: the
// demo-retrieval-wide config's CCA, 33 keys at D = 64) the stash is then larger than the probabilities; callers size
// probs by attention_saved_floats (the model's arena, the op harness). Until session 66 such shapes kept the copy
// alone, and Delta carried its rounding (tests/test_flash_mma_host.cpp: dnull_k past the bf16 bound on the harness's
// inputs at 33 keys). The float offset in probs, else -1.
std::int64_t CudaNnBackend::out_lo_at(const AttentionShape& s, bool key_mask) const {
    if (!(s.null_kv || key_mask) || !stash_only(s, key_mask)) return -1;
    const std::int64_t rows = s.B * s.H * s.Nq, half = (s.B * s.Nq * s.H * s.D + 1) / 2;
    return bf16_copy_at(bf16_copy_at(rows) + half);
}

std::int64_t CudaNnBackend::attention_saved_floats(const AttentionShape& s, bool key_mask) const {
    if (!stash_only(s, key_mask))
        return NnBackend::attention_saved_floats(s, key_mask);   // the probabilities (also RETRO_UNFUSE's A/B)
    const std::int64_t half = (s.B * s.Nq * s.H * s.D + 1) / 2, lo = out_lo_at(s, key_mask);
    return lo >= 0 ? lo + half : bf16_copy_at(s.B * s.H * s.Nq) + half;
}

// The mma kernels' stash holds out's bf16 copy after lse: where the layers keep the output only so (bf16 activations;
// not the wmma kernels, whose copy is made from the fp32 out they write, nor RETRO_UNFUSE=attention_saved_floats,
// whose arena keeps the probabilities and fp32 out), flash_forward may be given out = nullptr.
std::int64_t CudaNnBackend::attention_output_bf16_offset(const AttentionShape& s, bool key_mask) const {
    if (!bf16_activations() || flash_wmma_ || !stash_only(s, key_mask)) return -1;
    return bf16_copy_at(s.B * s.H * s.Nq);
}

// Whether the mma kernels take bf16 copies of the operands (one conversion pass each, then half the bytes a tile and
// cp.async, where each K/V or Q/dO tile is otherwise read and rounded by every block that walks it): attention
// without a null column or key mask (the decoder's causal self-attention), not the wmma kernels, unless
// RETRO_FLASH_KERNELS=mma-fp32.
bool CudaNnBackend::flash_bf16_operands(const AttentionShape& s, const std::uint8_t* key_mask) const {
    return !flash_wmma_ && !flash_fp32_operands_ && !s.null_kv && !key_mask;
}

// Whether the mma kernels over bf16 operands take their tiles in two stages (a kernel needing `bytes` of shared
// memory): where the device lets a block have it, unless RETRO_FLASH_KERNELS=mma-1stage or RETRO_UNFUSE names
// flash_two_stages (so that `all` sets them aside with the other fused kernels).
bool CudaNnBackend::flash_two_stages(long long bytes) const {
    return !flash_one_stage_ && !unfused(FusedOp::flash_two_stages) && bytes <= optin_shared_bytes_;
}

void CudaNnBackend::flash_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                                  const float* null_k, const float* null_v, const std::uint8_t* key_mask,
                                  const AttentionShape& s) {
    RETRO_CHECK(out || !flash_wmma_, "flash_forward: the wmma kernels need out");
    const FlashDims m = flash_dims(s, null_k, null_v, key_mask);
    float* lse = probs;   // [B, H, Nq], then out's bf16 copy [B, Nq, H*D] (and its remainder); out null: only the copy
    auto* ob = reinterpret_cast<std::uint16_t*>(probs + bf16_copy_at(m.B * m.H * m.Nq));
    const std::int64_t lo_at = out_lo_at(s, key_mask != nullptr);   // (never the bf16-operand shapes below)
    auto* lo = lo_at >= 0 ? reinterpret_cast<std::uint16_t*>(probs + lo_at) : nullptr;
    if (flash_bf16_operands(s, key_mask)) {   // the decoder's causal self-attention: q, k, v as bf16 once, tiles by cp.async
        const auto* q16 = static_cast<const std::uint16_t*>(to_bf16(0, q, m.B * m.Nq * m.HD));
        const auto* k16 = static_cast<const std::uint16_t*>(to_bf16(1, k, m.B * m.Nk * m.HD));
        const auto* v16 = static_cast<const std::uint16_t*>(to_bf16(2, v, m.B * m.Nk * m.HD));
        const auto run = [&](auto d) {
            constexpr int D = decltype(d)::value;
            if (flash_two_stages(flash::forward_smem<D, 2>()))
                forward_mma<D, std::uint16_t, 2>(out, ob, lse, q16, k16, v16, m, stream_);
            else
                forward_mma<D>(out, ob, lse, q16, k16, v16, m, stream_);
        };
        switch (m.D) {
        case 32: run(std::integral_constant<int, 32>{}); break;
        case 64: run(std::integral_constant<int, 64>{}); break;
        default: run(std::integral_constant<int, 128>{}); break;
        }
        return;
    }
    switch (m.D) {
    case 32: forward_d<32>(out, ob, lo, lse, q, k, v, m, flash_wmma_, stream_); break;
    case 64: forward_d<64>(out, ob, lo, lse, q, k, v, m, flash_wmma_, stream_); break;
    default: forward_d<128>(out, ob, lo, lse, q, k, v, m, flash_wmma_, stream_); break;
    }
}

void CudaNnBackend::flash_backward(float* dq, float* dk, float* dv, float* dnull_k, float* dnull_v, const float* dout,
                                   const float* probs, const float* q, const float* k, const float* v,
                                   const float* null_k, const float* null_v, const std::uint8_t* key_mask,
                                   const AttentionShape& s) {
    FlashDims m = flash_dims(s, null_k, null_v, key_mask);
    m.classes_every_step = unfused(FusedOp::flash_fast_steps);   // (the A/B of the branch-free steps)
    const ll rows = m.B * m.H * m.Nq;
    const float* lse = probs;
    const auto* o = reinterpret_cast<const std::uint16_t*>(probs + bf16_copy_at(rows));   // out's bf16 copy
    const std::int64_t lo_at = out_lo_at(s, key_mask != nullptr);   // and its remainder, where kept
    const auto* lo = lo_at >= 0 ? reinterpret_cast<const std::uint16_t*>(probs + lo_at) : nullptr;
    // scratch: Delta [B, H, Nq], then (null column) the per-item null key and value gradients [B, H*D] each
    const ll items = m.null_kv ? m.B * m.HD : 0;
    float* delta = static_cast<float*>(scratch(ds_, static_cast<std::size_t>(rows + 2 * items) * sizeof(float)));
    float *dnk_items = delta + rows, *dnv_items = dnk_items + items;
    flash::flash_mma_delta<<<static_cast<unsigned>((rows + flash::kWarps - 1) / flash::kWarps), flash::kThreads, 0,
                             stream_>>>(delta, dout, o, m, lo);
    RETRO_CUDA_LAUNCH_CHECK("flash_mma_delta", stream_);
    // at most 64 queries (CCA), or 128 at D <= 64 without the causal mask (the encoder): the one-block kernel over one
    // or two query blocks, unless RETRO_UNFUSE names it or its shared memory does not fit
    int one_block = m.Nq <= flash::kTile ? 1 : m.Nq <= 2 * flash::kTile && m.D <= 64 && !m.causal ? 2 : 0;
    const long long one_block_smem = one_block == 0   ? 0
                                     : one_block == 2 ? (m.D == 32 ? flash::one_block_smem<32, 2>() : flash::one_block_smem<64, 2>())
                                     : m.D == 32      ? flash::one_block_smem<32>()
                                     : m.D == 64      ? flash::one_block_smem<64>()
                                                      : flash::one_block_smem<128>();
    if (unfused(FusedOp::flash_backward_one_block) || one_block_smem > optin_shared_bytes_) one_block = 0;
    if (flash_bf16_operands(s, key_mask)) {   // as flash_forward; Delta above read dout in fp32, as the reference rounds it
        const auto* q16 = static_cast<const std::uint16_t*>(to_bf16(0, q, m.B * m.Nq * m.HD));
        const auto* k16 = static_cast<const std::uint16_t*>(to_bf16(1, k, m.B * m.Nk * m.HD));
        const auto* v16 = static_cast<const std::uint16_t*>(to_bf16(2, v, m.B * m.Nk * m.HD));
        const auto* do16 = static_cast<const std::uint16_t*>(to_bf16(3, dout, m.B * m.Nq * m.HD));
        const auto run = [&](auto d) {
            constexpr int D = decltype(d)::value;
            // D = 64 only (the configs' head size): at 32 and 128 the two-stage dK/dV kernel spills (ptxas sm_90: 8 and 64
            // bytes), so those are not even compiled
            if constexpr (D == 64)
                if (one_block == 0 && flash_two_stages(std::max(flash::dkdv_smem<D, 2>(), flash::dq_smem<D, 2>())))
                    return backward_mma<D, std::uint16_t, 2>(dq, dk, dv, dnk_items, dnv_items, do16, lse, delta, q16,
                                                             k16, v16, m, one_block, stream_);
            backward_mma<D>(dq, dk, dv, dnk_items, dnv_items, do16, lse, delta, q16, k16, v16, m, one_block, stream_);
        };
        switch (m.D) {
        case 32: run(std::integral_constant<int, 32>{}); break;
        case 64: run(std::integral_constant<int, 64>{}); break;
        default: run(std::integral_constant<int, 128>{}); break;
        }
    } else {
        switch (m.D) {
        case 32: backward_d<32>(dq, dk, dv, dnk_items, dnv_items, dout, lse, delta, q, k, v, m, flash_wmma_, one_block, stream_); break;
        case 64: backward_d<64>(dq, dk, dv, dnk_items, dnv_items, dout, lse, delta, q, k, v, m, flash_wmma_, one_block, stream_); break;
        default: backward_d<128>(dq, dk, dv, dnk_items, dnv_items, dout, lse, delta, q, k, v, m, flash_wmma_, one_block, stream_); break;
        }
    }
    // dnull_k += sum over items of their shares (parameters: +=), in the column sums' fixed order
    if (m.null_kv && dnull_k) column_sums(dnull_k, ItemRowsTerm{dnk_items, m.HD}, m.B, m.HD, "flash dnull_k");
    if (m.null_kv && dnull_v) column_sums(dnull_v, ItemRowsTerm{dnv_items, m.HD}, m.B, m.HD, "flash dnull_v");
}

}  // namespace retro::nn::detail
