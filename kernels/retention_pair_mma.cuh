// Retention's "pair" product on the tensor cores for bf16 operands: out_i (=|+=) scale Σ_j gamma_h^|i-j| (a_i·b_j) c_j
// over the j of i's C-row window with j <= i (REV: j >= i) — the parallel mode's whole product (C = T) and the
// chunkwise mode's intra-chunk part (RETENTION.md §1, §6; the CUDA-core pair_kernel of kernels/retention_common.cuh
// is its fp32 form and the fallback). Flash-style (kernels/mma_tiles.cuh): a block per 64 rows i of one (item, head),
// warp w rows [16w, 16w + 16); it walks the 64-row tiles of j the window and the direction allow, S = A_i B_j^T
// on mma.sync into registers, the decay mask gamma^|i-j| and the scale applied there, P rounded to bf16 and P C_j
// accumulated in fp32 registers; nothing of a 64 x 64 tile goes through shared memory. No atomics: one block owns
// each output row, every sum in a fixed order.
// Compiled by nvcc (kernels/retention_common.cuh's launch_pair takes it for bf16 at head sizes 64 and 128) and by
// the host compiler over tests/simt_host.h (tests/test_retention_pair_host.cpp, against the pair in double).
#pragma once

#include <cstdint>

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

// The kernel's dynamic shared memory (bytes): A and B row tiles of DA, C transposed [DC][64 + 8].
template <int DA, int DC>
constexpr int pair_smem() {
    return 2 * row_tile_bytes<DA>() + t_tile_bytes<DC>();
}

// Head sizes with an instantiated kernel.
RETRO_SIMT_HOST_DEVICE bool pair_mma_supported(long Da, long Dc) {
    return (Da == 64 || Da == 128) && (Dc == 64 || Dc == 128);
}

// Row t of operand x [B, T, H, D] at (item b, head h).
template <int D>
RETRO_SIMT_DEVICE const u16* op_row(const u16* x, ll b, ll h, ll t, const PairArgs& p) {
    return x + ((b * p.T + t) * p.H + h) * D;
}

// Rows [r0, r0 + 64) of x at (b, h) as tile[64][D + 8] (bf16 bits copied; zero past T).
template <int D>
RETRO_SIMT_DEVICE void load_op_rows(u16* tile, const u16* __restrict__ x, ll b, ll h, ll r0, const PairArgs& p) {
    constexpr int ld = row_ld<D>();
    u32* t32 = reinterpret_cast<u32*>(tile);
    for (int e = simt::thread_x(); e < kTile * D / 2; e += kThreads) {
        const int r = e / (D / 2), c = 2 * (e % (D / 2));
        const ll t = r0 + r;
        t32[(r * ld + c) / 2] = t < p.T ? *reinterpret_cast<const u32*>(op_row<D>(x, b, h, t, p) + c) : 0u;
    }
}

// The same rows transposed: tile[c][r] (D rows of stride 64 + 8).
template <int D>
RETRO_SIMT_DEVICE void load_op_rows_transposed(u16* tile, const u16* __restrict__ x, ll b, ll h, ll r0,
                                               const PairArgs& p) {
    u32* t32 = reinterpret_cast<u32*>(tile);
    for (int e = simt::thread_x(); e < D * kTile / 2; e += kThreads) {
        const int c = e % D, r = 2 * (e / D);   // consecutive threads read consecutive columns of two rows
        const ll t = r0 + r;
        const u32 v0 = t < p.T ? op_row<D>(x, b, h, t, p)[c] : 0u;
        const u32 v1 = t + 1 < p.T ? op_row<D>(x, b, h, t + 1, p)[c] : 0u;
        t32[(c * kTLd + r) / 2] = v0 | (v1 << 16);
    }
}

// out, a, b, c as above (bf16 bits); grid (ceil(T / 64), B * H), kThreads threads, pair_smem<DA, DC>() bytes.
template <int DA, int DC, bool REV>
RETRO_SIMT_KERNEL(kThreads)
retention_pair_mma(u16* out, const u16* __restrict__ a, const u16* __restrict__ b, const u16* __restrict__ c,
                   PairArgs p, PairDecays g) {
    u16* As = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* Bs = As + kTile * row_ld<DA>();
    u16* Ct = Bs + kTile * row_ld<DA>();   // [DC][kTLd]

    const ll bh = simt::block_y(), item = bh / p.H, h = bh % p.H, i0 = simt::block_x() * kTile;
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, t = lane % 4;
    const ll rows[2] = {i0 + warp * 16 + lane / 4, i0 + warp * 16 + lane / 4 + 8};   // this lane's two rows i
    const float lg2 = g.lg2[h];

    load_op_rows<DA>(As, a, item, h, i0, p);
    float acc[DC / 8][4];
RETRO_SIMT_UNROLL
    for (int u = 0; u < DC / 8; ++u)
RETRO_SIMT_UNROLL
        for (int e = 0; e < 4; ++e) acc[u][e] = 0.0f;

    // the j tiles: forward from the tile of row i0's window start to i0's own; REV from i0's own to the tile of the
    // window end of the block's last row
    ll jt_first, jt_last;
    if (!REV) {
        jt_first = (i0 / p.C) * p.C / kTile;
        jt_last = i0 / kTile;
    } else {
        const ll last_row = (i0 + kTile < p.T ? i0 + kTile : p.T) - 1;
        const ll window_end = (last_row / p.C + 1) * p.C;   // exclusive
        jt_first = i0 / kTile;
        jt_last = ((window_end < p.T ? window_end : p.T) - 1) / kTile;
    }
    for (ll jt = jt_first; jt <= jt_last; ++jt) {
        const ll j0 = jt * kTile;
        simt::sync_block();   // the previous tile is no longer read (the first time: nothing to wait for)
        load_op_rows<DA>(Bs, b, item, h, j0, p);
        load_op_rows_transposed<DC>(Ct, c, item, h, j0, p);
        simt::sync_block();
        float s[8][4];
        rows_times_rows_t<DA>(s, As, warp * 16, Bs, lane);   // a_i · b_j
        u32 pk[8][2];
RETRO_SIMT_UNROLL
        for (int n = 0; n < 8; ++n) {
            float x[4];
RETRO_SIMT_UNROLL
            for (int e = 0; e < 4; ++e) {
                const ll i = rows[e / 2], j = j0 + n * 8 + 2 * t + (e & 1);
                const bool in = i < p.T && j < p.T && i / p.C == j / p.C && (REV ? j >= i : j <= i);
                x[e] = in ? s[n][e] * p.scale * simt::exp2_fast(lg2 * static_cast<float>(REV ? j - i : i - j)) : 0.0f;
            }
            pk[n][0] = simt::pack_bf16x2(x[0], x[1]);
            pk[n][1] = simt::pack_bf16x2(x[2], x[3]);
        }
        accumulate_p_times<DC>(acc, pk, Ct, lane);   // += P c_j
    }
    for (int r = 0; r < 2; ++r) {
        if (rows[r] >= p.T) continue;
        u16* o = out + ((item * p.T + rows[r]) * p.H + h) * DC;
RETRO_SIMT_UNROLL
        for (int u = 0; u < DC / 8; ++u) {
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

}  // namespace retro::retention::pair_mma
