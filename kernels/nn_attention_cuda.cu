// CUDA attention core of the NnBackend (nn/nn_backend.h; the contract and the math are nn/attention.h's). The
// products are cuBLAS GEMMs (pedantic fp32, strided-batched over the items b with one call per head h, or over the
// heads with one call per item where there are more heads than items, as in decoding: a head's rows are every HD-th
// float of q, k, v), the rest small row kernels. probs [B, H, Nq, K] (K = keys, the null column 0 first
// when s.null_kv) holds the scores and then the probabilities; ds [B, H, Nq, K] is a grow-only scratch.
//   forward:  S[:, off:] = Q K^T (GEMM), S[:, 0] = Q null_k (kernel); softmax per row (the row in registers of a
//             warp up to 512 keys, of a block up to 4,096; beyond, one block per row in three passes:
//             masked keys, key_mask[b, j] == 0 or causal j > i + Nk - Nq, get 0, a row with every key masked is
//             uniform over all K columns as the CPU's -finfo.max fill makes it; max and sum in a fixed order: warp
//             shuffles, or block_reduce's tree); O = P[:, off:] V (GEMM) + P[:, 0] null_v (kernel).
//   backward: dP[:, off:] = dO V^T (GEMM), dP[:, 0] = dO null_v; dS = P (dP - sum_j P dP), 0 where masked (row
//             kernel, in place); dQ = dS[:, off:] K (GEMM) + dS[:, 0] null_k; dK = dS[:, off:]^T Q, dV =
//             P[:, off:]^T dO (GEMMs); dnull_k += sum_i dS_i0 q_i, dnull_v += sum_i P_i0 dO_i (the two-pass
//             column sums of nn_backend_common.cuh over the B*Nq rows).
// cuBLAS's own summation order is fixed for a given shape and device, so runs repeat bit for bit.
// With NnBackend::set_fused_attention in the bf16 mode, the shapes flash_applies() takes go to the fused kernels of
// kernels/nn_flash_attention_cuda.cu instead (probs then holds their lse and a copy of out).
#include <cfloat>
#include <climits>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/attention.h"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;

struct Dims {
    ll B, Nq, Nk, H, D, HD, K, off, shift;
    bool causal;
};

Dims dims_of(const AttentionShape& s) {
    const ll off = s.null_kv ? 1 : 0;
    return {s.B, s.Nq, s.Nk, s.H, s.D, s.H * s.D, s.Nk + off, off, s.Nk - s.Nq, s.causal};
}

// Real key j (0-based over the Nk keys) is hidden from query i of item b.
__device__ __forceinline__ bool key_hidden(const std::uint8_t* key_mask, const Dims& m, ll b, ll i, ll j) {
    return (key_mask && key_mask[b * m.Nk + j] == 0) || (m.causal && j > i + m.shift);
}

__device__ __forceinline__ float dot(const float* a, const float* b, ll D) {
    float acc = 0;
    for (ll d = 0; d < D; d++) acc += a[d] * b[d];
    return acc;
}

// S[row, 0] = q_row . null_k (one thread per row (b, h, i)).
__global__ void null_scores(float* __restrict__ probs, const float* __restrict__ q, const float* __restrict__ null_k,
                            Dims m) {
    const ll rows = m.B * m.H * m.Nq;
    for (ll row = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; row < rows;
         row += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll b = row / (m.H * m.Nq), h = (row / m.Nq) % m.H, i = row % m.Nq;
        probs[row * m.K] = dot(q + (b * m.Nq + i) * m.HD + h * m.D, null_k + h * m.D, m.D);
    }
}

// Scores -> probabilities in place, one block per row.
__global__ void softmax_rows(float* __restrict__ probs, const std::uint8_t* __restrict__ key_mask, Dims m) {
    __shared__ float shf[kThreads];
    __shared__ int shi[kThreads];
    const ll rows = m.B * m.H * m.Nq;
    for (ll row = blockIdx.x; row < rows; row += gridDim.x) {
        const ll b = row / (m.H * m.Nq), i = row % m.Nq;
        float* P = probs + row * m.K;
        float mx = -FLT_MAX;
        int seen = 0;
        for (ll j = threadIdx.x; j < m.K; j += kThreads) {
            if (j >= m.off && key_hidden(key_mask, m, b, i, j - m.off)) continue;
            mx = fmaxf(mx, P[j]);
            seen++;
        }
        mx = block_reduce(mx, shf, MaxOp{});
        seen = block_reduce(seen, shi, SumOp{});
        float sum = 0;
        for (ll j = threadIdx.x; j < m.K; j += kThreads) {
            const bool hidden = j >= m.off && key_hidden(key_mask, m, b, i, j - m.off);
            const float e = seen == 0 ? 1.0f : hidden ? 0.0f : expf(P[j] - mx);
            P[j] = e;
            sum += e;
        }
        sum = block_reduce(sum, shf, SumOp{});
        const float inv = 1.0f / sum;
        for (ll j = threadIdx.x; j < m.K; j += kThreads) P[j] *= inv;
        __syncthreads();
    }
}

// The same two row kernels with the row held in registers, so that it is read once and written once (the kernels
// above read it three times) and hidden keys are never read (half the causal square): TPR threads per row (a warp,
// 32, for rows up to 512 keys; the whole block, kThreads, up to 4,096), PER keys per thread (thread l of a row has
// keys l, l + TPR, ...). Max and sums reduce in a fixed order: warp shuffles (butterfly), then, with TPR = kThreads,
// the warps' results in warp order.
constexpr ll kRegisterRowsWarpKeys = 512, kRegisterRowsMaxKeys = 4096;

// Column j of row (b, i) of the [.., K] score matrix is hidden: past the row, or a real key that is masked.
__device__ __forceinline__ bool column_hidden(const std::uint8_t* key_mask, const Dims& m, ll b, ll i, ll j) {
    return j >= m.K || (j >= m.off && key_hidden(key_mask, m, b, i, j - m.off));
}

template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Every thread of a row gets the row's reduction; sh holds kThreads / 32 entries (TPR = kThreads only).
template <int TPR, typename T, typename Op>
__device__ __forceinline__ T row_reduce(T v, Op op, T* sh) {
    v = warp_reduce(v, op);
    if constexpr (TPR == 32) {
        return v;
    } else {
        const int warp = threadIdx.x / 32;
        if ((threadIdx.x & 31) == 0) sh[warp] = v;
        __syncthreads();
        T r = sh[0];
        for (int w = 1; w < TPR / 32; w++) r = op(r, sh[w]);
        __syncthreads();   // sh may be reused at once
        return r;
    }
}

template <int TPR, int PER>
__global__ void softmax_rows_reg(float* __restrict__ probs, const std::uint8_t* __restrict__ key_mask, Dims m) {
    __shared__ float shf[kThreads / 32];
    __shared__ int shi[kThreads / 32];
    constexpr int per_block = kThreads / TPR;
    const int lane = threadIdx.x % TPR;
    const ll rows = m.B * m.H * m.Nq, K = m.K;
    // every thread of a block runs the same number of iterations (row_reduce's __syncthreads when TPR = kThreads)
    for (ll row = blockIdx.x * static_cast<ll>(per_block) + threadIdx.x / TPR; row < rows;
         row += static_cast<ll>(gridDim.x) * per_block) {
        const ll b = row / (m.H * m.Nq), i = row % m.Nq;
        float* P = probs + row * K;
        float v[PER];
        float mx = -FLT_MAX;
        int seen = 0;
#pragma unroll
        for (int t = 0; t < PER; t++) {
            const ll j = lane + static_cast<ll>(TPR) * t;
            const bool hidden = column_hidden(key_mask, m, b, i, j);
            v[t] = hidden ? -FLT_MAX : P[j];
            if (!hidden) {
                mx = fmaxf(mx, v[t]);
                seen++;
            }
        }
        mx = row_reduce<TPR>(mx, MaxOp{}, shf);
        seen = row_reduce<TPR>(seen, SumOp{}, shi);
        float sum = 0;
#pragma unroll
        for (int t = 0; t < PER; t++) {
            const ll j = lane + static_cast<ll>(TPR) * t;
            const bool hidden = column_hidden(key_mask, m, b, i, j);
            v[t] = j >= K ? 0.0f : seen == 0 ? 1.0f : hidden ? 0.0f : expf(v[t] - mx);
            sum += v[t];
        }
        const float inv = 1.0f / row_reduce<TPR>(sum, SumOp{}, shf);
#pragma unroll
        for (int t = 0; t < PER; t++) {
            const ll j = lane + static_cast<ll>(TPR) * t;
            if (j < K) P[j] = v[t] * inv;
        }
    }
}

template <int TPR, int PER>
__global__ void softmax_backward_rows_reg(float* __restrict__ ds, const float* __restrict__ probs,
                                          const std::uint8_t* __restrict__ key_mask, Dims m) {
    __shared__ float shf[kThreads / 32];
    constexpr int per_block = kThreads / TPR;
    const int lane = threadIdx.x % TPR;
    const ll rows = m.B * m.H * m.Nq, K = m.K;
    for (ll row = blockIdx.x * static_cast<ll>(per_block) + threadIdx.x / TPR; row < rows;
         row += static_cast<ll>(gridDim.x) * per_block) {
        const ll b = row / (m.H * m.Nq), i = row % m.Nq;
        const float* P = probs + row * K;
        float* S = ds + row * K;
        float p[PER], d[PER];
        float pdp = 0;
#pragma unroll
        for (int t = 0; t < PER; t++) {
            const ll j = lane + static_cast<ll>(TPR) * t;
            const bool hidden = column_hidden(key_mask, m, b, i, j);
            // a hidden key adds nothing to the sum: its probability is 0 whenever its dS is used (a row with no
            // key seen at all, uniform in the forward, has no null column either, so every dS of it is 0)
            p[t] = hidden ? 0.0f : P[j];
            d[t] = hidden ? 0.0f : S[j];
            pdp += p[t] * d[t];
        }
        pdp = row_reduce<TPR>(pdp, SumOp{}, shf);
#pragma unroll
        for (int t = 0; t < PER; t++) {
            const ll j = lane + static_cast<ll>(TPR) * t;
            const bool hidden = column_hidden(key_mask, m, b, i, j);
            if (j < K) S[j] = hidden ? 0.0f : p[t] * (d[t] - pdp);
        }
    }
}

// out[b, i, h*D + d] += P[row, 0] * null_v[h*D + d] (one thread per element of out).
__global__ void add_null_value(float* __restrict__ out, const float* __restrict__ probs,
                               const float* __restrict__ null_v, Dims m) {
    const ll total = m.B * m.Nq * m.HD;
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < total; e += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll b = e / (m.Nq * m.HD), i = (e / m.HD) % m.Nq, hd = e % m.HD, h = hd / m.D;
        out[e] += probs[((b * m.H + h) * m.Nq + i) * m.K] * null_v[hd];
    }
}

// dP[row, 0] = dout_row . null_v (one thread per row).
__global__ void null_dp(float* __restrict__ ds, const float* __restrict__ dout, const float* __restrict__ null_v, Dims m) {
    const ll rows = m.B * m.H * m.Nq;
    for (ll row = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; row < rows;
         row += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll b = row / (m.H * m.Nq), h = (row / m.Nq) % m.H, i = row % m.Nq;
        ds[row * m.K] = dot(dout + (b * m.Nq + i) * m.HD + h * m.D, null_v + h * m.D, m.D);
    }
}

// dP -> dS = P (dP - sum_j P dP), 0 where masked, in place; one block per row.
__global__ void softmax_backward_rows(float* __restrict__ ds, const float* __restrict__ probs,
                                      const std::uint8_t* __restrict__ key_mask, Dims m) {
    __shared__ float shf[kThreads];
    const ll rows = m.B * m.H * m.Nq;
    for (ll row = blockIdx.x; row < rows; row += gridDim.x) {
        const ll b = row / (m.H * m.Nq), i = row % m.Nq;
        const float* P = probs + row * m.K;
        float* S = ds + row * m.K;
        float pdp = 0;
        for (ll j = threadIdx.x; j < m.K; j += kThreads) pdp += P[j] * S[j];
        pdp = block_reduce(pdp, shf, SumOp{});
        for (ll j = threadIdx.x; j < m.K; j += kThreads) {
            const bool hidden = j >= m.off && key_hidden(key_mask, m, b, i, j - m.off);
            S[j] = hidden ? 0.0f : P[j] * (S[j] - pdp);
        }
        __syncthreads();
    }
}

// dq[b, i, h*D + d] += dS[row, 0] * null_k[h*D + d] (one thread per element of dq).
__global__ void add_null_key(float* __restrict__ dq, const float* __restrict__ ds, const float* __restrict__ null_k,
                             Dims m) {
    const ll total = m.B * m.Nq * m.HD;
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < total; e += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll b = e / (m.Nq * m.HD), i = (e / m.HD) % m.Nq, hd = e % m.HD, h = hd / m.D;
        dq[e] += ds[((b * m.H + h) * m.Nq + i) * m.K] * null_k[hd];
    }
}

// The null key's / value's gradient term of row n = (b, i) and column hd = (h, d): S[(b, h, i), 0] x[(b, i), hd]
// (S = dS with x = q for dnull_k, S = P with x = dO for dnull_v), summed over n by column_sums.
struct NullTerm {
    const float *S, *x;
    ll H, Nq, K, HD, D;
    __device__ float operator()(ll n, ll hd) const {
        const ll b = n / Nq, i = n % Nq, h = hd / D;
        return S[((b * H + h) * Nq + i) * K] * x[(b * Nq + i) * HD + hd];
    }
};

// The row kernels for m's rows: in registers up to kRegisterRowsMaxKeys keys (a warp per row up to
// kRegisterRowsWarpKeys), PER the smallest power of two that covers the row; else a block per row, three passes.
template <int TPR, int PER>
void launch_softmax_reg(float* probs, const std::uint8_t* key_mask, const Dims& m, cudaStream_t st) {
    if constexpr (PER < 16) {
        if (m.K > static_cast<ll>(TPR) * PER) return launch_softmax_reg<TPR, PER * 2>(probs, key_mask, m, st);
    }
    softmax_rows_reg<TPR, PER><<<grid_for(m.B * m.H * m.Nq, kThreads / TPR), kThreads, 0, st>>>(probs, key_mask, m);
    RETRO_CUDA_LAUNCH_CHECK("softmax_rows_reg", st);
}
void launch_softmax(float* probs, const std::uint8_t* key_mask, const Dims& m, cudaStream_t st) {
    if (m.K <= kRegisterRowsWarpKeys) return launch_softmax_reg<32, 1>(probs, key_mask, m, st);
    if (m.K <= kRegisterRowsMaxKeys) return launch_softmax_reg<kThreads, 1>(probs, key_mask, m, st);
    softmax_rows<<<grid_for(m.B * m.H * m.Nq, 1), kThreads, 0, st>>>(probs, key_mask, m);
    RETRO_CUDA_LAUNCH_CHECK("softmax_rows", st);
}
template <int TPR, int PER>
void launch_softmax_backward_reg(float* ds, const float* probs, const std::uint8_t* key_mask, const Dims& m,
                                 cudaStream_t st) {
    if constexpr (PER < 16) {
        if (m.K > static_cast<ll>(TPR) * PER)
            return launch_softmax_backward_reg<TPR, PER * 2>(ds, probs, key_mask, m, st);
    }
    softmax_backward_rows_reg<TPR, PER><<<grid_for(m.B * m.H * m.Nq, kThreads / TPR), kThreads, 0, st>>>(
        ds, probs, key_mask, m);
    RETRO_CUDA_LAUNCH_CHECK("softmax_backward_rows_reg", st);
}
void launch_softmax_backward(float* ds, const float* probs, const std::uint8_t* key_mask, const Dims& m,
                             cudaStream_t st) {
    if (m.K <= kRegisterRowsWarpKeys) return launch_softmax_backward_reg<32, 1>(ds, probs, key_mask, m, st);
    if (m.K <= kRegisterRowsMaxKeys) return launch_softmax_backward_reg<kThreads, 1>(ds, probs, key_mask, m, st);
    softmax_backward_rows<<<grid_for(m.B * m.H * m.Nq, 1), kThreads, 0, st>>>(ds, probs, key_mask, m);
    RETRO_CUDA_LAUNCH_CHECK("softmax_backward_rows", st);
}

}  // namespace

// The B x H products C_bh = op(A_bh) op(B_bh) (column-major, as cuBLAS sees them) as strided-batched fp32 GEMMs over
// the larger of the two counts, one call per index of the other: training (B >= H) makes H calls of B products,
// decoding (B = 1) one call of H products. tests/reference/cublas_layout_check.py replays these calls in numpy.
void CudaNnBackend::attention_gemm(bool ta, bool tb, ll m, ll n, ll k, HeadOperand A, HeadOperand B, float* C, ll ldc,
                                   ll c_item, ll c_head, ll items, ll heads, const char* what) {
    const float one = 1.0f, zero = 0.0f;
    const bool over_items = heads <= items;   // batch over items, a call per head; else the other way round
    const ll calls = over_items ? heads : items, batch = over_items ? items : heads;
    for (ll v : {m, n, k, A.ld, B.ld, ldc, batch})
        RETRO_CHECK(v >= 0 && v <= INT_MAX, "attention: a GEMM size ", v, " does not fit cuBLAS's int");
    for (ll c = 0; c < calls; c++) {
        const ll a0 = c * (over_items ? A.per_head : A.per_item), b0 = c * (over_items ? B.per_head : B.per_item),
                 c0 = c * (over_items ? c_head : c_item);
        RETRO_CUBLAS_CHECK(cublasSgemmStridedBatched(
            handle_, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(m),
            static_cast<int>(n), static_cast<int>(k), &one, A.p + a0, static_cast<int>(A.ld),
            over_items ? A.per_item : A.per_head, B.p + b0, static_cast<int>(B.ld), over_items ? B.per_item : B.per_head,
            &zero, C + c0, static_cast<int>(ldc), over_items ? c_item : c_head, static_cast<int>(batch)));
        RETRO_CUDA_SYNC_POINT(what, stream_);
    }
}

void CudaNnBackend::attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                                      const float* null_k, const float* null_v, const std::uint8_t* key_mask,
                                      const AttentionShape& s) {
    RETRO_CHECK(!s.null_kv || (null_k && null_v), "null key/value missing");
    if (flash_applies(s, key_mask)) return flash_forward(out, probs, q, k, v, null_k, null_v, key_mask, s);
    RETRO_CHECK(out, "attention_forward: out is null where the fused attention does not take the shape");
    const Dims m = dims_of(s);
    const ll rows = m.B * m.H * m.Nq;
    if (rows == 0) return;
    if (m.D == 0) {
        zero(probs, static_cast<std::size_t>(rows * m.K) * sizeof(float));   // every score 0: softmax is uniform
    } else {
        if (m.Nk > 0)   // S^T[off:, :] = K_bh Q_bh^T
            attention_gemm(true, false, m.Nk, m.Nq, m.D, {k, m.HD, m.Nk * m.HD, m.D}, {q, m.HD, m.Nq * m.HD, m.D},
                           probs + m.off, m.K, m.H * m.Nq * m.K, m.Nq * m.K, m.B, m.H,
                           "cublasSgemmStridedBatched (attention scores)");
        if (m.off) {
            null_scores<<<grid_for(rows), kThreads, 0, stream_>>>(probs, q, null_k, m);
            RETRO_CUDA_LAUNCH_CHECK("null_scores", stream_);
        }
    }
    launch_softmax(probs, key_mask, m, stream_);
    if (m.D == 0) return;
    if (m.Nk > 0) {
        // O_bh^T = V_bh^T P_bh[:, off:]^T
        attention_gemm(false, false, m.D, m.Nq, m.Nk, {v, m.HD, m.Nk * m.HD, m.D},
                       {probs + m.off, m.K, m.H * m.Nq * m.K, m.Nq * m.K}, out, m.HD, m.Nq * m.HD, m.D, m.B, m.H,
                       "cublasSgemmStridedBatched (attention output)");
    } else {
        zero(out, static_cast<std::size_t>(m.B * m.Nq * m.HD) * sizeof(float));
    }
    if (m.off) {
        add_null_value<<<grid_for(m.B * m.Nq * m.HD), kThreads, 0, stream_>>>(out, probs, null_v, m);
        RETRO_CUDA_LAUNCH_CHECK("add_null_value", stream_);
    }
}

void CudaNnBackend::attention_backward(float* dq, float* dk, float* dv, float* dnull_k, float* dnull_v,
                                       const float* dout, const float* probs, const float* q, const float* k,
                                       const float* v, const float* null_k, const float* null_v,
                                       const std::uint8_t* key_mask, const AttentionShape& s) {
    RETRO_CHECK(!s.null_kv || (null_k && null_v), "null key/value missing");
    if (flash_applies(s, key_mask))
        return flash_backward(dq, dk, dv, dnull_k, dnull_v, dout, probs, q, k, v, null_k, null_v, key_mask, s);
    const Dims m = dims_of(s);
    const ll rows = m.B * m.H * m.Nq;
    if (m.B * m.H * m.D == 0) return;
    if (rows == 0) {   // no queries: the sums are empty
        if (m.Nk > 0) {
            zero(dk, static_cast<std::size_t>(m.B * m.Nk * m.HD) * sizeof(float));
            zero(dv, static_cast<std::size_t>(m.B * m.Nk * m.HD) * sizeof(float));
        }
        return;
    }
    float* ds = static_cast<float*>(scratch(ds_, static_cast<std::size_t>(rows * m.K) * sizeof(float)));
    if (m.Nk > 0)   // dP^T[off:, :] = V_bh dO_bh^T
        attention_gemm(true, false, m.Nk, m.Nq, m.D, {v, m.HD, m.Nk * m.HD, m.D}, {dout, m.HD, m.Nq * m.HD, m.D},
                       ds + m.off, m.K, m.H * m.Nq * m.K, m.Nq * m.K, m.B, m.H, "cublasSgemmStridedBatched (attention dP)");
    if (m.off) {
        null_dp<<<grid_for(rows), kThreads, 0, stream_>>>(ds, dout, null_v, m);
        RETRO_CUDA_LAUNCH_CHECK("null_dp", stream_);
    }
    launch_softmax_backward(ds, probs, key_mask, m, stream_);
    if (m.Nk > 0) {
        const HeadOperand ds_rows{ds + m.off, m.K, m.H * m.Nq * m.K, m.Nq * m.K},
            p_rows{probs + m.off, m.K, m.H * m.Nq * m.K, m.Nq * m.K};
        // dQ_bh^T = K_bh^T dS_bh[:, off:]^T
        attention_gemm(false, false, m.D, m.Nq, m.Nk, {k, m.HD, m.Nk * m.HD, m.D}, ds_rows, dq, m.HD, m.Nq * m.HD, m.D,
                       m.B, m.H, "cublasSgemmStridedBatched (attention dq)");
        // dK_bh^T = Q_bh^T dS_bh[:, off:],  dV_bh^T = dO_bh^T P_bh[:, off:]
        attention_gemm(false, true, m.D, m.Nk, m.Nq, {q, m.HD, m.Nq * m.HD, m.D}, ds_rows, dk, m.HD, m.Nk * m.HD, m.D,
                       m.B, m.H, "cublasSgemmStridedBatched (attention dk)");
        attention_gemm(false, true, m.D, m.Nk, m.Nq, {dout, m.HD, m.Nq * m.HD, m.D}, p_rows, dv, m.HD, m.Nk * m.HD, m.D,
                       m.B, m.H, "cublasSgemmStridedBatched (attention dv)");
    } else {
        zero(dq, static_cast<std::size_t>(m.B * m.Nq * m.HD) * sizeof(float));
    }
    if (m.off) {
        add_null_key<<<grid_for(m.B * m.Nq * m.HD), kThreads, 0, stream_>>>(dq, ds, null_k, m);
        RETRO_CUDA_LAUNCH_CHECK("add_null_key", stream_);
    }
    // dnull_k += sum over (b, i) of dS[., 0] q, dnull_v += sum of P[., 0] dO (parameters: +=), in two passes
    if (s.null_kv && dnull_k) column_sums(dnull_k, NullTerm{ds, q, m.H, m.Nq, m.K, m.HD, m.D}, m.B * m.Nq, m.HD, "dnull_k");
    if (s.null_kv && dnull_v)
        column_sums(dnull_v, NullTerm{probs, dout, m.H, m.Nq, m.K, m.HD, m.D}, m.B * m.Nq, m.HD, "dnull_v");
}

}  // namespace retro::nn::detail
