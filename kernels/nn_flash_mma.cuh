// The fused (flash-style) attention's kernels on raw mma.sync (m16n8k16, bf16 operands, fp32 accumulation), with the
// score tile S, the probabilities P and dS kept in registers: the C fragments of one product are the A fragments of
// the next (kernels/simt.cuh lays the fragments out), so nothing of a 64 x 64 tile goes through shared memory. The
// algorithm is FlashAttention-2's (Dao 2023, Algorithms 1 and 2) as in the wmma kernels of
// kernels/nn_flash_attention_cuda.cu, which these replace (the same interface, lse, Delta and rounding points):
//   forward: a block per 64 queries of one (item, head), warp w owns rows [16w, 16w + 16); walk the key blocks (to
//            the diagonal when causal) keeping each row's running max m and sum l of exp(s - m) (l sums the
//            bf16-rounded p that P V multiplies) and O in fp32 registers; out = O / l, lse = m + log l.
//   dQ:      a block per 64 queries walks the key blocks: dS = P (dP - Delta), P = exp(S - lse), dP = dO V^T;
//            dQ += dS K.
//   dK, dV:  a block per 64 keys, warp w owns keys [16w, 16w + 16), walks the query blocks that see them with S^T =
//            K Q^T and dP^T = V dO^T: dV += P^T dO, dK += dS^T Q.
// No atomics: every sum has a fixed order, a run repeats bit for bit. The queries arrive scaled (S = Q K^T).
// Shared memory holds bf16 tiles of 64 rows (stride D + 8) and, where a product needs the operand with the head
// dimension as its columns (V in P V, K in dS K, Q and dO in the dK/dV products), a transposed [D][64 + 8] copy made
// while loading; both strides put the 8 x 4 lanes of a fragment load on 32 different banks.
// Compiled by nvcc for the GPU (kernels/nn_flash_attention_cuda.cu) and by the host compiler over tests/simt_host.h
// (tests/test_flash_mma_host.cpp), which runs every thread of a block and checks the kernels against attention in
// double on a machine without a GPU.
#pragma once

#include <cmath>
#include <cstdint>

#include "simt.cuh"

namespace retro::nn::flash {

using ll = long long;
using u16 = std::uint16_t;
using u32 = std::uint32_t;

struct FlashDims {
    ll B, N, H, D, HD;   // items, positions, heads, head size, H * D (a row's stride in q, k, v, out)
    bool causal;
};

constexpr int kTile = 64;   // queries (forward, dQ) or keys (dK/dV) of a block, and rows of the walk's steps
constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kTLd = kTile + 8;   // bf16 per row of a transposed [D][64] tile
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
constexpr int row_ld() {   // bf16 per row of a [64][D] tile
    return D + 8;
}
template <int D>
constexpr int row_tile_bytes() {
    return kTile * row_ld<D>() * 2;
}
template <int D>
constexpr int t_tile_bytes() {
    return D * kTLd * 2;
}
// Dynamic shared memory of each kernel (bytes).
template <int D>
constexpr int forward_smem() {
    return 2 * row_tile_bytes<D>() + t_tile_bytes<D>();
}
template <int D>
constexpr int dq_smem() {
    return 4 * row_tile_bytes<D>() + t_tile_bytes<D>() + 2 * kTile * 4;
}
template <int D>
constexpr int dkdv_smem() {
    return 4 * row_tile_bytes<D>() + 2 * t_tile_bytes<D>() + 2 * kTile * 4;
}

// Key j is hidden from query i (both within the sequence of N): past the end, or in the future when causal.
RETRO_SIMT_DEVICE bool hidden(ll i, ll j, const FlashDims& m) { return i >= m.N || j >= m.N || (m.causal && j > i); }

// Rows [r0, r0 + 64) of one (item, head) operand src [N, H*D] (fp32, offset to the head) as bf16 tile[64][D + 8];
// rows past N are zero.
template <int D>
RETRO_SIMT_DEVICE void load_rows(u16* tile, const float* __restrict__ src, ll r0, const FlashDims& m) {
    constexpr int ld = row_ld<D>();
    u32* t32 = reinterpret_cast<u32*>(tile);
    for (int e = simt::thread_x(); e < kTile * D / 2; e += kThreads) {
        const int r = e / (D / 2), c = 2 * (e % (D / 2));
        const ll row = r0 + r;
        float x0 = 0.0f, x1 = 0.0f;
        if (row < m.N) {
            x0 = src[row * m.HD + c];
            x1 = src[row * m.HD + c + 1];
        }
        t32[(r * ld + c) / 2] = simt::pack_bf16x2(x0, x1);
    }
}

// The same rows transposed: tile[c][r] (D rows of stride 64 + 8) = src[r0 + r][c].
template <int D>
RETRO_SIMT_DEVICE void load_rows_transposed(u16* tile, const float* __restrict__ src, ll r0, const FlashDims& m) {
    u32* t32 = reinterpret_cast<u32*>(tile);
    for (int e = simt::thread_x(); e < D * kTile / 2; e += kThreads) {
        const int c = e % D, r = 2 * (e / D);   // consecutive threads read consecutive columns of two rows
        const ll row = r0 + r;
        const float x0 = row < m.N ? src[row * m.HD + c] : 0.0f;
        const float x1 = row + 1 < m.N ? src[(row + 1) * m.HD + c] : 0.0f;
        t32[(c * kTLd + r) / 2] = simt::pack_bf16x2(x0, x1);
    }
}

// The A fragment of rows [row0, row0 + 16), columns [k0, k0 + 16) of a row-major bf16 tile of stride ld.
RETRO_SIMT_DEVICE void load_a(u32 (&a)[4], const u16* tile, int ld, int row0, int k0, int lane) {
    const u32* p = reinterpret_cast<const u32*>(tile);
    const int g = lane / 4, t = lane % 4;
    a[0] = p[((row0 + g) * ld + k0 + 2 * t) / 2];
    a[1] = p[((row0 + g + 8) * ld + k0 + 2 * t) / 2];
    a[2] = p[((row0 + g) * ld + k0 + 8 + 2 * t) / 2];
    a[3] = p[((row0 + g + 8) * ld + k0 + 8 + 2 * t) / 2];
}

// The B fragment (16 x 8) with B[k][n] = tile[n0 + n][k0 + k]: the tile's rows are B's columns.
RETRO_SIMT_DEVICE void load_b(u32 (&b)[2], const u16* tile, int ld, int n0, int k0, int lane) {
    const u32* p = reinterpret_cast<const u32*>(tile);
    const int g = lane / 4, t = lane % 4;
    b[0] = p[((n0 + g) * ld + k0 + 2 * t) / 2];
    b[1] = p[((n0 + g) * ld + k0 + 8 + 2 * t) / 2];
}

// acc (16 x 64 as eight 16 x 8 C fragments) = rows [row0, row0 + 16) of A (bf16 [.][D + 8]) times the 64 rows of Bt
// (bf16 [64][D + 8]) transposed: the warp's slice of S = Q K^T, dP = dO V^T, S^T = K Q^T or dP^T = V dO^T.
template <int D>
RETRO_SIMT_DEVICE void rows_times_rows_t(float (&acc)[8][4], const u16* A, int row0, const u16* Bt, int lane) {
    constexpr int ld = row_ld<D>();
RETRO_SIMT_UNROLL
    for (int n = 0; n < 8; ++n)
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) acc[n][c] = 0.0f;
RETRO_SIMT_UNROLL
    for (int kk = 0; kk < D / 16; ++kk) {
        u32 a[4];
        load_a(a, A, ld, row0, kk * 16, lane);
RETRO_SIMT_UNROLL
        for (int n = 0; n < 8; ++n) {
            u32 b[2];
            load_b(b, Bt, ld, n * 8, kk * 16, lane);
            simt::mma_bf16_16816(acc[n], a, b);
        }
    }
}

// acc (16 x D as D/8 C fragments) += P times X, where P (16 x 64) is given as the bf16 pairs of its C fragments
// (pk[n][0]: row g, columns 8n + 2t, +1; pk[n][1]: row g + 8) and X (64 x D) as its transpose Xt [D][64 + 8]. The
// C fragments of two neighbouring 16 x 8 tiles are the A fragment of one 16 x 16 slice (simt.cuh's layouts).
template <int D>
RETRO_SIMT_DEVICE void accumulate_p_times(float (&acc)[D / 8][4], const u32 (&pk)[8][2], const u16* Xt, int lane) {
RETRO_SIMT_UNROLL
    for (int kk = 0; kk < kTile / 16; ++kk) {
        const u32 a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
RETRO_SIMT_UNROLL
        for (int u = 0; u < D / 8; ++u) {
            u32 b[2];
            load_b(b, Xt, kTLd, u * 8, kk * 16, lane);
            simt::mma_bf16_16816(acc[u], a, b);
        }
    }
}

// A warp's 16 x D result (C fragments) to rows [row0, row0 + 16) of dst [N, H*D] (offset to the head), rows past N
// left alone; the lane's row g is multiplied by scale_g, row g + 8 by scale_g8.
template <int D>
RETRO_SIMT_DEVICE void store_rows(float* __restrict__ dst, const float (&acc)[D / 8][4], ll row0, float scale_g,
                                  float scale_g8, const FlashDims& m, int lane) {
    const int g = lane / 4, t = lane % 4;
    const ll r_g = row0 + g, r_g8 = row0 + g + 8;
RETRO_SIMT_UNROLL
    for (int u = 0; u < D / 8; ++u) {
        const int c = u * 8 + 2 * t;
        if (r_g < m.N) {
            dst[r_g * m.HD + c] = acc[u][0] * scale_g;
            dst[r_g * m.HD + c + 1] = acc[u][1] * scale_g;
        }
        if (r_g8 < m.N) {
            dst[r_g8 * m.HD + c] = acc[u][2] * scale_g8;
            dst[r_g8 * m.HD + c + 1] = acc[u][3] * scale_g8;
        }
    }
}

RETRO_SIMT_DEVICE float bf16_lo(u32 pair) { return simt::bf16_value(static_cast<u16>(pair & 0xffffu)); }
RETRO_SIMT_DEVICE float bf16_hi(u32 pair) { return simt::bf16_value(static_cast<u16>(pair >> 16)); }

// out [B, N, H*D] = softmax(Q K^T) V and lse [B, H, N]; grid (ceil(N / 64), B * H), kThreads threads,
// forward_smem<D>() bytes.
template <int D>
RETRO_SIMT_KERNEL(kThreads)
flash_mma_forward(float* __restrict__ out, float* __restrict__ lse, const float* __restrict__ q,
                  const float* __restrict__ k, const float* __restrict__ v, FlashDims m) {
    constexpr int ld = row_ld<D>();
    u16* Qs = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* Ks = Qs + kTile * ld;
    u16* Vt = Ks + kTile * ld;   // [D][kTLd]

    const ll qb = simt::block_x(), bh = simt::block_y(), b = bh / m.H, h = bh % m.H;
    const ll base = b * m.N * m.HD + h * m.D;
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, t = lane % 4;
    const ll q0 = qb * kTile;
    const ll rows[2] = {q0 + warp * 16 + lane / 4, q0 + warp * 16 + lane / 4 + 8};   // this lane's two queries

    load_rows<D>(Qs, q + base, q0, m);
    float o[D / 8][4];
RETRO_SIMT_UNROLL
    for (int u = 0; u < D / 8; ++u)
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) o[u][c] = 0.0f;
    float mrow[2] = {-INFINITY, -INFINITY};   // each row's running max (the same in its four lanes)
    float lrow[2] = {0.0f, 0.0f};             // this lane's part of each row's running sum
    float mref[2] = {0.0f, 0.0f};             // the max exp() was taken against (0 while a row has seen no key)

    const ll key_blocks = (m.N + kTile - 1) / kTile;
    const ll last = m.causal ? (qb < key_blocks - 1 ? qb : key_blocks - 1) : key_blocks - 1;
    for (ll kb = 0; kb <= last; ++kb) {
        const ll j0 = kb * kTile;
        simt::sync_block();   // the previous block's K, V are no longer read (the first time: nothing to wait for)
        load_rows<D>(Ks, k + base, j0, m);
        load_rows_transposed<D>(Vt, v + base, j0, m);
        simt::sync_block();
        float s[8][4];
        rows_times_rows_t<D>(s, Qs, warp * 16, Ks, lane);
        const bool edge = (m.causal && kb == qb) || j0 + kTile > m.N || q0 + kTile > m.N;
        float mx[2] = {mrow[0], mrow[1]};
RETRO_SIMT_UNROLL
        for (int n = 0; n < 8; ++n)
RETRO_SIMT_UNROLL
            for (int c = 0; c < 4; ++c) {
                if (edge && hidden(rows[c / 2], j0 + n * 8 + 2 * t + (c & 1), m)) s[n][c] = -INFINITY;
                mx[c / 2] = fmaxf(mx[c / 2], s[n][c]);
            }
        float alpha[2];
RETRO_SIMT_UNROLL
        for (int r = 0; r < 2; ++r) {   // the row's max over its four lanes
            mx[r] = fmaxf(mx[r], simt::shfl_xor(mx[r], 1));
            mx[r] = fmaxf(mx[r], simt::shfl_xor(mx[r], 2));
            mref[r] = mx[r] == -INFINITY ? 0.0f : mx[r];   // no key seen yet: every p and alpha is exp(-inf) = 0
            alpha[r] = simt::exp2_fast((mrow[r] - mref[r]) * kLog2e);
            mrow[r] = mx[r];
            lrow[r] *= alpha[r];
        }
        u32 pk[8][2];   // P rounded to bf16, as the A fragments of P V
RETRO_SIMT_UNROLL
        for (int n = 0; n < 8; ++n) {
            pk[n][0] = simt::pack_bf16x2(simt::exp2_fast((s[n][0] - mref[0]) * kLog2e),
                                         simt::exp2_fast((s[n][1] - mref[0]) * kLog2e));
            pk[n][1] = simt::pack_bf16x2(simt::exp2_fast((s[n][2] - mref[1]) * kLog2e),
                                         simt::exp2_fast((s[n][3] - mref[1]) * kLog2e));
            lrow[0] += bf16_lo(pk[n][0]) + bf16_hi(pk[n][0]);   // the sum of what P V multiplies
            lrow[1] += bf16_lo(pk[n][1]) + bf16_hi(pk[n][1]);
        }
RETRO_SIMT_UNROLL
        for (int u = 0; u < D / 8; ++u)
RETRO_SIMT_UNROLL
            for (int c = 0; c < 4; ++c) o[u][c] *= alpha[c / 2];
        accumulate_p_times<D>(o, pk, Vt, lane);
    }
    float inv[2];
RETRO_SIMT_UNROLL
    for (int r = 0; r < 2; ++r) {
        lrow[r] += simt::shfl_xor(lrow[r], 1);
        lrow[r] += simt::shfl_xor(lrow[r], 2);
        inv[r] = lrow[r] > 0.0f ? 1.0f / lrow[r] : 0.0f;
    }
    store_rows<D>(out + base, o, q0 + warp * 16, inv[0], inv[1], m, lane);
    if (t == 0)
        for (int r = 0; r < 2; ++r)
            if (rows[r] < m.N) lse[bh * m.N + rows[r]] = mref[r] + logf(lrow[r]);
}

// A backward block's 64 rows of lse and Delta into shared memory (0 past N).
RETRO_SIMT_DEVICE void load_lse_delta(float* Ls, float* Dl, const float* __restrict__ lse,
                                      const float* __restrict__ delta, ll bh, ll r0, const FlashDims& m) {
    for (int e = simt::thread_x(); e < kTile; e += kThreads) {
        const bool in = r0 + e < m.N;
        Ls[e] = in ? lse[bh * m.N + r0 + e] : 0.0f;
        Dl[e] = in ? delta[bh * m.N + r0 + e] : 0.0f;
    }
}

// dS = P (dP - Delta) with P = exp(S - lse) for one 16 x 64 slice held as C fragments, rounded to bf16 pairs; p_out
// (when given) gets P's pairs. Entry (n, c) pairs a row `row_of(c)` with a column `col_of(n, c)`; `lse_delta_of`
// gives the lse and Delta that entry uses (a row's for dQ, a column's for dK/dV); hidden entries are 0.
template <typename Hidden, typename LseDelta>
RETRO_SIMT_DEVICE void softmax_backward_tile(u32 (&ds_out)[8][2], u32 (*p_out)[2], const float (&s)[8][4],
                                             const float (&dp)[8][4], Hidden&& is_hidden, LseDelta&& lse_delta_of) {
RETRO_SIMT_UNROLL
    for (int n = 0; n < 8; ++n) {
        float p[4], ds[4];
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) {
            p[c] = 0.0f;
            ds[c] = 0.0f;
            if (!is_hidden(n, c)) {
                float l, dl;
                lse_delta_of(n, c, l, dl);
                p[c] = simt::exp2_fast((s[n][c] - l) * kLog2e);
                ds[c] = p[c] * (dp[n][c] - dl);
            }
        }
        ds_out[n][0] = simt::pack_bf16x2(ds[0], ds[1]);
        ds_out[n][1] = simt::pack_bf16x2(ds[2], ds[3]);
        if (p_out) {
            p_out[n][0] = simt::pack_bf16x2(p[0], p[1]);
            p_out[n][1] = simt::pack_bf16x2(p[2], p[3]);
        }
    }
}

// dQ [B, N, H*D] for the 64 queries of block x of (item, head) y; dq_smem<D>() bytes.
template <int D>
RETRO_SIMT_KERNEL(kThreads)
flash_mma_backward_dq(float* __restrict__ dq, const float* __restrict__ q, const float* __restrict__ k,
                      const float* __restrict__ v, const float* __restrict__ dout, const float* __restrict__ lse,
                      const float* __restrict__ delta, FlashDims m) {
    constexpr int ld = row_ld<D>();
    u16* Qs = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* dOs = Qs + kTile * ld;
    u16* Ks = dOs + kTile * ld;
    u16* Vs = Ks + kTile * ld;
    u16* Kt = Vs + kTile * ld;   // [D][kTLd]
    float* Ls = reinterpret_cast<float*>(Kt + D * kTLd);
    float* Dl = Ls + kTile;

    const ll qb = simt::block_x(), bh = simt::block_y(), b = bh / m.H, h = bh % m.H;
    const ll base = b * m.N * m.HD + h * m.D;
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const ll q0 = qb * kTile;
    const int lr[2] = {warp * 16 + g, warp * 16 + g + 8};   // this lane's two query rows within the block

    load_rows<D>(Qs, q + base, q0, m);
    load_rows<D>(dOs, dout + base, q0, m);
    load_lse_delta(Ls, Dl, lse, delta, bh, q0, m);
    float acc[D / 8][4];
RETRO_SIMT_UNROLL
    for (int u = 0; u < D / 8; ++u)
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) acc[u][c] = 0.0f;

    const ll key_blocks = (m.N + kTile - 1) / kTile;
    const ll last = m.causal ? (qb < key_blocks - 1 ? qb : key_blocks - 1) : key_blocks - 1;
    for (ll kb = 0; kb <= last; ++kb) {
        const ll j0 = kb * kTile;
        simt::sync_block();   // the previous key block is no longer read (the first time: Qs, dOs, Ls, Dl are in)
        load_rows<D>(Ks, k + base, j0, m);
        load_rows<D>(Vs, v + base, j0, m);
        load_rows_transposed<D>(Kt, k + base, j0, m);
        simt::sync_block();
        float s[8][4], dp[8][4];
        rows_times_rows_t<D>(s, Qs, warp * 16, Ks, lane);    // S = Q K^T
        rows_times_rows_t<D>(dp, dOs, warp * 16, Vs, lane);  // dP = dO V^T
        const bool edge = (m.causal && kb == qb) || j0 + kTile > m.N || q0 + kTile > m.N;
        u32 dsk[8][2];
        softmax_backward_tile(
            dsk, nullptr, s, dp,
            [&](int n, int c) { return edge && hidden(q0 + lr[c / 2], j0 + n * 8 + 2 * t + (c & 1), m); },
            [&](int, int c, float& l, float& dl) {
                l = Ls[lr[c / 2]];
                dl = Dl[lr[c / 2]];
            });
        accumulate_p_times<D>(acc, dsk, Kt, lane);   // dQ += dS K
    }
    store_rows<D>(dq + base, acc, q0 + warp * 16, 1.0f, 1.0f, m, lane);
}

// dK, dV [B, N, H*D] for the 64 keys of block x of (item, head) y; dkdv_smem<D>() bytes.
template <int D>
RETRO_SIMT_KERNEL(kThreads)
flash_mma_backward_dkdv(float* __restrict__ dk, float* __restrict__ dv, const float* __restrict__ q,
                        const float* __restrict__ k, const float* __restrict__ v, const float* __restrict__ dout,
                        const float* __restrict__ lse, const float* __restrict__ delta, FlashDims m) {
    constexpr int ld = row_ld<D>();
    u16* Ks = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* Vs = Ks + kTile * ld;
    u16* Qs = Vs + kTile * ld;
    u16* dOs = Qs + kTile * ld;
    u16* Qt = dOs + kTile * ld;   // [D][kTLd]
    u16* dOt = Qt + D * kTLd;     // [D][kTLd]
    float* Ls = reinterpret_cast<float*>(dOt + D * kTLd);
    float* Dl = Ls + kTile;

    const ll kb = simt::block_x(), bh = simt::block_y(), b = bh / m.H, h = bh % m.H;
    const ll base = b * m.N * m.HD + h * m.D;
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const ll k0 = kb * kTile;
    const ll keys[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};   // this lane's two keys

    load_rows<D>(Ks, k + base, k0, m);
    load_rows<D>(Vs, v + base, k0, m);
    float dK[D / 8][4], dV[D / 8][4];
RETRO_SIMT_UNROLL
    for (int u = 0; u < D / 8; ++u)
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) {
            dK[u][c] = 0.0f;
            dV[u][c] = 0.0f;
        }
    const ll query_blocks = (m.N + kTile - 1) / kTile;
    for (ll qb = m.causal ? kb : 0; qb < query_blocks; ++qb) {
        const ll q0 = qb * kTile;
        simt::sync_block();   // the previous query block is no longer read (the first time: Ks, Vs are in)
        load_rows<D>(Qs, q + base, q0, m);
        load_rows<D>(dOs, dout + base, q0, m);
        load_rows_transposed<D>(Qt, q + base, q0, m);
        load_rows_transposed<D>(dOt, dout + base, q0, m);
        load_lse_delta(Ls, Dl, lse, delta, bh, q0, m);
        simt::sync_block();
        float st[8][4], dpt[8][4];
        rows_times_rows_t<D>(st, Ks, warp * 16, Qs, lane);    // S^T = K Q^T
        rows_times_rows_t<D>(dpt, Vs, warp * 16, dOs, lane);  // dP^T = V dO^T
        const bool edge = (m.causal && qb == kb) || q0 + kTile > m.N || k0 + kTile > m.N;
        u32 dsk[8][2], pk[8][2];
        softmax_backward_tile(
            dsk, pk, st, dpt,
            [&](int n, int c) { return edge && hidden(q0 + n * 8 + 2 * t + (c & 1), keys[c / 2], m); },
            [&](int n, int c, float& l, float& dl) {
                l = Ls[n * 8 + 2 * t + (c & 1)];
                dl = Dl[n * 8 + 2 * t + (c & 1)];
            });
        accumulate_p_times<D>(dV, pk, dOt, lane);   // dV += P^T dO
        accumulate_p_times<D>(dK, dsk, Qt, lane);   // dK += dS^T Q
    }
    store_rows<D>(dk + base, dK, k0 + warp * 16, 1.0f, 1.0f, m, lane);
    store_rows<D>(dv + base, dV, k0 + warp * 16, 1.0f, 1.0f, m, lane);
}

}  // namespace retro::nn::flash
