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

// Blocks an SM that the registers should allow (__launch_bounds__' second argument): as many as the shared memory
// lets share an H100's SM (228 KB, 1 KB reserved a block). Left to itself, ptxas took 150 registers at
// Da = Dc = 64 (three blocks where the shared memory, 46 KB, allows four); bounded, 127 and no spill (sm_90, nvcc
// 13.0). The dual forms need ~255 registers: 0 leaves them unbounded — any bound, even 1 or 2, made ptxas spill
// 20 bytes at (64, 128), as it did the other forms' allocation (the bound is not ptxas's default at 1).
template <int DA, int DC, bool DUAL>
constexpr int pair_min_blocks() {
    if (DUAL) return 0;
    const int by_smem = 233472 / (pair_smem<DA, DC>() + 1024);
    return by_smem < 1 ? 1 : by_smem;
}

// Head sizes with an instantiated kernel.
RETRO_SIMT_HOST_DEVICE bool pair_mma_supported(long Da, long Dc) {
    return (Da == 64 || Da == 128) && (Dc == 64 || Dc == 128);
}

// Rows [r0, r0 + 64) of x [B, T, H, D] at (item b, head h) into tile[64][D + 8] by cp.async (zeros past T); complete
// after simt::async_wait_all. A thread copies the same 16 bytes of every (kThreads / (D / 8))-th row: one address
// computed, then a stride of H D elements a row (the per-copy 64-bit index arithmetic was a third of a step's
// instructions: nvdisasm, session 28).
// WHOLE_FAST: a tile whose rows all exist takes its copies without a test each (not in the dual form, where ptxas
// then spilled 24 bytes at Da = Dc = 128, sm_90).
template <int D, bool WHOLE_FAST = true>
RETRO_SIMT_DEVICE void load_rows_async(u16* tile, const u16* __restrict__ x, ll b, ll h, ll r0, const PairArgs& p) {
    constexpr int ld = row_ld<D>(), per_row = D / 8, rows_per_pass = kThreads / per_row;
    static_assert(kThreads % per_row == 0 && kTile % rows_per_pass == 0, "whole rows per pass");
    const int r = simt::thread_x() / per_row, v = (simt::thread_x() % per_row) * 8;
    const ll row_stride = p.H * D;
    const ll first = ((b * p.T + r0 + r) * p.H + h) * D + v;   // element offset of this thread's first row
    if (WHOLE_FAST && r0 + kTile <= p.T) {   // every row of the tile exists (the block's threads alike)
RETRO_SIMT_UNROLL
        for (int k = 0; k < kTile / rows_per_pass; ++k)
            simt::copy16_async(tile + (r + k * rows_per_pass) * ld + v, x + first + k * rows_per_pass * row_stride, true);
    } else {
RETRO_SIMT_UNROLL
        for (int k = 0; k < kTile / rows_per_pass; ++k) {
            const bool ok = r0 + r + k * rows_per_pass < p.T;
            simt::copy16_async(tile + (r + k * rows_per_pass) * ld + v, x + (ok ? first + k * rows_per_pass * row_stride : 0), ok);
        }
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
RETRO_SIMT_KERNEL_MIN_BLOCKS(kThreads, (pair_min_blocks<DA, DC, DUAL>()))
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
    // Windows (C < T): a j tile needs the per-entry window test when rows [i0, i0 + 64) and it are not all in one
    // window, i.e. when [min(i0, j0), max(i0, j0) + 63] crosses a multiple of C: forward (j0 <= i0) when j0 is before
    // the window of row i0 + 63, REV (j0 >= i0) when j0 + 63 reaches past the window of row i0. The window of each
    // of this lane's rows as [lo, lo + C): the divisions once, not an entry.
    const bool windows = p.C < p.T;
    const ll edge_bound = REV ? (i0 / p.C + 1) * p.C : ((i0 + kTile - 1) / p.C) * p.C;
    const ll window_lo[2] = {rows[0] / p.C * p.C, rows[1] / p.C * p.C};

    auto load_stage = [&](u16* stage, ll jt) {
        load_rows_async<DA, !DUAL>(stage, b, item, h, jt * kTile, p);
        load_rows_async<DC, !DUAL>(stage + kTile * lda, c, item, h, jt * kTile, p);
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

    // One j tile's products from the stage at Bs (C_j's rows after B_j's). MASKED (compile-time): the tile holds
    // the diagonal or a window's edge, and each entry is tested; otherwise every entry is kept and P's computation
    // is one straight block (no test, no branch).
    auto step = [&](auto masked_tag, const u16* Bs, ll j0, bool diagonal, bool edge) {
        constexpr bool MASKED = decltype(masked_tag)::value;
        const u16* Cs = Bs + kTile * lda;
        // i - j = i_minus_j + 8 (e >= 2) - (e & 1) - 8 n8 for this lane's element e of fragment n8; as a float,
        // added to the small integer constant exactly (|i - j| < 2^24), so the decay's argument is the same float a
        // conversion of the integer gives, without a conversion an entry
        const int i_minus_j = static_cast<int>(i0 - j0) + warp * 16 + lane / 4 - 2 * t;
        const float f_i_minus_j = static_cast<float>(i_minus_j);
        int win_lo[2], win_hi[2];   // MASKED: this lane's rows' windows relative to j0 (clamped to the tile)
        if constexpr (MASKED) {
RETRO_SIMT_UNROLL
            for (int r = 0; r < 2; ++r) {
                const ll lo = window_lo[r] - j0, hi = lo + p.C;
                win_lo[r] = !edge ? 0 : static_cast<int>(lo < 0 ? 0 : lo > kTile ? kTile : lo);
                win_hi[r] = !edge ? kTile : static_cast<int>(hi < 0 ? 0 : hi > kTile ? kTile : hi);
            }
        }
        // P = bf16(scale gamma^|i-j| S) on the kept side, as the A fragments' bf16 pairs
        auto decayed_p = [&](const float (&sc)[8][4], u32 (&pk)[8][2]) {
RETRO_SIMT_UNROLL
            for (int n8 = 0; n8 < 8; ++n8) {
                float x[4];
RETRO_SIMT_UNROLL
                for (int e = 0; e < 4; ++e) {
                    const int dist_offset = (e >= 2 ? 8 : 0) - (e & 1) - n8 * 8;
                    const float dist = f_i_minus_j + static_cast<float>(dist_offset);
                    // (the dual form's exp with subnormal results: with the flushing one ptxas spilled 44 bytes
                    // at Da = Dc = 128, sm_90)
                    const float arg = lg2 * (REV ? -dist : dist);
                    const float w = DUAL ? simt::exp2_subnormal(arg) : simt::exp2_fast(arg);
                    if constexpr (MASKED) {
                        // the decay computed for every entry, then selected: a ternary around the exp put each in a
                        // branch of its own (nvdisasm, sm_90); a masked entry's factor (possibly inf) is never used
                        const int d = i_minus_j + dist_offset, jr = n8 * 8 + 2 * t + (e & 1);   // j - j0
                        const bool keep = (!diagonal || (REV ? d <= 0 : d >= 0)) && jr >= win_lo[e / 2] &&
                                          jr < win_hi[e / 2];
                        x[e] = keep ? sc[n8][e] * p.scale * w : 0.0f;
                    } else {
                        x[e] = sc[n8][e] * p.scale * w;
                    }
                }
                pk[n8][0] = simt::pack_bf16x2(x[0], x[1]);
                pk[n8][1] = simt::pack_bf16x2(x[2], x[3]);
            }
        };
        {
            float sc[8][4];
            rows_times_rows_t_x4<DA>(sc, As, warp * 16, Bs, lane);   // a_i · b_j (rows past T are zeros: so is S)
            u32 pk[8][2];
            decayed_p(sc, pk);
            accumulate_p_rows<DC>(acc, pk, Cs, ldc, lane);   // += P c_j
        }
        if constexpr (DUAL) {
            float sc[8][4];
            rows_times_rows_t_x4<DC>(sc, A2s, warp * 16, Cs, lane);   // a2_i · c_j
            u32 pk[8][2];
            decayed_p(sc, pk);
            accumulate_p_rows<DA>(acc2, pk, Bs, lda, lane);   // += P2 b_j
        }
    };
    for (ll jt = jt_first; jt <= jt_last; ++jt) {
        const int s = static_cast<int>((jt - jt_first) & 1);
        simt::async_wait_all();
        simt::sync_block();   // tile jt is everyone's; the other stage's readers (tile jt - 1) are done
        if (jt < jt_last) load_stage(stages + (s ^ 1) * stage_elems, jt + 1);
        const u16* Bs = stages + s * stage_elems;
        const ll j0 = jt * kTile;
        const bool diagonal = jt == it;   // the causal mask
        const bool edge = windows && (REV ? j0 + kTile - 1 >= edge_bound : j0 < edge_bound);
        if (diagonal || edge)
            step(std::true_type{}, Bs, j0, diagonal, edge);
        else
            step(std::false_type{}, Bs, j0, false, false);
    }
    store_pair_rows<DC>(out, acc, item, h, rows, p, lane);
    if constexpr (DUAL) store_pair_rows<DA>(out2, acc2, item, h, rows, p, lane);
}

}  // namespace retro::retention::pair_mma
