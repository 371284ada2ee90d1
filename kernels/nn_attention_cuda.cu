// CUDA attention core of the NnBackend (nn/nn_backend.h; the contract and the math are nn/attention.h's):
// straightforward kernels, written to be obviously right rather than fast. A "row" is one (b, h, query i);
// probs [B, H, Nq, K] (K = keys: the null column first when s.null_kv) is the forward's score buffer itself, so
// no shared memory grows with the key count and any Nk launches.
//   forward, one block per row: s_j = q_i . k_j (column 0: q_i . null_k, never masked); masked (key_mask[b, j]
//     == 0, or causal with j > i + Nk - Nq) scores are -FLT_MAX; p = softmax (max and sum in block_reduce's
//     fixed tree); masked keys get 0, and a row with every key masked is uniform over all K columns (as the
//     CPU's -finfo.max fill makes it); out_i[d] = sum_j p_ij v_j[d] in j order, + p_i0 null_v[d] last.
//   backward, one block per row: dp_ij = dout_i . v_j (null_v for column 0), ds = p (dp - sum_j p dp), 0 where
//     masked, kept in a scratch [B, H, Nq, K]; dq_i[d] = sum_j ds_ij k_j[d] (+ ds_i0 null_k[d]);
//   then one thread per element of dk / dv: dk_j[d] = sum_i ds_ij q_i[d], dv_j[d] = sum_i p_ij dout_i[d] in i
//   order; then one thread per (h, d) for the null key/value: per item b the sum over i in order, added to
//   dnull_k / dnull_v in b order (nn/attention.cpp's order).
#include <cfloat>

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

__global__ void attention_forward_rows(float* __restrict__ out, float* __restrict__ probs, const float* __restrict__ q,
                                       const float* __restrict__ k, const float* __restrict__ v,
                                       const float* __restrict__ null_k, const float* __restrict__ null_v,
                                       const std::uint8_t* __restrict__ key_mask, Dims m) {
    __shared__ float shf[kThreads];
    __shared__ int shi[kThreads];
    const ll rows = m.B * m.H * m.Nq;
    for (ll row = blockIdx.x; row < rows; row += gridDim.x) {
        const ll b = row / (m.H * m.Nq), h = (row / m.Nq) % m.H, i = row % m.Nq;
        const float* Q = q + (b * m.Nq + i) * m.HD + h * m.D;
        float* P = probs + row * m.K;
        float mx = -FLT_MAX;
        int seen = 0;
        for (ll j = threadIdx.x; j < m.K; j += kThreads) {
            float s;
            if (j < m.off) {
                s = dot(Q, null_k + h * m.D, m.D);
                seen++;
            } else if (key_hidden(key_mask, m, b, i, j - m.off)) {
                s = -FLT_MAX;
            } else {
                s = dot(Q, k + (b * m.Nk + j - m.off) * m.HD + h * m.D, m.D);
                seen++;
            }
            P[j] = s;
            mx = fmaxf(mx, s);
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
        __syncthreads();   // P's entries were written by other threads of the block
        for (ll d = threadIdx.x; d < m.D; d += kThreads) {
            float acc = 0;
            for (ll j = m.off; j < m.K; j++) acc += P[j] * v[(b * m.Nk + j - m.off) * m.HD + h * m.D + d];
            if (m.off) acc += P[0] * null_v[h * m.D + d];
            out[(b * m.Nq + i) * m.HD + h * m.D + d] = acc;
        }
        __syncthreads();
    }
}

__global__ void attention_backward_rows(float* __restrict__ dq, float* __restrict__ ds, const float* __restrict__ dout,
                                        const float* __restrict__ probs, const float* __restrict__ k,
                                        const float* __restrict__ v, const float* __restrict__ null_k,
                                        const float* __restrict__ null_v, const std::uint8_t* __restrict__ key_mask,
                                        Dims m) {
    __shared__ float shf[kThreads];
    const ll rows = m.B * m.H * m.Nq;
    for (ll row = blockIdx.x; row < rows; row += gridDim.x) {
        const ll b = row / (m.H * m.Nq), h = (row / m.Nq) % m.H, i = row % m.Nq;
        const float* dO = dout + (b * m.Nq + i) * m.HD + h * m.D;
        const float* P = probs + row * m.K;
        float* S = ds + row * m.K;
        float pdp = 0;
        for (ll j = threadIdx.x; j < m.K; j += kThreads) {
            const float dp = j < m.off ? dot(dO, null_v + h * m.D, m.D)
                                       : dot(dO, v + (b * m.Nk + j - m.off) * m.HD + h * m.D, m.D);
            S[j] = dp;
            pdp += P[j] * dp;
        }
        pdp = block_reduce(pdp, shf, SumOp{});
        for (ll j = threadIdx.x; j < m.K; j += kThreads) {
            const bool hidden = j >= m.off && key_hidden(key_mask, m, b, i, j - m.off);
            S[j] = hidden ? 0.0f : P[j] * (S[j] - pdp);
        }
        __syncthreads();   // S's entries were written by other threads of the block
        for (ll d = threadIdx.x; d < m.D; d += kThreads) {
            float acc = 0;
            for (ll j = m.off; j < m.K; j++) acc += S[j] * k[(b * m.Nk + j - m.off) * m.HD + h * m.D + d];
            if (m.off) acc += S[0] * null_k[h * m.D + d];
            dq[(b * m.Nq + i) * m.HD + h * m.D + d] = acc;
        }
        __syncthreads();
    }
}

// One thread per element of dk / dv [B, Nk, H*D].
__global__ void attention_backward_keys(float* __restrict__ dk, float* __restrict__ dv, const float* __restrict__ ds,
                                        const float* __restrict__ probs, const float* __restrict__ q,
                                        const float* __restrict__ dout, Dims m) {
    const ll total = m.B * m.Nk * m.HD;
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < total; e += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll b = e / (m.Nk * m.HD), j = (e / m.HD) % m.Nk, hd = e % m.HD, h = hd / m.D;
        float acc_k = 0, acc_v = 0;
        for (ll i = 0; i < m.Nq; i++) {
            const ll at = ((b * m.H + h) * m.Nq + i) * m.K + m.off + j;
            const ll qi = (b * m.Nq + i) * m.HD + hd;
            acc_k += ds[at] * q[qi];
            acc_v += probs[at] * dout[qi];
        }
        dk[e] = acc_k;
        dv[e] = acc_v;
    }
}

// One thread per (h, d): the null key's and value's gradients (parameters: +=); either may be null.
__global__ void attention_backward_null(float* __restrict__ dnull_k, float* __restrict__ dnull_v,
                                        const float* __restrict__ ds, const float* __restrict__ probs,
                                        const float* __restrict__ q, const float* __restrict__ dout, Dims m) {
    for (ll hd = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; hd < m.HD; hd += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll h = hd / m.D;
        for (ll b = 0; b < m.B; b++) {
            float pk = 0, pv = 0;
            for (ll i = 0; i < m.Nq; i++) {
                const ll at = ((b * m.H + h) * m.Nq + i) * m.K;
                const ll qi = (b * m.Nq + i) * m.HD + hd;
                pk += ds[at] * q[qi];
                pv += probs[at] * dout[qi];
            }
            if (dnull_k) dnull_k[hd] += pk;
            if (dnull_v) dnull_v[hd] += pv;
        }
    }
}

}  // namespace

void CudaNnBackend::attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                                      const float* null_k, const float* null_v, const std::uint8_t* key_mask,
                                      const AttentionShape& s) {
    RETRO_CHECK(!s.null_kv || (null_k && null_v), "null key/value missing");
    const Dims m = dims_of(s);
    const ll rows = m.B * m.H * m.Nq;
    if (rows == 0) return;
    attention_forward_rows<<<grid_for(rows, 1), kThreads, 0, stream_>>>(out, probs, q, k, v, null_k, null_v,
                                                                       key_mask, m);
    RETRO_CUDA_LAUNCH_CHECK("attention_forward_rows", stream_);
}

void CudaNnBackend::attention_backward(float* dq, float* dk, float* dv, float* dnull_k, float* dnull_v,
                                       const float* dout, const float* probs, const float* q, const float* k,
                                       const float* v, const float* null_k, const float* null_v,
                                       const std::uint8_t* key_mask, const AttentionShape& s) {
    RETRO_CHECK(!s.null_kv || (null_k && null_v), "null key/value missing");
    const Dims m = dims_of(s);
    const ll rows = m.B * m.H * m.Nq;
    if (m.B * m.H * m.D == 0) return;
    float* ds = static_cast<float*>(scratch(ds_, static_cast<std::size_t>(std::max<ll>(rows * m.K, 1)) * sizeof(float)));
    if (rows > 0) {
        attention_backward_rows<<<grid_for(rows, 1), kThreads, 0, stream_>>>(dq, ds, dout, probs, k, v, null_k, null_v,
                                                                            key_mask, m);
        RETRO_CUDA_LAUNCH_CHECK("attention_backward_rows", stream_);
    }
    if (m.Nk > 0) {   // with Nq == 0 the sums are empty: dk = dv = 0
        attention_backward_keys<<<grid_for(m.B * m.Nk * m.HD), kThreads, 0, stream_>>>(dk, dv, ds, probs, q, dout, m);
        RETRO_CUDA_LAUNCH_CHECK("attention_backward_keys", stream_);
    }
    if (s.null_kv && (dnull_k || dnull_v)) {
        attention_backward_null<<<grid_for(m.HD), kThreads, 0, stream_>>>(dnull_k, dnull_v, ds, probs, q, dout, m);
        RETRO_CUDA_LAUNCH_CHECK("attention_backward_null", stream_);
    }
}

}  // namespace retro::nn::detail
