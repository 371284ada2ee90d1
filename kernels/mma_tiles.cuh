// Warp-level tile products on mma.sync (m16n8k16, bf16 operands, fp32 accumulation) for kernels written against
// kernels/simt.cuh (the fused attention, kernels/nn_flash_mma.cuh; retention's pair kernel,
// kernels/retention_pair_mma.cuh, and chunk walk, kernels/retention_chunk_mma.cuh): a block of kWarps warps owns 64 rows, warp w rows [16w, 16w + 16), and walks 64-row
// tiles of the other operand. Shared memory holds bf16 tiles of 64 rows (stride D + 8: the 8 x 4 lanes of a fragment
// load, and the eight 16-byte rows of an ldmatrix matrix, fall on 32 different banks); where a product needs an
// operand with its D columns as B's columns, ldmatrix.trans reads them from the rows as loaded. S = A Bt^T comes back
// as eight 16 x 8 C fragments per warp; rounded to bf16 pairs, two neighbouring C fragments are one A fragment
// (simt.cuh's layouts), so P X takes P from registers.
#pragma once

#include <cstdint>

#include "simt.cuh"

namespace retro::mma_tiles {

using ll = long long;
using u16 = std::uint16_t;
using u32 = std::uint32_t;

constexpr int kTile = 64;   // rows of a block, and of each step of its walk
constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
constexpr int row_ld() {   // bf16 per row of a [64][D] tile
    return D + 8;
}
template <int D>
constexpr int row_tile_bytes() {
    return kTile * row_ld<D>() * 2;
}

RETRO_SIMT_DEVICE float bf16_lo(u32 pair) { return simt::bf16_value(static_cast<u16>(pair & 0xffffu)); }
RETRO_SIMT_DEVICE float bf16_hi(u32 pair) { return simt::bf16_value(static_cast<u16>(pair >> 16)); }

// The A fragment of rows [row0, row0 + 16), columns [k0, k0 + 16) of a row-major bf16 tile of stride ld.
RETRO_SIMT_DEVICE void load_a(u32 (&a)[4], const u16* tile, int ld, int row0, int k0, int lane) {
    const int g = lane / 4, t = lane % 4;
    const u16* p = tile + (row0 + g) * ld + k0 + 2 * t;   // element offsets: constants fold into the loads' immediates
    a[0] = *reinterpret_cast<const u32*>(p);
    a[1] = *reinterpret_cast<const u32*>(p + 8 * ld);
    a[2] = *reinterpret_cast<const u32*>(p + 8);
    a[3] = *reinterpret_cast<const u32*>(p + 8 * ld + 8);
}

// The B fragment (16 x 8) with B[k][n] = tile[n0 + n][k0 + k]: the tile's rows are B's columns.
RETRO_SIMT_DEVICE void load_b(u32 (&b)[2], const u16* tile, int ld, int n0, int k0, int lane) {
    const int g = lane / 4, t = lane % 4;
    const u16* p = tile + (n0 + g) * ld + k0 + 2 * t;
    b[0] = *reinterpret_cast<const u32*>(p);
    b[1] = *reinterpret_cast<const u32*>(p + 8);
}

// Fragments from tiles stored the other way round, by ldmatrix.trans (one instruction for four 8 x 8 matrices, no
// transposed copy of the tile):
// load_b_kn: the B fragments of columns [n0, n0 + 8) (b[0]) and [n0 + 8, n0 + 16) (b[1]) with
//            B[k][n] = tile[k0 + k][n0 + n], a row-major k x n tile (e.g. the value rows of P V);
// load_a_t:  the A fragment with A[m][k] = tile[k0 + k][row0 + m] (A's rows are the tile's columns, e.g. V^T of V^T K).
// Rows of the tile 16-byte aligned (ld a multiple of 8, n0 and row0 too); with ld = D + 8 the eight rows of a matrix
// fall on distinct banks.
RETRO_SIMT_DEVICE void load_b_kn(u32 (&b)[2][2], const u16* tile, int ld, int k0, int n0, int lane) {
    const int m = lane / 8, r = lane % 8;   // this lane's row address: row r of matrix m (k half m % 2, n half m / 2)
    u32 q[4];
    simt::ldmatrix_x4<true>(q, tile + (k0 + (m % 2) * 8 + r) * ld + n0 + (m / 2) * 8);
    b[0][0] = q[0];
    b[0][1] = q[1];
    b[1][0] = q[2];
    b[1][1] = q[3];
}
RETRO_SIMT_DEVICE void load_a_t(u32 (&a)[4], const u16* tile, int ld, int row0, int k0, int lane) {
    const int m = lane / 8, r = lane % 8;   // matrix m: k half m / 2, row half m % 2 (a0..a3's order)
    simt::ldmatrix_x4<true>(a, tile + (k0 + (m / 2) * 8 + r) * ld + row0 + (m % 2) * 8);
}

// N C fragments (16 x 8N fp32) to zero.
template <int N>
RETRO_SIMT_DEVICE void zero_fragments(float (&acc)[N][4]) {
RETRO_SIMT_UNROLL
    for (int n = 0; n < N; ++n)
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) acc[n][c] = 0.0f;
}

// acc (16 x 8N as N 16 x 8 C fragments; N = 8: 16 x 64) = rows [row0, row0 + 16) of A (bf16 [.][D + 8]) times the
// first 8N rows of Bt (bf16 [.][D + 8]) transposed: the warp's slice of S = Q K^T, dP = dO V^T, S^T = K Q^T or
// dP^T = V dO^T.
template <int D, int N = 8>
RETRO_SIMT_DEVICE void rows_times_rows_t(float (&acc)[N][4], const u16* A, int row0, const u16* Bt, int lane) {
    constexpr int ld = row_ld<D>();
    zero_fragments(acc);
RETRO_SIMT_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
        u32 a[4];
        load_a(a, A, ld, row0, kk * 16, lane);
RETRO_SIMT_UNROLL
        for (int n = 0; n < N; ++n) {
            u32 b[2];
            load_b(b, Bt, ld, n * 8, kk * 16, lane);
            simt::mma_bf16_16816(acc[n], a, b);
        }
    }
}

// rows_times_rows_t with its fragments by ldmatrix (non-transposed): one instruction a 16 x 16 A fragment, one the
// B fragments of two 8-row groups of Bt — for a 16 x 64 S at D = 128, 40 shared-load instructions against
// load_a/load_b's 160 32-bit loads; the same products in the same order, so the same floats. Taken where ptxas keeps
// the kernel's blocks an SM and spills nothing with it (session 28: the pair kernel, the chunk walks' S at Da = 64 and
// 128, the 16-warp walk, the fused attention's dK/dV); elsewhere ldmatrix's four-register results moved ptxas across
// an occupancy line or into spills (the attention's forward and dQ, sessions 27 and 28). N even.
template <int D, int N = 8>
RETRO_SIMT_DEVICE void rows_times_rows_t_x4(float (&acc)[N][4], const u16* A, int row0, const u16* Bt, int lane) {
    constexpr int ld = row_ld<D>();
    const int m = lane / 8, r = lane % 8;
    // this lane's row address: A's matrix m holds rows (m % 2) * 8 and k (m / 2) * 8 (a[0..3]'s order); Bt's
    // matrix m rows (m / 2) * 8 (the second 8-row group's b[0], b[1] in q[2], q[3]) and k (m % 2) * 8
    const u16* pa = A + (row0 + (m % 2) * 8 + r) * ld + (m / 2) * 8;
    const u16* pb = Bt + ((m / 2) * 8 + r) * ld + (m % 2) * 8;
    zero_fragments(acc);
RETRO_SIMT_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
        u32 a[4];
        simt::ldmatrix_x4<false>(a, pa + kk * 16);
RETRO_SIMT_UNROLL
        for (int n = 0; n < N; n += 2) {
            u32 q[4];
            simt::ldmatrix_x4<false>(q, pb + n * 8 * ld + kk * 16);
            const u32 b0[2] = {q[0], q[1]}, b1[2] = {q[2], q[3]};
            simt::mma_bf16_16816(acc[n], a, b0);
            simt::mma_bf16_16816(acc[n + 1], a, b1);
        }
    }
}

// acc (16 x 8U) += a (one A fragment: 16 rows, k in [k0, k0 + 16)) times rows [k0, k0 + 16), columns
// [n0, n0 + 8U) of a row-major k x n tile (B fragments by ldmatrix.trans); U even.
template <int U>
RETRO_SIMT_DEVICE void accumulate_kn(float (&acc)[U][4], const u32 (&a)[4], const u16* tile, int ld, int k0, int n0,
                                     int lane) {
RETRO_SIMT_UNROLL
    for (int u = 0; u < U; u += 2) {
        u32 bf[2][2];
        load_b_kn(bf, tile, ld, k0, n0 + u * 8, lane);
        simt::mma_bf16_16816(acc[u], a, bf[0]);
        simt::mma_bf16_16816(acc[u + 1], a, bf[1]);
    }
}

// X = A M for the 16 rows [r0, r0 + 16) of A ([64][DK + 8]) and columns [n0, n0 + 64) of M, with M row-major
// [DK][ld] (B fragments by ldmatrix.trans).
template <int DK>
RETRO_SIMT_DEVICE void rows_times_kn(float (&acc)[8][4], const u16* A, int r0, const u16* M, int ld, int n0, int lane) {
RETRO_SIMT_UNROLL
    for (int u = 0; u < 8; ++u)
RETRO_SIMT_UNROLL
        for (int e = 0; e < 4; ++e) acc[u][e] = 0.0f;
RETRO_SIMT_UNROLL
    for (int kk = 0; kk < DK / 16; ++kk) {
        u32 af[4];
        load_a(af, A, row_ld<DK>(), r0, kk * 16, lane);
        accumulate_kn(acc, af, M, ld, kk * 16, n0, lane);
    }
}

// acc (16 x D as D/8 C fragments) += P times X, where P (16 x 64) is given as the bf16 pairs of its C fragments
// (pk[n][0]: row g, columns 8n + 2t, +1; pk[n][1]: row g + 8) and X (64 x D) as its rows [64][ld] (B fragments by
// ldmatrix.trans: no transposed copy of X). The C fragments of two neighbouring 16 x 8 tiles are the A fragment of
// one 16 x 16 slice (simt.cuh's layouts). D a multiple of 16.
template <int D>
RETRO_SIMT_DEVICE void accumulate_p_rows(float (&acc)[D / 8][4], const u32 (&pk)[8][2], const u16* X, int ld, int lane) {
RETRO_SIMT_UNROLL
    for (int kk = 0; kk < kTile / 16; ++kk) {
        const u32 a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
        accumulate_kn(acc, a, X, ld, kk * 16, 0, lane);
    }
}

// A warp's 16 x D result (C fragments) to the lane's two rows: dst_g (row g of the warp's 16) and dst_g8 (row g + 8),
// each [D] or null (not stored), scaled by scale_g and scale_g8.
template <int D>
RETRO_SIMT_DEVICE void store_rows(float* dst_g, float* dst_g8, const float (&acc)[D / 8][4], float scale_g,
                                  float scale_g8, int lane) {
    const int t = lane % 4;
RETRO_SIMT_UNROLL
    for (int u = 0; u < D / 8; ++u) {
        const int c = u * 8 + 2 * t;
        if (dst_g) {
            dst_g[c] = acc[u][0] * scale_g;
            dst_g[c + 1] = acc[u][1] * scale_g;
        }
        if (dst_g8) {
            dst_g8[c] = acc[u][2] * scale_g8;
            dst_g8[c + 1] = acc[u][3] * scale_g8;
        }
    }
}

}  // namespace retro::mma_tiles
