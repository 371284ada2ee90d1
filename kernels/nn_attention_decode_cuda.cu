// CUDA NnBackend::attention_decode (nn/nn_backend.h): a decode step's attention for rows that each have one query —
// the self-attention over each sequence's cache, or CCA over each row's chunk with the null column and the pad mask —
// split over the keys as flash-decoding does, in one launch (the per-sequence path it replaces takes a cuBLAS GEMM,
// a softmax kernel and a second GEMM, and two copies for the self-attention, per sequence and layer).
//
// Why split: one query row per head leaves one block per (row, head): 8 blocks of 132 SMs for one sequence of the
// demo decoder, each walking ~550 keys in order (session 20's H200 profile: 0.08 ms a call, 28 % of a decoded token).
// Here a block takes (row, head, split) with kAttentionDecodeSplitKeys = 64 keys of a split:
//   split   the block holding position pos writes the new key and value first (no other block reads that row);
//           scores: kLanesPerKey = 4 neighbouring threads per key, each a quarter of the channels (float4 loads where
//           D % 16 == 0 and aligned), added by a fixed butterfly; a masked key scores -FLT_MAX, as the CPU;
//           m = max of the scores (and of the null column's score in split 0, which also adds e_null and
//           e_null null_v below); e_j = exp(s_j - m); l = sum_j e_j (block_reduce's trees);
//           partial output: warp w takes the keys w, w + 8, ..., its lanes the channels (coalesced rows of V), the
//           8 warps' sums added in warp order; (acc [D], m, l) to the workspace at (row, head, split).
//   combine the last of a (row, head)'s splits to finish (a counter per (row, head): each block adds 1 after a
//           __threadfence; the one that sees splits - 1 combines, then sets the counter back to 0) reads the splits
//           0 .. pos / 64 in order, a thread per channel: M = max m_s, out = sum_s acc_s exp(m_s - M) / sum_s l_s
//           exp(m_s - M). Session 20's first form ran this as a second kernel (6.1 us a call on the H200, 8 calls a
//           token); the counter decides which block combines, never what is summed or in which order.
// The grid covers every split of L positions (a graph replays with new positions: the grid cannot follow pos); a
// split past pos returns at once. Every sum in a fixed order (no atomic arithmetic on values): the same inputs give
// the same bits.
// D <= kAttentionDecodeMaxD; positions are the caller's (0 <= pos < L, as the host backend checks): one outside would
// leave `out` unwritten and its counter non-zero, every later call wrong (a read-only review replayed this kernel in
// Python, thread by thread with a race detector and reordered blocks: no bug; it pointed this out).
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_backend_common.cuh"
#include "simt.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;
constexpr int kSplitKeys = static_cast<int>(kAttentionDecodeSplitKeys);
constexpr int kLanesPerKey = kThreads / kSplitKeys;   // neighbouring threads of one warp per key
constexpr int kWarps = kThreads / 32;
constexpr int kMaxD = static_cast<int>(kAttentionDecodeMaxD);
constexpr int kChannelsPerLane = kMaxD / 32;   // a lane's channels c = lane + 32 u of the partial output
static_assert(kThreads % kSplitKeys == 0 && kLanesPerKey <= 32 && (kLanesPerKey & (kLanesPerKey - 1)) == 0,
              "a key's lanes lie in one warp, their count a power of two");
static_assert(kMaxD % 32 == 0 && kMaxD <= kThreads, "attention_decode's head dimension");

__global__ __launch_bounds__(kThreads) void attention_decode_split_k(float* __restrict__ out, float* part,
                                                                     const float* __restrict__ q,
                                                                     NnBackend::DecodeCache cache,
                                                                     const std::int64_t* __restrict__ pos,
                                                                     const std::int64_t* __restrict__ seq, ll rows, ll H,
                                                                     ll D, ll S, bool vec4) {
    __shared__ float sh[kThreads];            // block_reduce
    __shared__ float qs[kMaxD];               // the head's query
    __shared__ float ex[kSplitKeys];          // the split's exponentials
    __shared__ float red[kWarps][kMaxD];      // the warps' partial outputs
    __shared__ bool last;                     // this block combines its (row, head)
    // a programmatic dependent launch (sm_90+): the next kernel may start launching; this one waits for the kernel
    // before it (the projection that wrote q and the new key and value) before it touches anything
    simt::launch_dependents();
    simt::grid_dependency_wait();
    const int t = static_cast<int>(threadIdx.x), lane = t % 32, w = t / 32;
    const int key = t / kLanesPerKey, sub = t % kLanesPerKey;
    const ll HD = H * D, L = cache.L, W = D + 2;
    for (ll b = blockIdx.x; b < rows * H * S; b += gridDim.x) {
        const ll e = b / S, s = b % S, i = e / H, h = e % H, j0 = s * kSplitKeys, off = h * D;
        const ll p = pos[i], slot = seq[i];   // both loads in flight together, before the branch needs p
        if (j0 > p) continue;   // past the row's last key (the same for the whole block)
        const int n = static_cast<int>(p + 1 - j0 < kSplitKeys ? p + 1 - j0 : kSplitKeys);
        float* K = cache.kcache + slot * L * HD + off;   // key j of this head: K[j * HD + c]
        float* V = cache.vcache + slot * L * HD + off;
        const std::uint8_t* mask = cache.key_mask ? cache.key_mask + slot * L : nullptr;
        const bool writes = cache.k_new && p / kSplitKeys == s;   // this split holds the new row
        for (ll c = t; c < D; c += kThreads) {
            if (writes) {
                K[p * HD + c] = cache.k_new[i * HD + off + c];
                V[p * HD + c] = cache.v_new[i * HD + off + c];
            }
            qs[c] = q[i * HD + off + c];
        }
        __syncthreads();   // the new key and value, and the query, visible to the whole block

        // the scores: lane `sub` of key `key` sums its quarter of the channels, the butterfly adds the quarters
        // (every lane of the warp takes part; a lane past n or on a masked key adds a 0)
        const bool live = key < n, masked = live && mask && !mask[j0 + key];
        float a = 0;
        if (live && !masked) {
            const float* kr = K + (j0 + key) * HD;
            if (vec4) {
                const ll per = D / kLanesPerKey;
                for (ll c = sub * per; c < (sub + 1) * per; c += 4) {
                    const float4 kv = *reinterpret_cast<const float4*>(kr + c);
                    a += qs[c] * kv.x + qs[c + 1] * kv.y + qs[c + 2] * kv.z + qs[c + 3] * kv.w;
                }
            } else {
                for (ll c = sub; c < D; c += kLanesPerKey) a += qs[c] * kr[c];
            }
        }
        for (int o = 1; o < kLanesPerKey; o <<= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        const float score = !live ? -INFINITY : masked ? -FLT_MAX : a;

        const bool with_null = cache.null_k && s == 0;   // the null column belongs to split 0
        float s_null = -INFINITY;
        if (with_null) {   // every thread the same dot in the same order: the same value
            s_null = 0;
            for (ll c = 0; c < D; c++) s_null += qs[c] * cache.null_k[off + c];
        }
        const float m = fmaxf(block_reduce(sub == 0 ? score : -INFINITY, sh, MaxOp{}), s_null);
        const float ej = sub == 0 && live ? expf(score - m) : 0.0f;
        if (sub == 0 && live) ex[key] = ej;
        const float e_null = with_null ? expf(s_null - m) : 0.0f;
        const float l = block_reduce(ej, sh, SumOp{}) + e_null;   // its barriers also publish ex

        // the partial output: warp w the keys w, w + kWarps, ..., lane the channels lane + 32 u, in key order
        float acc[kChannelsPerLane] = {};
#pragma unroll 4
        for (int j = w; j < n; j += kWarps) {
            const float wj = ex[j];
            const float* vr = V + (j0 + j) * HD;
#pragma unroll
            for (int u = 0; u < kChannelsPerLane; u++)
                if (lane + 32 * u < D) acc[u] += wj * vr[lane + 32 * u];
        }
#pragma unroll
        for (int u = 0; u < kChannelsPerLane; u++)
            if (lane + 32 * u < D) red[w][lane + 32 * u] = acc[u];
        __syncthreads();
        float* dst = part + b * W;
        for (ll c = t; c < D; c += kThreads) {
            float o = with_null ? e_null * cache.null_v[off + c] : 0.0f;
            for (int ww = 0; ww < kWarps; ww++) o += red[ww][c];
            dst[c] = o;
        }
        if (t == 0) {
            dst[D] = m;
            dst[D + 1] = l;
        }

        // the last split of (row, head) e to finish combines: its partials, visible device-wide before it counts
        __threadfence();
        __syncthreads();
        const ll splits = p / kSplitKeys + 1;
        if (t == 0) last = atomicAdd(cache.counters + e, 1u) == static_cast<unsigned>(splits - 1);
        __syncthreads();
        if (last) {
            __threadfence();
            const float* pe = part + e * S * W;
            for (ll c = t; c < D; c += kThreads) {   // L2 loads (__ldcg): the other blocks' partials, not an L1 copy
                float M = -INFINITY;
#pragma unroll 8
                for (ll k = 0; k < splits; k++) M = fmaxf(M, __ldcg(pe + k * W + D));
                float lsum = 0, o = 0;
#pragma unroll 8
                for (ll k = 0; k < splits; k++) {
                    const float scale = expf(__ldcg(pe + k * W + D) - M);
                    lsum += __ldcg(pe + k * W + D + 1) * scale;
                    o += __ldcg(pe + k * W + c) * scale;
                }
                out[e * D + c] = o / lsum;
            }
            if (t == 0) cache.counters[e] = 0;   // every split of e has counted: ready for the next call
        }
        __syncthreads();   // qs, ex, red and last are rewritten for the next (row, head, split)
    }
}

}  // namespace

void CudaNnBackend::attention_decode(float* out, const float* q, const DecodeCache& c, const std::int64_t* pos,
                                     const std::int64_t* seq, std::int64_t rows, std::int64_t H, std::int64_t D) {
    RETRO_CHECK(D <= kAttentionDecodeMaxD, "attention_decode: head dimension ", D, " > ", kAttentionDecodeMaxD);
    if (rows * H * D == 0) return;
    RETRO_CHECK(c.workspace != nullptr && c.counters != nullptr,
                "attention_decode: no workspace (attention_decode_workspace floats) or counters (rows * H, zero)");
    const std::int64_t S = (c.L + kSplitKeys - 1) / kSplitKeys;
    // float4 loads of a key's quarter: every quarter starts 16-byte aligned when D % 16 == 0 and the caches are
    const bool vec4 = D % (4 * kLanesPerKey) == 0 && (reinterpret_cast<std::uintptr_t>(c.kcache) % 16 == 0);
    launch_kernel(dependent_launch_, attention_decode_split_k, grid_for(rows * H * S, 1), kThreads, 0, stream_, out,
                  c.workspace, q, c, pos, seq, static_cast<ll>(rows), static_cast<ll>(H), static_cast<ll>(D),
                  static_cast<ll>(S), vec4);
    RETRO_CUDA_LAUNCH_CHECK("attention_decode", stream_);
}

}  // namespace retro::nn::detail
