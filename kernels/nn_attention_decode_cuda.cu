// CUDA NnBackend::attention_decode (nn/nn_backend.h): one decode step of causal self-attention for rows that each
// feed one token, in one launch (the per-sequence path it replaces takes two copies and a cuBLAS GEMM, a softmax
// kernel and a second GEMM per sequence and layer; decoding is launch-bound, docs/performance.md). One block per
// (row, head), block-stride over them: the block writes its head's slice of the new key and value into the caches
// at pos[row], then walks the keys 0..pos in tiles of kThreads with an online softmax:
//   scores  one warp per key: the lanes' strided partial dots q . k_j, then a fixed butterfly;
//   tile    m' = max(m, max_j s_j); e_j = exp(s_j - m'); l = l exp(m - m') + sum_j e_j (block_reduce's trees);
//   output  thread d keeps acc_d = acc_d exp(m - m') + sum_j e_j v_j[d], keys in order; out = acc_d / l.
// Every sum in a fixed order (no atomics): the same inputs give the same bits. D <= kThreads (the thread of
// channel d keeps its accumulator), which kAttentionDecodeMaxD states; positions are the caller's (pos < L).
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;
constexpr int kWarps = kThreads / 32;
static_assert(kAttentionDecodeMaxD <= kThreads, "attention_decode keeps one channel per thread");

__global__ void attention_decode_k(float* __restrict__ out, const float* __restrict__ q,
                                   const float* __restrict__ k_new, const float* __restrict__ v_new,
                                   float* __restrict__ kcache, float* __restrict__ vcache,
                                   const std::int64_t* __restrict__ pos, const std::int64_t* __restrict__ seq, ll rows,
                                   ll L, ll H, ll D) {
    __shared__ float sh[kThreads];       // block_reduce
    __shared__ float tile[kThreads];     // the tile's scores, then their exponentials
    __shared__ float qs[kThreads];       // the head's query
    const int t = static_cast<int>(threadIdx.x), lane = t % 32, warp = t / 32;
    const ll HD = H * D;
    for (ll e = blockIdx.x; e < rows * H; e += gridDim.x) {
        const ll i = e / H, h = e % H, p = pos[i], off = h * D;
        float* K = kcache + seq[i] * L * HD + off;   // key j of this head: K[j * HD + d]
        float* V = vcache + seq[i] * L * HD + off;
        for (ll d = t; d < D; d += kThreads) {
            K[p * HD + d] = k_new[i * HD + off + d];
            V[p * HD + d] = v_new[i * HD + off + d];
            qs[d] = q[i * HD + off + d];
        }
        __syncthreads();   // the new key and value, and the query, visible to the whole block
        float m = -INFINITY, l = 0, acc = 0;
        for (ll j0 = 0; j0 <= p; j0 += kThreads) {
            const int n = static_cast<int>(p + 1 - j0 < kThreads ? p + 1 - j0 : kThreads);
            for (int j = warp; j < n; j += kWarps) {
                const float* kr = K + (j0 + j) * HD;
                float s = 0;
                for (ll d = lane; d < D; d += 32) s += qs[d] * kr[d];
                for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
                if (lane == 0) tile[j] = s;
            }
            __syncthreads();
            const float mine = t < n ? tile[t] : -INFINITY;
            const float m_new = fmaxf(m, block_reduce(mine, sh, MaxOp{}));
            const float ex = t < n ? expf(mine - m_new) : 0.0f;
            const float correction = expf(m - m_new);   // 0 on the first tile (m = -inf, m_new finite)
            l = l * correction + block_reduce(ex, sh, SumOp{});
            tile[t] = ex;   // each thread overwrites its own score only after block_reduce's barriers
            __syncthreads();
            if (t < D) {
                float a = acc * correction;
                for (int j = 0; j < n; j++) a += tile[j] * V[(j0 + j) * HD + t];
                acc = a;
            }
            m = m_new;
            __syncthreads();   // the tile is rewritten next
        }
        if (t < D) out[i * HD + off + t] = acc / l;
    }
}

}  // namespace

void CudaNnBackend::attention_decode(float* out, const float* q, const float* k_new, const float* v_new, float* kcache,
                                     float* vcache, const std::int64_t* pos, const std::int64_t* seq,
                                     std::int64_t rows, std::int64_t L, std::int64_t H, std::int64_t D) {
    RETRO_CHECK(D <= kAttentionDecodeMaxD, "attention_decode: head dimension ", D, " > ", kAttentionDecodeMaxD);
    if (rows * H == 0) return;
    attention_decode_k<<<grid_for(rows * H, 1), kThreads, 0, stream_>>>(out, q, k_new, v_new, kcache, vcache, pos, seq,
                                                                        rows, L, H, D);
    RETRO_CUDA_LAUNCH_CHECK("attention_decode", stream_);
}

}  // namespace retro::nn::detail
