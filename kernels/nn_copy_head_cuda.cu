// CUDA NnBackend ops of the copy head (nn/nn_backend.h; the arithmetic of nn/copy_head.h, docs/retrieval.md
// section 17). The candidates come from the host (nn::copy_candidates_batch), valid by construction.
//   copy_head_forward   one warp per row: for each candidate in neighbour order, the gate
//                       kCopyBiasScale bias[b] + weight[b] . xn[row] (the lanes' strided partial dots, then a fixed
//                       butterfly), added to logits[row, token] by lane 0, so two candidates naming one token add
//                       in order;
//   copy_head_backward  dxn one thread per element, the row's candidates in order (nn/copy_head.cpp's order);
//                       dweight [kCopyBuckets, C] and dbias [kCopyBuckets] as column sums over the rows*k (row,
//                       neighbour) pairs in two deterministic passes (nn_backend_common.cuh): a pair's term is its
//                       logit's gradient times xn (times kCopyBiasScale for the bias) in its own bucket's columns
//                       and 0 in the others. No atomics: the same inputs give the same bits.
#include <cstdint>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/copy_head.h"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;
constexpr int kWarpsPerBlock = kThreads / 32;

__global__ void copy_head_forward_rows(float* __restrict__ logits, const float* __restrict__ xn,
                                       const CopyCandidate* __restrict__ cand, ll rows, ll k, ll V, ll C,
                                       const float* __restrict__ bias, const float* __restrict__ weight,
                                       float bias_scale) {
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    // every lane of a warp takes the same row and candidate: the branches below are warp-uniform
    for (ll i = blockIdx.x * static_cast<ll>(kWarpsPerBlock) + warp; i < rows; i += static_cast<ll>(gridDim.x) * kWarpsPerBlock) {
        const float* x = xn + i * C;
        for (ll m = 0; m < k; m++) {
            const CopyCandidate c = cand[i * k + m];
            if (c.token < 0) continue;
            const float* w = weight + static_cast<ll>(c.bucket) * C;
            float acc = 0;
            for (ll d = lane; d < C; d += 32) acc += w[d] * x[d];
            for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if (lane == 0) logits[i * V + c.token] += bias_scale * bias[c.bucket] + acc;
        }
    }
}

__global__ void copy_head_dxn(float* __restrict__ dxn, const float* __restrict__ dlogits,
                              const CopyCandidate* __restrict__ cand, ll rows, ll k, ll V, ll C,
                              const float* __restrict__ weight) {
    for (ll e = blockIdx.x * static_cast<ll>(blockDim.x) + threadIdx.x; e < rows * C; e += static_cast<ll>(gridDim.x) * blockDim.x) {
        const ll i = e / C, d = e % C;
        float acc = dxn[e];
        for (ll m = 0; m < k; m++) {
            const CopyCandidate c = cand[i * k + m];
            if (c.token < 0) continue;
            const float g = dlogits[i * V + c.token];
            if (g == 0.0f) continue;
            acc += g * weight[static_cast<ll>(c.bucket) * C + d];
        }
        dxn[e] = acc;
    }
}

struct CopyWeightTerm {   // dweight[b, d] over pairs p = (row i, neighbour m): g(p) xn[i, d] where p's bucket is b
    const float *dlogits, *xn;
    const CopyCandidate* cand;
    ll k, V, C;
    __device__ float operator()(ll p, ll j) const {
        const CopyCandidate c = cand[p];
        if (c.token < 0 || c.bucket != j / C) return 0.0f;
        const ll i = p / k;
        return dlogits[i * V + c.token] * xn[i * C + j % C];
    }
};

struct CopyBiasTerm {   // dbias[b] over the pairs: bias_scale g(p) where p's bucket is b
    const float* dlogits;
    const CopyCandidate* cand;
    ll k, V;
    float bias_scale;
    __device__ float operator()(ll p, ll j) const {
        const CopyCandidate c = cand[p];
        if (c.token < 0 || c.bucket != j) return 0.0f;
        return bias_scale * dlogits[(p / k) * V + c.token];
    }
};

}  // namespace

void CudaNnBackend::copy_head_forward(float* logits, const float* xn, const CopyCandidate* cand, std::int64_t rows,
                                      std::int64_t k, std::int64_t V, std::int64_t C, const float* bias,
                                      const float* weight) {
    if (rows * k == 0) return;
    copy_head_forward_rows<<<grid_for(rows, kWarpsPerBlock), kThreads, 0, stream_>>>(
        logits, xn, cand, rows, k, V, C, bias, weight, static_cast<float>(kCopyBiasScale));
    RETRO_CUDA_LAUNCH_CHECK("copy_head_forward", stream_);
}

void CudaNnBackend::copy_head_backward(float* dxn, float* dbias, float* dweight, const float* dlogits, const float* xn,
                                       const CopyCandidate* cand, std::int64_t rows, std::int64_t k, std::int64_t V,
                                       std::int64_t C, const float* weight) {
    if (rows * k == 0) return;
    if (dxn) {
        copy_head_dxn<<<grid_for(rows * C), kThreads, 0, stream_>>>(dxn, dlogits, cand, rows, k, V, C, weight);
        RETRO_CUDA_LAUNCH_CHECK("copy_head_backward dxn", stream_);
    }
    if (dweight) column_sums(dweight, CopyWeightTerm{dlogits, xn, cand, k, V, C}, rows * k, kCopyBuckets * C,
                             "copy_head_backward dweight");
    if (dbias) column_sums(dbias, CopyBiasTerm{dlogits, cand, k, V, static_cast<float>(kCopyBiasScale)}, rows * k,
                           kCopyBuckets, "copy_head_backward dbias");
}

}  // namespace retro::nn::detail
