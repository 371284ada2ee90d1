// The CUDA NnBackend's next-token draw (NnBackend::sample_rows; the reference is nn/sampling.h's sample_row), written
// against kernels/simt.cuh so that tests/test_nn_sample_host.cpp runs it on the host through the block emulator.
// One block a row of logits z[V]; the row's id is found by integer arithmetic only, so the result is the same on every
// run and under any thread schedule:
//   - rank order is one 64-bit key an id, rank_of(z, id) = (z's order-preserving bits, descending; -0 as +0) << 32 |
//     id: smaller is earlier, ties by lower id, as the reference's sorts;
//   - greedy: the smallest key (a block-wide min);
//   - the weights exp(z / T - max z / T) (double, as the reference's) become fixed point, q = round(w * 2^S) with
//     S = 63 - ceil(log2 V), so that every sum of them fits 64 bits and integer atomics add them in any order (a
//     warp's lanes that share a bucket summed first: warp_aggregated_add);
//   - "the first id, in rank order within a bound key, whose inclusive prefix of weights exceeds a target" (descend)
//     is a radix descent over the key's four bytes (a 256-bucket histogram of weights a pass, its scan picking the
//     bucket) and then, among the ids of that one z, a scan in id order;
//   - top-k: descend with weight 1 and target k - 1 gives the last kept id (the bound); top-p: the kept mass Q,
//     P = ceil(p Q), descend to target P - 1 (the reference keeps id i while the mass ranked before it is < p Q); the
//     draw: target floor(u Q_kept), by descend where top-k or top-p is on and by the scan in id order otherwise (the
//     reference walks the kept ids in rank order, or all ids in id order).
// Against the reference: greedy the same id; a draw the same id unless u, or p Q, lies within the fixed point's
// rounding of a boundary between two ids' cumulative weights (at most V^2 2^-64 of the total: 6e-11 at V = 32,000; a
// typical row's roundings cancel to ~1e-13) or within a unit in the last place of exp, which the GPU and libm may round
// differently. A row with a logit that is not finite (NaN, +-inf) among its first V gives -1, as the host's
// next_tokens (generate/next_tokens.h) does before it calls the reference: no draw over it means anything. Passes over the row: 1 (greedy), 3 (T
// only), up to 17 (top-k and top-p); each id's weight is computed once into the caller's scratch (a double exp: ~6 µs
// a pass of V = 32,000 on an H100's FP64 units) and read by the later passes.
#pragma once

#include <cmath>
#include <cstdint>

#include "simt.cuh"

namespace retro::nn::sample {

using ll = long long;
using u64 = std::uint64_t;

constexpr int kThreads = 1024;   // a block a row; at least 256 (the histogram's scan uses a thread a bucket)

struct Params {   // nn::SamplingParams as the kernel takes it
    double temperature = 1.0;
    ll top_k = 0;
    double top_p = 1.0;
    int greedy = 0;
};

template <int THREADS>
constexpr std::size_t smem_bytes() {
    return (256 + THREADS + 4) * sizeof(u64);   // histogram, scan, four result slots
}

// An id's place in rank order: z descending (-0 sorting with +0), then id ascending; smaller is earlier. A NaN ranks
// last (the reference's comparisons never pick one).
RETRO_SIMT_DEVICE u64 rank_of(float z, ll id) {
    if (z != z) return (u64{0xffffffffu} << 32) | static_cast<u64>(id);
    std::uint32_t b = simt::float_bits(z == 0.0f ? 0.0f : z);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);   // ascending floats -> ascending unsigned
    return (static_cast<u64>(~b) << 32) | static_cast<u64>(id);
}

struct Shared {
    u64* hist;   // [256]
    u64* scan;   // [THREADS]
    u64* slot;   // [4]
};

// Block-wide min or sum of one value a thread (THREADS a power of two), returned to every thread.
template <int THREADS, bool MIN>
RETRO_SIMT_DEVICE u64 block_reduce(u64 v, const Shared& sh) {
    const int t = simt::thread_x();
    sh.scan[t] = v;
    simt::sync_block();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (t < s) {
            const u64 o = sh.scan[t + s];
            sh.scan[t] = MIN ? (o < sh.scan[t] ? o : sh.scan[t]) : sh.scan[t] + o;
        }
        simt::sync_block();
    }
    const u64 r = sh.scan[0];
    simt::sync_block();
    return r;
}

struct Pick {
    u64 rank;     // rank_of the id found (its low 32 bits are the id)
    u64 prefix;   // the inclusive prefix of weights there, in the walk's order
};

// Among the ids with key (rank >> 32) equal to `key` and rank <= bound (every id where ALL), walked in id order: the
// first whose inclusive prefix of weights exceeds target (< their total: the caller's guarantee); `before` is the
// weight walked before them, added to the prefix returned. Warp w takes ids [w per, (w + 1) per) (per a multiple of
// 32), its lanes 32 consecutive ids a round (coalesced loads): the warps' totals, their exclusive scan, then the one
// warp whose share holds the crossing walks its rounds with a scan across its lanes.
template <int THREADS, bool ALL, typename Weight>
RETRO_SIMT_DEVICE Pick scan_ids(const float* z, ll V, std::uint32_t key, u64 bound, u64 target, u64 before,
                                const Weight& weight, const Shared& sh) {
    constexpr int kWarpsN = THREADS / 32;
    const int t = simt::thread_x(), warp = t / 32, lane = t % 32;
    const ll per = ((V + kWarpsN - 1) / kWarpsN + 31) / 32 * 32;
    const ll lo = warp * per < V ? warp * per : V, hi = lo + per < V ? lo + per : V;
    const auto weight_of = [&](ll i) -> u64 {   // 0 past the warp's share and for ids not walked
        if (i >= hi) return 0;
        const u64 r = rank_of(z[i], i);
        return (ALL || (static_cast<std::uint32_t>(r >> 32) == key && r <= bound)) ? weight(i) : u64{0};
    };
    u64 local = 0;
    for (ll i = lo + lane; i < hi; i += 32) local += weight_of(i);
    local = simt::warp_sum_u64(local);
    if (lane == 0) sh.scan[warp] = local;
    simt::sync_block();
    u64 excl = 0;   // the warps before this one (at most 32 adds, each thread its own)
    for (int w = 0; w < warp; ++w) excl += sh.scan[w];
    const u64 total = sh.scan[warp];
    if (excl <= target && target < excl + total) {   // one warp, all its lanes
        u64 acc = excl;
        for (ll i0 = lo; i0 < hi; i0 += 32) {
            u64 incl = weight_of(i0 + lane);
            for (int off = 1; off < 32; off <<= 1) {   // inclusive scan across the lanes (Hillis-Steele)
                const u64 o = simt::shfl_idx_u64(incl, lane >= off ? lane - off : lane);
                if (lane >= off) incl += o;
            }
            const std::uint32_t over = simt::ballot(acc + incl > target);
            if (over) {
                if (lane == simt::lowest_lane(over)) {
                    sh.slot[2] = rank_of(z[i0 + lane], i0 + lane);
                    sh.slot[3] = before + acc + incl;
                }
                break;
            }
            acc += simt::shfl_idx_u64(incl, 31);
        }
    }
    simt::sync_block();
    const Pick p{sh.slot[2], sh.slot[3]};
    simt::sync_block();
    return p;
}

// hist[bucket] += value for each lane that has one, a warp at a time: the lanes that share the first two buckets met
// are summed first and added by one lane (the first pass's buckets are the logits' sign and exponent, so most of a
// warp shares one: 32 lanes' 64-bit atomics on one word would spin in compare-and-swap loops), the rest one by one.
// Every lane of the warp calls it (the trip counts of the callers' loops are the block's, not the thread's).
RETRO_SIMT_DEVICE void warp_aggregated_add(u64* hist, bool has, std::uint32_t bucket, u64 value) {
    const int lane = simt::thread_x() % 32;
    std::uint32_t pending = simt::ballot(has);
    for (int round = 0; round < 2 && pending; ++round) {   // pending is the warp's, so every lane takes each round
        const int leader = simt::lowest_lane(pending);
        const std::uint32_t shared_bucket = simt::shfl_idx_u32(bucket, leader);
        const bool mine = ((pending >> lane) & 1u) && bucket == shared_bucket;
        const u64 sum = simt::warp_sum_u64(mine ? value : 0);
        if (lane == leader) simt::atomic_add(&hist[shared_bucket], sum);
        pending &= ~simt::ballot(mine);
    }
    if ((pending >> lane) & 1u) simt::atomic_add(&hist[bucket], value);
}

// The first id in rank order among rank <= bound whose inclusive prefix of weights exceeds target (< the total
// weight there): the key's bytes from the highest, a histogram of weights over the 256 values of the next byte among
// the ids that match the bytes chosen so far, the bucket where the prefix crosses; then scan_ids among that key's ids.
template <int THREADS, typename Weight>
RETRO_SIMT_DEVICE Pick descend(const float* z, ll V, u64 bound, u64 target, const Weight& weight, const Shared& sh) {
    const int t = simt::thread_x();
    const u64 target0 = target;
    std::uint32_t key = 0;   // the bytes chosen so far
    for (int shift = 24; shift >= 0; shift -= 8) {
        if (t < 256) sh.hist[t] = 0;
        simt::sync_block();
        for (ll i0 = 0; i0 < V; i0 += THREADS) {   // the block's trip count: warp_aggregated_add is collective
            const ll i = i0 + t;
            bool has = false;
            std::uint32_t bucket = 0;
            u64 w = 0;
            if (i < V) {
                const u64 r = rank_of(z[i], i);
                const auto k = static_cast<std::uint32_t>(r >> 32);
                has = r <= bound && (shift == 24 || (k >> (shift + 8)) == (key >> (shift + 8)));
                bucket = (k >> shift) & 255u;
                if (has) w = weight(i);
            }
            warp_aggregated_add(sh.hist, has, bucket, w);
        }
        simt::sync_block();
        for (int off = 1; off < 256; off <<= 1) {   // inclusive scan of the 256 buckets
            const u64 add = (t < 256 && t >= off) ? sh.hist[t - off] : 0;
            simt::sync_block();
            if (t < 256) sh.hist[t] += add;
            simt::sync_block();
        }
        if (t < 256) {
            const u64 excl = t ? sh.hist[t - 1] : 0;
            if (excl <= target && target < sh.hist[t]) {   // one bucket: the scan is monotone, target < its last
                sh.slot[0] = static_cast<u64>(t);
                sh.slot[1] = target - excl;
            }
        }
        simt::sync_block();
        key |= static_cast<std::uint32_t>(sh.slot[0]) << shift;
        target = sh.slot[1];
        simt::sync_block();
    }
    return scan_ids<THREADS, false>(z, V, key, bound, target, target0 - target, weight, sh);
}

RETRO_SIMT_DEVICE int ceil_log2(ll v) {
    int s = 0;
    while ((ll{1} << s) < v) s++;
    return s;
}

// ids[b] = the token drawn from the first V columns of logits row rows[b] (rows ld floats apart; one block a row; u[b]
// unread when greedy); weights: [rows, V] scratch (unused when greedy).
template <int THREADS>
RETRO_SIMT_KERNEL(THREADS) sample_rows_kernel(std::int32_t* ids, const float* logits, const ll* rows, ll V, ll ld, Params p,
                                        const double* u, u64* weights) {
    static_assert(THREADS >= 256 && (THREADS & (THREADS - 1)) == 0, "a power of two, at least a thread a bucket");
    // a no-op under the plain launch this kernel has today; should it be launched as a programmatic dependent of the
    // fused decode step (which signals launch_dependents before its last op, the logits GEMV), this wait keeps it from
    // reading logits not yet written (a helper's review, session 55)
    simt::grid_dependency_wait();
    auto* base = reinterpret_cast<u64*>(simt::dynamic_smem());
    const Shared sh{base, base + 256, base + 256 + THREADS};
    const ll b = simt::block_x();
    const float* z = logits + rows[b] * ld;   // (its first V columns: the ids drawn from)
    const int t = simt::thread_x();

    // a logit that is not finite (NaN, +-inf: damaged weights, a diverged run) ranks as key 0, which no finite logit
    // has (+inf's would be 0x007fffff << 32 at the smallest): the min below then says so at no extra pass, and the row
    // gives -1, as the host's next_tokens does (generate/next_tokens.h: the caller names the weights)
    u64 best = ~u64{0};
    for (ll i = t; i < V; i += THREADS) {
        const float x = z[i];
        const bool finite = (simt::float_bits(x) & 0x7f800000u) != 0x7f800000u;   // exponent all ones: NaN or +-inf
        const u64 r = finite ? rank_of(x, i) : u64{0};
        best = r < best ? r : best;
    }
    best = block_reduce<THREADS, true>(best, sh);
    if (best == 0) {
        if (t == 0) ids[b] = -1;
        return;
    }
    const auto top = static_cast<std::int32_t>(best & 0xffffffffu);
    if (p.greedy) {
        if (t == 0) ids[b] = top;
        return;
    }
    // the reference's weights (nn/sampling.cpp: exp(z / T - mx), mx = max z / T) in fixed point, rounded to nearest
    // (a row's errors then cancel rather than pile up: ~1e-13 of the total at V = 8,000 against 7e-12 truncated)
    const double T = p.temperature, mx = static_cast<double>(z[top]) / T;
    const double scale = ::ldexp(1.0, 63 - ceil_log2(V));
    const auto fixed_weight = [&](float x) -> u64 {
        const double w = ::exp(static_cast<double>(x) / T - mx);
        return w > 0 ? static_cast<u64>(w * scale + 0.5) : u64{0};   // w <= 1: at most 2^S (V of them: 2^63); NaN: 0
    };
    u64* q = weights + b * V;   // the row's weights, computed once (a double exp an id) and read by every later pass
    const auto mass = [&](ll i) -> u64 { return q[i]; };
    const auto one = [](ll) -> u64 { return 1; };

    const bool top_k = p.top_k > 0 && p.top_k < V, top_p = p.top_p < 1;
    u64 bound = ~u64{0};
    if (top_k) bound = descend<THREADS>(z, V, bound, static_cast<u64>(p.top_k - 1), one, sh).rank;
    u64 local = 0;
    for (ll i = t; i < V; i += THREADS) {
        q[i] = fixed_weight(z[i]);
        if (rank_of(z[i], i) <= bound) local += q[i];
    }
    u64 kept = block_reduce<THREADS, false>(local, sh);   // its barriers also make q the block's
    // (kept > 0: the top id's weight is exp(0) = 1, its fixed point 2^S, for the finite row every row here is)
    if (top_p) {
        const double want = ::ceil(p.top_p * static_cast<double>(kept));
        u64 P = want < 1 ? u64{1} : static_cast<u64>(want);
        if (P > kept) P = kept;
        const Pick cut = descend<THREADS>(z, V, bound, P - 1, mass, sh);
        bound = cut.rank;
        kept = cut.prefix;
    }
    const double d = ::floor(u[b] * static_cast<double>(kept));   // u in [0, 1): d < kept <= 2^63
    u64 target = d > 0 ? static_cast<u64>(d) : u64{0};
    if (target > kept - 1) target = kept - 1;
    const Pick draw = (top_k || top_p) ? descend<THREADS>(z, V, bound, target, mass, sh)
                                       : scan_ids<THREADS, true>(z, V, 0, bound, target, 0, mass, sh);
    if (t == 0) ids[b] = static_cast<std::int32_t>(draw.rank & 0xffffffffu);
}

}  // namespace retro::nn::sample
