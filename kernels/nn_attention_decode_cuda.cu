// CUDA NnBackend::attention_decode (nn/nn_backend.h): a decode step's attention for rows that each have one query —
// the self-attention over each sequence's cache, or CCA over each row's chunk with the null column and the pad mask —
// in one launch (the per-sequence path it replaces takes a cuBLAS GEMM, a softmax kernel and a second GEMM, and two
// copies for the self-attention, per sequence and layer; decoding is launch-bound, docs/performance.md). One block
// per (row, head), block-stride over them: with k_new the block first writes its head's slice of the new key and
// value at pos[row]; the null column, when given, starts the running softmax (m = q . null_k, l = 1, acc = null_v);
// then the keys 0..pos in tiles of kThreads with an online softmax (a masked key scores -FLT_MAX, as the CPU):
//   scores  thread t the whole dot q . k_{j0+t} (float4 loads of its key row when D % 4 == 0: many independent
//           loads in flight, where a warp per key would wait on one row at a time);
//   tile    m' = max(m, max_j s_j); e_j = exp(s_j - m'); l = l exp(m - m') + sum_j e_j (block_reduce's trees);
//   output  thread (g, d), g < G = kThreads / D groups: acc = acc exp(m - m') + sum over the tile's keys j = g mod G
//           of e_j v_j[d] (coalesced rows), in key order; at the end the G partials of channel d are added in g
//           order and divided by l.
// Every sum in a fixed order (no atomics): the same inputs give the same bits. D <= kThreads (kAttentionDecodeMaxD);
// positions are the caller's (pos < L).
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;
static_assert(kAttentionDecodeMaxD <= kThreads, "attention_decode keeps one channel per thread");

__global__ void attention_decode_k(float* __restrict__ out, const float* __restrict__ q, NnBackend::DecodeCache cache,
                                   const std::int64_t* __restrict__ pos, const std::int64_t* __restrict__ seq, ll rows,
                                   ll H, ll D, bool vec4) {
    __shared__ float sh[kThreads];       // block_reduce
    __shared__ float tile[kThreads];     // the tile's exponentials
    __shared__ float qs[kThreads];       // the head's query
    __shared__ float part[kThreads];     // the value groups' partial sums [G, D]
    const int t = static_cast<int>(threadIdx.x);
    const int G = static_cast<int>(kThreads / D), g = t / static_cast<int>(D), d = t % static_cast<int>(D);
    const ll HD = H * D, L = cache.L;
    for (ll e = blockIdx.x; e < rows * H; e += gridDim.x) {
        const ll i = e / H, h = e % H, p = pos[i], off = h * D;
        float* K = cache.kcache + seq[i] * L * HD + off;   // key j of this head: K[j * HD + c]
        float* V = cache.vcache + seq[i] * L * HD + off;
        const std::uint8_t* mask = cache.key_mask ? cache.key_mask + seq[i] * L : nullptr;
        for (ll c = t; c < D; c += kThreads) {
            if (cache.k_new) {
                K[p * HD + c] = cache.k_new[i * HD + off + c];
                V[p * HD + c] = cache.v_new[i * HD + off + c];
            }
            qs[c] = q[i * HD + off + c];
        }
        __syncthreads();   // the new key and value, and the query, visible to the whole block
        float m = -INFINITY, l = 0, acc = 0;
        if (cache.null_k) {   // every thread the same dot, in the same order: the same m
            float s0 = 0;
            for (ll c = 0; c < D; c++) s0 += qs[c] * cache.null_k[off + c];
            m = s0;
            l = 1;
            if (g == 0) acc = cache.null_v[off + d];
        }
        for (ll j0 = 0; j0 <= p; j0 += kThreads) {
            const int n = static_cast<int>(p + 1 - j0 < kThreads ? p + 1 - j0 : kThreads);
            float s = -INFINITY;
            if (t < n && mask && !mask[j0 + t]) {
                s = -FLT_MAX;
            } else if (t < n) {
                const float* kr = K + (j0 + t) * HD;
                s = 0;
                if (vec4) {
                    for (ll c = 0; c < D; c += 4) {
                        const float4 kv = *reinterpret_cast<const float4*>(kr + c);
                        s += qs[c] * kv.x + qs[c + 1] * kv.y + qs[c + 2] * kv.z + qs[c + 3] * kv.w;
                    }
                } else {
                    for (ll c = 0; c < D; c++) s += qs[c] * kr[c];
                }
            }
            const float m_new = fmaxf(m, block_reduce(s, sh, MaxOp{}));
            const float ex = t < n ? expf(s - m_new) : 0.0f;
            const float correction = expf(m - m_new);   // 0 on the first tile (m = -inf, m_new finite)
            l = l * correction + block_reduce(ex, sh, SumOp{});
            tile[t] = ex;   // the previous tile's readers passed the barrier at the end of the last iteration
            __syncthreads();
            if (g < G) {
                float a = acc * correction;
                for (int j = g; j < n; j += G) a += tile[j] * V[(j0 + j) * HD + d];
                acc = a;
            }
            m = m_new;
            __syncthreads();   // the tile is rewritten next
        }
        if (g < G) part[g * D + d] = acc;
        __syncthreads();
        if (t < D) {
            float o = 0;
            for (int gg = 0; gg < G; gg++) o += part[gg * D + t];
            out[i * HD + off + t] = o / l;
        }
        __syncthreads();   // part and qs are rewritten for the next (row, head)
    }
}

}  // namespace

void CudaNnBackend::attention_decode(float* out, const float* q, const DecodeCache& c, const std::int64_t* pos,
                                     const std::int64_t* seq, std::int64_t rows, std::int64_t H, std::int64_t D) {
    RETRO_CHECK(D <= kAttentionDecodeMaxD, "attention_decode: head dimension ", D, " > ", kAttentionDecodeMaxD);
    if (rows * H * D == 0) return;
    // float4 loads of the key rows: every row start is 16-byte aligned when D % 4 == 0 and the caches are
    const bool vec4 = D % 4 == 0 && (reinterpret_cast<std::uintptr_t>(c.kcache) % 16 == 0);
    attention_decode_k<<<grid_for(rows * H, 1), kThreads, 0, stream_>>>(out, q, c, pos, seq, rows, H, D, vec4);
    RETRO_CUDA_LAUNCH_CHECK("attention_decode", stream_);
}

}  // namespace retro::nn::detail
