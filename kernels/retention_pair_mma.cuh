// Retention's "pair" product on the tensor cores for bf16 operands: out_i (=|+=) scale Σ_j gamma_h^|i-j| (a_i·b_j) c_j
// over the j of i's C-row window with j <= i (REV: j >= i) — the parallel mode's whole product (C = T) and the
// chunkwise mode's intra-chunk part (RETENTION.md §1, §6; the CUDA-core pair_kernel of kernels/retention_common.cuh
// is its fp32 form and the fallback). Flash-style (kernels/mma_tiles.cuh): a block per 64 rows i of one (item, head),
// warp w rows [16w, 16w + 16); it walks the 64-row tiles of j the window and the direction allow, S = A_i B_j^T
// on mma.sync into registers, the decay gamma^|i-j| and the scale applied there (the causal mask and the window
// test only on the tiles that hold the diagonal or a window's edge), P rounded to bf16 and P C_j accumulated in fp32
// registers with C_j's B fragments by ldmatrix.trans from its rows as loaded. B_j and C_j come by cp.async into two
// stages: tile j + 1 loads while tile j is multiplied. No atomics: one block owns each output row, every sum in a
// fixed order. Blocks with the most tiles to walk start first (the forward's last rows, the reverse's first).
// Compiled by nvcc (kernels/retention_common.cuh's launch_pair takes it for bf16 at head sizes 64 and 128, operands
// 16-byte aligned) and by the host compiler over tests/simt_host.h (tests/test_retention_pair_host.cpp, against the
// pair in double).
#pragma once

#include <cstdint>
#include <type_traits>

#include "mma_tiles.cuh"

namespace retro::retention::pair_mma {

using namespace retro::mma_tiles;

constexpr int kMaxHeads = 128;   // retention_common.cuh's kMaxHeads

struct PairArgs {
    ll B, T, H;        // every operand is [B, T, H, D] bf16 (row stride H * D)
    ll C;              // window: i and j interact only within one C-row chunk (C >= T: the whole sequence)
    float scale;
    bool accumulate;   // out += instead of out =
};
struct PairDecays {   // log2(gamma) per head, by value
    float lg2[kMaxHeads];
};

// Shared memory: the block's rows of A (and, DUAL, of A2), then two stages of B_j's and C_j's rows, each
// [64][D + 8] bf16.
template <int DA, int DC>
constexpr int pair_stage_bytes() {
    return row_tile_bytes<DA>() + row_tile_bytes<DC>();
}
template <int DA, int DC, bool DUAL = false>
constexpr int pair_smem() {
    return row_tile_bytes<DA>() + (DUAL ? row_tile_bytes<DC>() : 0) + 2 * pair_stage_bytes<DA, DC>();
}

// Head sizes with an instantiated kernel.
RETRO_SIMT_HOST_DEVICE bool pair_mma_supported(long Da, long Dc) {
    return (Da == 64 || Da == 128) && (Dc == 64 || Dc == 128);
}

// Rows [r0, r0 + 64) of x [B, T, H, D] at (item b, head h) into tile[64][D + 8] by cp.async (zeros past T); complete
// after simt::async_wait_all.
template <int D>
RETRO_SIMT_DEVICE void load_rows_async(u16* tile, const u16* __restrict__ x, ll b, ll h, ll r0, const PairArgs& p) {
    constexpr int ld = row_ld<D>();
    for (int e = simt::thread_x(); e < kTile * D / 8; e += kThreads) {
        const int r = e / (D / 8), v = (e % (D / 8)) * 8;
        const ll t = r0 + r;
        const bool ok = t < p.T;
        simt::copy16_async(tile + r * ld + v, x + (ok ? ((b * p.T + t) * p.H + h) * D + v : 0), ok);
    }
}

// A warp's 16 x D result (acc: D / 8 C fragments) to this lane's two rows of out [B, T, H, D] (rows past T skipped;
// += the old value with p.accumulate).
template <int D>
RETRO_SIMT_DEVICE void store_pair_rows(u16* out, const float (&acc)[D / 8][4], ll item, ll h, const ll (&rows)[2],
                                  const PairArgs& p, int lane) {
    const int t = lane % 4;
RETRO_SIMT_UNROLL
    for (int r = 0; r < 2; ++r) {
        if (rows[r] >= p.T) continue;
        u16* o = out + ((item * p.T + rows[r]) * p.H + h) * D;
RETRO_SIMT_UNROLL
        for (int u = 0; u < D / 8; ++u) {
            const int col = u * 8 + 2 * t;
            float v0 = acc[u][2 * r], v1 = acc[u][2 * r + 1];
            if (p.accumulate) {
                v0 += simt::bf16_value(o[col]);
                v1 += simt::bf16_value(o[col + 1]);
            }
            *reinterpret_cast<u32*>(o + col) = simt::pack_bf16x2(v0, v1);
        }
    }
}

// out, a, b, c as above (bf16 bits, a, b, c 16-byte aligned); grid (ceil(T / 64), B * H), kThreads threads,
// pair_smem<DA, DC, DUAL>() bytes.
// DUAL: also out2 [B, T, H, DA] = the pair of (a2 [B, T, H, DC], c, b) in the same direction, from the same loads of
// b's and c's rows — the backward's dk = pair(v, dO, q) and dv = pair(k, q, dO) (reverse), which read the same q and
// dO tiles.
template <int DA, int DC, bool REV, bool DUAL = false>
RETRO_SIMT_KERNEL(kThreads)
retention_pair_mma(u16* out, const u16* __restrict__ a, const u16* __restrict__ b, const u16* __restrict__ c,
                   PairArgs p, PairDecays g, const u16* __restrict__ a2 = nullptr, u16* out2 = nullptr) {
    constexpr int lda = row_ld<DA>(), ldc = row_ld<DC>(), stage_elems = pair_stage_bytes<DA, DC>() / 2;
    u16* const As = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* const A2s = As + kTile * lda;   // DUAL: [64][DC + 8]
    u16* const stages = A2s + (DUAL ? kTile * ldc : 0);

    const ll tiles = (p.T + kTile - 1) / kTile;
    const ll bh = simt::block_y(), item = bh / p.H, h = bh % p.H;
    const ll it = REV ? simt::block_x() : tiles - 1 - simt::block_x();   // the longest walks first
    const ll i0 = it * kTile;
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, t = lane % 4;
    const ll rows[2] = {i0 + warp * 16 + lane / 4, i0 + warp * 16 + lane / 4 + 8};   // this lane's two rows i
    const float lg2 = g.lg2[h];

    // the j tiles: forward from the tile of row i0's window start to i0's own; REV from i0's own to the tile of the
    // window end of the block's last row
    ll jt_first, jt_last;
    if (!REV) {
        jt_first = (i0 / p.C) * p.C / kTile;
        jt_last = it;
    } else {
        const ll last_row = (i0 + kTile < p.T ? i0 + kTile : p.T) - 1;
        const ll window_end = (last_row / p.C + 1) * p.C;   // exclusive
        jt_first = it;
        jt_last = ((window_end < p.T ? window_end : p.T) - 1) / kTile;
    }
    auto load_stage = [&](u16* stage, ll jt) {
        load_rows_async<DA>(stage, b, item, h, jt * kTile, p);
        load_rows_async<DC>(stage + kTile * lda, c, item, h, jt * kTile, p);
    };
    load_rows_async<DA>(As, a, item, h, i0, p);
    if constexpr (DUAL) load_rows_async<DC>(A2s, a2, item, h, i0, p);
    load_stage(stages, jt_first);

    float acc[DC / 8][4], acc2[DUAL ? DA / 8 : 1][4];
RETRO_SIMT_UNROLL
    for (int e = 0; e < 4; ++e) {
RETRO_SIMT_UNROLL
        for (int u = 0; u < DC / 8; ++u) acc[u][e] = 0.0f;
RETRO_SIMT_UNROLL
        for (int u = 0; u < (DUAL ? DA / 8 : 1); ++u) acc2[u][e] = 0.0f;
    }

    // one j tile from stage s (compile-time, so that the tiles' addresses are immediates)
    auto step = [&](auto stage, ll jt) {
        constexpr int s = decltype(stage)::value;
        simt::async_wait_all();
        simt::sync_block();   // tile jt is everyone's; the other stage's readers (tile jt - 1) are done
        if (jt < jt_last) load_stage(stages + (s ^ 1) * stage_elems, jt + 1);
        const u16* Bs = stages + s * stage_elems;
        const u16* Cs = Bs + kTile * lda;
        const ll j0 = jt * kTile;
        // i - j = i_minus_j + 8 (e >= 2) - (e & 1) - 8 n8 for this lane's element e of fragment n8
        const int i_minus_j = static_cast<int>(i0 - j0) + warp * 16 + lane / 4 - 2 * t;
        const bool diagonal = jt == it;   // the causal mask
        const ll lo = i0 < j0 ? i0 : j0, hi = (i0 > j0 ? i0 : j0) + kTile - 1;
        const bool edge = p.C < p.T && lo / p.C != hi / p.C;   // the window test (C >= T: one window)
        // P = bf16(scale gamma^|i-j| S) on the kept side, as the A fragments' bf16 pairs
        auto masked_p = [&](const float (&sc)[8][4], u32 (&pk)[8][2]) {
RETRO_SIMT_UNROLL
            for (int n8 = 0; n8 < 8; ++n8) {
                float x[4];
RETRO_SIMT_UNROLL
                for (int e = 0; e < 4; ++e) {
                    const int dist = i_minus_j + (e >= 2 ? 8 : 0) - (e & 1) - n8 * 8;
                    bool keep = !diagonal || (REV ? dist <= 0 : dist >= 0);
                    if (edge) keep = keep && rows[e / 2] / p.C == (j0 + n8 * 8 + 2 * t + (e & 1)) / p.C;
                    // the decay computed for every entry, then selected: under the ternary ptxas put each exp in a
                    // branch of its own (nvdisasm, sm_90: 260 small blocks holding one MUFU each); the kept entries'
                    // floats are the same (a masked one's factor, possibly inf, is never multiplied in)
                    const float w = simt::exp2_fast(lg2 * static_cast<float>(REV ? -dist : dist));
                    x[e] = keep ? sc[n8][e] * p.scale * w : 0.0f;
                }
                pk[n8][0] = simt::pack_bf16x2(x[0], x[1]);
                pk[n8][1] = simt::pack_bf16x2(x[2], x[3]);
            }
        };
        {
            float sc[8][4];
            rows_times_rows_t<DA>(sc, As, warp * 16, Bs, lane);   // a_i · b_j (rows past T are zeros: so is S)
            u32 pk[8][2];
            masked_p(sc, pk);
            accumulate_p_rows<DC>(acc, pk, Cs, ldc, lane);   // += P c_j
        }
        if constexpr (DUAL) {
            float sc[8][4];
            rows_times_rows_t<DC>(sc, A2s, warp * 16, Cs, lane);   // a2_i · c_j
            u32 pk[8][2];
            masked_p(sc, pk);
            accumulate_p_rows<DA>(acc2, pk, Bs, lda, lane);   // += P2 b_j
        }
    };
    for (ll jt = jt_first; jt <= jt_last; jt += 2) {
        step(std::integral_constant<int, 0>{}, jt);
        if (jt < jt_last) step(std::integral_constant<int, 1>{}, jt + 1);
    }
    store_pair_rows<DC>(out, acc, item, h, rows, p, lane);
    if constexpr (DUAL) store_pair_rows<DA>(out2, acc2, item, h, rows, p, lane);
}

}  // namespace retro::retention::pair_mma
