// attention_decode's device code (kernels/nn_attention_decode_cuda.cu describes the method): the work of the kernel
// after its launch prologue, for the kernel and for a fused decode step's op (kernels/nn_decode_program_cuda.cu).
// Every (row, head, split) is taken by grid-stride over blocks, so a grid of any size gives the same bits. Written
// against kernels/simt.cuh: the host emulator runs it too (tests/test_nn_decode_program_host.cpp).
// provides: attention_decode_rows, attention_decode_splits, attention_decode_vec4
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "nn/nn_backend.h"
#include "nn_block_reduce.cuh"
#include "simt.cuh"

namespace retro::nn::detail::decode {

using ll = long long;
constexpr int kSplitKeys = static_cast<int>(kAttentionDecodeSplitKeys);
constexpr int kLanesPerKey = kThreads / kSplitKeys;   // neighbouring threads of one warp per key
constexpr int kWarps = kThreads / 32;
constexpr int kMaxD = static_cast<int>(kAttentionDecodeMaxD);
constexpr int kChannelsPerLane = kMaxD / 32;   // a lane's channels c = lane + 32 u of the partial output
static_assert(kThreads % kSplitKeys == 0 && kLanesPerKey <= 32 && (kLanesPerKey & (kLanesPerKey - 1)) == 0,
              "a key's lanes lie in one warp, their count a power of two");
static_assert(kMaxD % 32 == 0 && kMaxD <= kThreads, "attention_decode's head dimension");

// splits of a cache of L positions; whether a key's quarter may be read as float4s (every quarter starts 16-byte
// aligned when D % 16 == 0 and the caches are)
RETRO_SIMT_HOST_DEVICE ll attention_decode_splits(ll L) { return (L + kSplitKeys - 1) / kSplitKeys; }
RETRO_SIMT_HOST_DEVICE bool attention_decode_vec4(ll D, const float* kcache) {
    return D % (4 * kLanesPerKey) == 0 && reinterpret_cast<std::uintptr_t>(kcache) % 16 == 0;
}

RETRO_SIMT_DEVICE void attention_decode_rows(float* __restrict__ out, float* part, const float* __restrict__ q,
                                                     const NnBackend::DecodeCache& cache,
                                                     const std::int64_t* __restrict__ pos,
                                                     const std::int64_t* __restrict__ seq, ll rows, ll H, ll D, ll S,
                                                     bool vec4) {
    RETRO_SIMT_STATIC_SHARED(float[kThreads], sh);         // block_reduce
    RETRO_SIMT_STATIC_SHARED(float[kMaxD], qs);            // the head's query
    RETRO_SIMT_STATIC_SHARED(float[kSplitKeys], ex);       // the split's exponentials
    RETRO_SIMT_STATIC_SHARED(float[kWarps][kMaxD], red);   // the warps' partial outputs
    RETRO_SIMT_STATIC_SHARED(bool, last);                  // this block combines its (row, head)
    const int t = simt::thread_x(), lane = t % 32, w = t / 32;
    const int key = t / kLanesPerKey, sub = t % kLanesPerKey;
    const ll HD = H * D, L = cache.L, W = D + 2;
    for (ll b = simt::block_x(); b < rows * H * S; b += simt::grid_x()) {
        const ll e = b / S, s = b % S, i = e / H, h = e % H, j0 = s * kSplitKeys, off = h * D;
        const ll p = pos[i], slot = seq[i];   // both loads in flight together, before the branch needs p
        if (p < 0 || p >= L) {   // a position outside the cache (the host checks; a graph replays positions from
            // memory): NaN out, written by split 0, and nothing else touched - no cache row past the slot's, no
            // counter left short of its splits for the next call
            if (s == 0)
                for (ll c = t; c < D; c += kThreads) out[e * D + c] = NAN;
            continue;
        }
        if (j0 > p) continue;   // past the row's last key (the same for the whole block)
        const int n = static_cast<int>(p + 1 - j0 < kSplitKeys ? p + 1 - j0 : kSplitKeys);
        float* K = cache.kcache + slot * L * HD + off;   // key j of this head: K[j * HD + c]
        float* V = cache.vcache + slot * L * HD + off;
        const std::uint8_t* mask = cache.key_mask ? cache.key_mask + slot * L : nullptr;
        const bool writes = cache.k_new && p / kSplitKeys == s;   // this split holds the new row
        {   // the split's key and value rows asked into L2 now: the values are read only after the scores' two block
            // reductions, which would otherwise wait a DRAM round trip more (a hint: no bit depends on it)
            const int lines = static_cast<int>((D + 31) / 32);   // 128-byte lines a row
            for (int l = t; l < 2 * n * lines; l += kThreads) {
                const int row = l / lines % n, part = l % lines;
                const float* base = l < n * lines ? K : V;
                simt::prefetch_l2(base + (j0 + row) * HD + 32 * part);
            }
        }
        for (ll c = t; c < D; c += kThreads) {
            if (writes) {
                K[p * HD + c] = cache.k_new[i * HD + off + c];
                V[p * HD + c] = cache.v_new[i * HD + off + c];
            }
            qs[c] = q[i * HD + off + c];
        }
        simt::sync_block();   // the new key and value, and the query, visible to the whole block

        // the scores: lane `sub` of key `key` sums its quarter of the channels, the butterfly adds the quarters
        // (every lane of the warp takes part; a lane past n or on a masked key adds a 0)
        const bool live = key < n, masked = live && mask && !mask[j0 + key];
        float a = 0;
        if (live && !masked) {
            const float* kr = K + (j0 + key) * HD;
            if (vec4) {
                const ll per = D / kLanesPerKey;
                for (ll c = sub * per; c < (sub + 1) * per; c += 4) {
                    float kv[4];
                    simt::load_float4(kv, kr + c);
                    a += qs[c] * kv[0] + qs[c + 1] * kv[1] + qs[c + 2] * kv[2] + qs[c + 3] * kv[3];
                }
            } else {
                for (ll c = sub; c < D; c += kLanesPerKey) a += qs[c] * kr[c];
            }
        }
        for (int o = 1; o < kLanesPerKey; o <<= 1) a += simt::shfl_xor(a, o);
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
        RETRO_SIMT_UNROLL_BY(4)
        for (int j = w; j < n; j += kWarps) {
            const float wj = ex[j];
            const float* vr = V + (j0 + j) * HD;
            RETRO_SIMT_UNROLL
            for (int u = 0; u < kChannelsPerLane; u++)
                if (lane + 32 * u < D) acc[u] += wj * vr[lane + 32 * u];
        }
        RETRO_SIMT_UNROLL
        for (int u = 0; u < kChannelsPerLane; u++)
            if (lane + 32 * u < D) red[w][lane + 32 * u] = acc[u];
        simt::sync_block();
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
        simt::thread_fence();
        simt::sync_block();
        const ll splits = p / kSplitKeys + 1;
        if (t == 0) last = simt::atomic_add_u32(cache.counters + e, 1u) == static_cast<std::uint32_t>(splits - 1);
        simt::sync_block();
        if (last) {
            simt::thread_fence();
            const float* pe = part + e * S * W;
            for (ll c = t; c < D; c += kThreads) {   // L2 loads (__ldcg): the other blocks' partials, not an L1 copy
                float M = -INFINITY;
                RETRO_SIMT_UNROLL_BY(8)
                for (ll k = 0; k < splits; k++) M = fmaxf(M, simt::load_cg(pe + k * W + D));
                float lsum = 0, o = 0;
                RETRO_SIMT_UNROLL_BY(8)
                for (ll k = 0; k < splits; k++) {
                    const float scale = expf(simt::load_cg(pe + k * W + D) - M);
                    lsum += simt::load_cg(pe + k * W + D + 1) * scale;
                    o += simt::load_cg(pe + k * W + c) * scale;
                }
                out[e * D + c] = o / lsum;
            }
            if (t == 0) cache.counters[e] = 0;   // every split of e has counted: ready for the next call
        }
        simt::sync_block();   // qs, ex, red and last are rewritten for the next (row, head, split)
    }
}


}  // namespace retro::nn::detail::decode
