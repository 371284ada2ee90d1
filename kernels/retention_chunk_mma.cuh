// Chunkwise retention's state walk on raw mma.sync for bf16 (chunk 64; RETENTION.md §1 and §6): a block per
// (NC-column tile of c and out, item·head), NC = 64 or 128, walks the chunks, forward or reverse, with its Da x NC
// tile of the state M in the warps' fp32 accumulators:
//   forward (REV=false):  out_c = (scale A_c B_c^T ⊙ D) C_c + diag(scale gamma^(n+1)) A_c M
//                         M     = gamma^L M + (B_c ⊙ gamma^(L-1-n))^T C_c
//   reverse (REV=true):   out_c = (scale A_c B_c^T ⊙ D^T) C_c + diag(gamma^(L-1-n)) A_c M
//                         M     = gamma^L M + (B_c ⊙ scale gamma^(n+1))^T C_c,   chunks last to first
// With (A, B, C) = (q, k, v) this is the forward; (dO, v, k) gives dq, reverse (v, dO, q) dk and (k, q, dO) dv, with
// M the state S (or its gradient G) or their transpose (retention_chunkwise.cu). It replaces the wmma walk of
// retention_chunk_tc.cuh (kept behind RETRO_RETENTION_KERNELS=wmma for one A/B), whose 64 x 64 tiles of P, X and O
// each went through shared memory (wmma fragments have no defined layout) around three block barriers a chunk.
// Here, with the fragment layouts of kernels/simt.cuh (FlashAttention-2's arrangement, kernels/mma_tiles.cuh):
//   - NC / 16 warps; warp w owns the chunk's rows [16 (w % 4), + 16) and 64 columns [64 (w / 4), + 64) of the
//     output: X = A M, S = A B^T, the mask, gamma^|i-j| and the scale, P rounded to bf16 and P C all stay in
//     registers, and out = P C + coef_n X leaves them only for global memory (at NC = 128 the two warps of a row
//     strip both compute its S, as two blocks of 64 columns would);
//   - warp w also owns rows [16w, 16w + 16) of M^T (NC x Da, fp32 registers): M^T = gamma^L M^T + (C diag f)^T B
//     reads C and B from the chunk's tiles as they were loaded (A fragments of C^T and B fragments of B taken two
//     bf16 loads a register, the update coefficient f applied to the C^T fragment in registers), and the warp
//     writes its rows of M's bf16 copy (row-major M^T [NC][Da + 8], which X reads as B fragments);
//   - the chunk's rows of A, B and C come by cp.async into one of two stages, the next chunk's while this one
//     computes (one stage where the device's shared memory allows no more, e.g. sm_86/89 at Da = 128).
// Two block barriers a chunk with two stages (three with one): the stage has landed (and last chunk's M copy is
// written), and every warp's X has read M's copy before any warp rewrites it. With two copies of M (COPIES = 2, two
// stages; session 25, where the shared memory allows: an H100 or H200, not an A100 at Da = NC = 128) chunk n reads
// copy n % 2 and writes copy (n + 1) % 2, so the second barrier goes: a warp's update of M follows its own output
// at once, and warps in different phases overlap (session 23's ncu: the walk is latency-bound, no eligible warp 61 %
// of cycles). Copy (n + 1) % 2 was last read by chunk n - 1's outputs, all finished before chunk n's first barrier. NC = 128 (8 warps, one block a head at
// V = 128) reads the chunk's rows of A and B once where two 64-column blocks read them twice: a third fewer bytes at
// K = V = 128 for the same mma work; NC = 64 lets two independent blocks share an SM where its shared memory allows
// (an H100 or H200; an A100 only at Da <= 64) to hide each other's barriers. The state's bf16 copy is the mma operand, M itself is fp32 throughout,
// as fla rounds its stored chunk states. No atomics; every sum in a fixed order.
// retention_chunk_mma16.cuh is the same walk with 16 warps a block (RETRO_RETENTION_KERNELS=mma16), built from this
// file's pieces (issue_loads, load_state, row_coef, mask_decay_pack, update_state, write_state_copy, store_state).
// Compiled by nvcc (retention_chunkwise.cu) and by the host compiler over tests/simt_host.h
// (tests/test_retention_chunk_host.cpp, against the walk in double).
#pragma once

#include <type_traits>

#include "retention_pair_mma.cuh"

namespace retro::retention::chunk_mma {

using namespace retro::mma_tiles;
using pair_mma::PairDecays;

struct ChunkArgs {
    ll B, T, H;              // a, b: [B, T, H, Da]; c, out: [B, T, H, Dc] (bf16)
    int Dc;                  // a multiple of NC: the grid's x covers it in NC-column tiles
    float scale;
    bool state_transposed;   // init and fin per head as [Dc][Da] instead of [Da][Dc] (fp32)
};

// Threads of a block: NC / 16 warps (each owns 16 rows of M^T).
template <int NC>
constexpr int chunk_threads() {
    return 2 * NC;
}
// Shared memory (bytes): each stage holds the chunk's rows of A and B ([64][Da + 8]) and its 64 x NC tile of C
// ([64][NC + 8]), with DUAL also A2's ([64][NC + 8]); then M^T's bf16 copy ([NC][Da + 8]).
// retention/retention_launch.h's chunk_mma_shared_bytes says the same for the host's launch plan.
template <int DA, int NC, bool DUAL = false>
constexpr int chunk_stage_bytes() {
    return 2 * row_tile_bytes<DA>() + (DUAL ? 2 : 1) * kTile * (NC + 8) * 2;
}
template <int DA, int NC, int STAGES, bool DUAL = false, int COPIES = 1>
constexpr int chunk_smem() {
    return STAGES * chunk_stage_bytes<DA, NC, DUAL>() + COPIES * NC * row_ld<DA>() * 2;
}

// Head sizes with an instantiated kernel (Da: the state's rows; Dc: whole NC-column tiles).
RETRO_SIMT_HOST_DEVICE bool chunk_mma_supported(long Da, long Dc, int nc) {
    return (Da == 32 || Da == 64 || Da == 96 || Da == 128) && (nc == 64 || nc == 128) && Dc > 0 && Dc % nc == 0;
}

// The chunk's rows of a and b and its 64 x NC tile of c (columns col0..), and of a2 where given, into one stage
// (zeros past T), by the block's THREADS threads.
template <int DA, int NC, int THREADS = chunk_threads<NC>()>
RETRO_SIMT_DEVICE void issue_loads(u16* stage, ll chunk, const u16* __restrict__ a, const u16* __restrict__ b,
                                   const u16* __restrict__ c, const u16* __restrict__ a2, ll item, ll h, int col0,
                                   const ChunkArgs& p) {
    constexpr int lda = row_ld<DA>(), ldc = NC + 8, threads = THREADS;
    u16* As = stage;
    u16* Bs = As + kTile * lda;
    u16* Cs = Bs + kTile * lda;
    const ll t0 = chunk * kTile;
    const int tid = simt::thread_x();
    const ll row0 = (item * p.T + t0) * p.H + h;   // the chunk's first row, in rows of H heads
    const int rows_valid = p.T - t0 < kTile ? static_cast<int>(p.T - t0) : kTile;
    for (int e = tid; e < kTile * DA / 8; e += threads) {
        const int r = e / (DA / 8), v = (e % (DA / 8)) * 8;
        const bool ok = r < rows_valid;
        const ll off = ok ? (row0 + static_cast<ll>(r) * p.H) * DA + v : 0;
        simt::copy16_async(As + r * lda + v, a + off, ok);
        simt::copy16_async(Bs + r * lda + v, b + off, ok);
    }
    for (int e = tid; e < kTile * NC / 8; e += threads) {
        const int r = e / (NC / 8), v = (e % (NC / 8)) * 8;
        const bool ok = r < rows_valid;
        const ll off = ok ? (row0 + static_cast<ll>(r) * p.H) * p.Dc + col0 + v : 0;
        simt::copy16_async(Cs + r * ldc + v, c + off, ok);
        if (a2) simt::copy16_async(Cs + (kTile + r) * ldc + v, a2 + off, ok);   // DUAL: A2's tile after C's
    }
}

// A warp's block of M^T, rows [r0, r0 + 16) and columns [k0, k0 + COLS) (C fragments m, fp32), into the bf16 copy
// Mt [NC][DA + 8].
template <int DA, int COLS = DA>
RETRO_SIMT_DEVICE void write_state_copy(u16* Mt, const float (&m)[COLS / 8][4], int r0, int k0, int lane) {
    constexpr int lda = row_ld<DA>();
    const int g = lane / 4, t = lane % 4;
    u16* row_g = Mt + (r0 + g) * lda + k0 + 2 * t;   // element offsets: the constants fold into the stores
RETRO_SIMT_UNROLL
    for (int u = 0; u < COLS / 8; ++u) {
        *reinterpret_cast<u32*>(row_g + u * 8) = simt::pack_bf16x2(m[u][0], m[u][1]);
        *reinterpret_cast<u32*>(row_g + 8 * lda + u * 8) = simt::pack_bf16x2(m[u][2], m[u][3]);
    }
}

// Where element (i, col0 + n) of (item·head) bh's fp32 state lies: [Da][Dc], or [Dc][Da] when state_transposed.
template <int DA>
RETRO_SIMT_DEVICE ll state_index(const ChunkArgs& p, ll bh, int col0, int i, int n) {
    return bh * DA * p.Dc + (p.state_transposed ? static_cast<ll>(col0 + n) * DA + i : static_cast<ll>(i) * p.Dc + col0 + n);
}
// A warp's block of M^T in C fragments, rows [mr0, mr0 + 16) (M's columns col0 + mr0..) and columns [k0, k0 + COLS)
// (M's rows): m[u][e] = M^T[mr0 + g + 8 (e >= 2)][k0 + 8u + 2t + (e & 1)], from init (zeros where null) ...
template <int DA, int COLS>
RETRO_SIMT_DEVICE void load_state(float (&m)[COLS / 8][4], const float* init, const ChunkArgs& p, ll bh, int col0,
                                  int mr0, int k0, int lane) {
    const int g = lane / 4, t = lane % 4;
RETRO_SIMT_UNROLL
    for (int u = 0; u < COLS / 8; ++u)
RETRO_SIMT_UNROLL
        for (int e = 0; e < 4; ++e)
            m[u][e] = init ? init[state_index<DA>(p, bh, col0, k0 + u * 8 + 2 * t + (e & 1), mr0 + g + (e >= 2 ? 8 : 0))]
                           : 0.0f;
}
// ... and back to fin.
template <int DA, int COLS>
RETRO_SIMT_DEVICE void store_state(float* fin, const float (&m)[COLS / 8][4], const ChunkArgs& p, ll bh, int col0,
                                   int mr0, int k0, int lane) {
    const int g = lane / 4, t = lane % 4;
RETRO_SIMT_UNROLL
    for (int u = 0; u < COLS / 8; ++u)
RETRO_SIMT_UNROLL
        for (int e = 0; e < 4; ++e)
            fin[state_index<DA>(p, bh, col0, k0 + u * 8 + 2 * t + (e & 1), mr0 + g + (e >= 2 ? 8 : 0))] = m[u][e];
}

// The coefficient of a chunk's output row n on A M: scale gamma^(n+1) forward, gamma^(L-1-n) reverse, 0 past L.
template <bool REV>
RETRO_SIMT_DEVICE float row_coef(int n, int L, float lg2, float scale) {
    // the exp computed, then selected (a ternary around it became a branch an entry)
    const float w = REV ? simt::exp2_fast(lg2 * static_cast<float>(L - 1 - n))
                        : scale * simt::exp2_fast(lg2 * static_cast<float>(n + 1));
    return n >= L ? 0.0f : w;
}

// A warp's S fragments (N 16 x 8 tiles: rows i = i0 + g + 8 (e >= 2), keys j = j0 + 8n + 2t + (e & 1)) masked to
// the causal side (REV: j >= i), times scale gamma^|i-j|, rounded to bf16 pairs: pk[n][0] row g, pk[n][1] row g + 8
// (two neighbouring tiles are one A fragment of P). i_minus_2t = i0 + g - 2t - j0, so i - j = i_minus_2t +
// 8 (e >= 2) - (e & 1) - 8n.
template <int N, bool REV>
RETRO_SIMT_DEVICE void mask_decay_pack(u32 (&pk)[N][2], const float (&sc)[N][4], int i_minus_2t, float lg2, float scale) {
RETRO_SIMT_UNROLL
    for (int n8 = 0; n8 < N; ++n8) {
        float x[4];
RETRO_SIMT_UNROLL
        for (int e = 0; e < 4; ++e) {
            const int dist = i_minus_2t + (e >= 2 ? 8 : 0) - (e & 1) - n8 * 8;   // i - j
            const bool keep = REV ? dist <= 0 : dist >= 0;
            const float w = simt::exp2_fast(lg2 * static_cast<float>(REV ? -dist : dist));   // then selected: no branch
            x[e] = keep ? sc[n8][e] * scale * w : 0.0f;
        }
        pk[n8][0] = simt::pack_bf16x2(x[0], x[1]);
        pk[n8][1] = simt::pack_bf16x2(x[2], x[3]);
    }
}

// A warp's block of M^T (rows [mr0, mr0 + 16), columns [k0, k0 + COLS): C fragments m, fp32) after the chunk:
//   M^T = gamma^L M^T + (C diag f)^T B,   f_k = gamma^(L-1-k) forward, scale gamma^(k+1) reverse, 0 past L,
// with C the chunk's [64][ldc] tile (M^T's rows are its columns) and B its [64][lda] rows (M^T's columns k0..):
// A fragments of C^T by ldmatrix.trans, f applied to them in registers, B fragments by ldmatrix.trans.
template <int COLS, bool REV>
RETRO_SIMT_DEVICE void update_state(float (&m)[COLS / 8][4], const u16* Cs, int ldc, const u16* Bs, int lda, int mr0,
                                    int k0, int L, float lg2, float scale, int lane) {
    const int t = lane % 4;
    const float decay_L = simt::exp2_fast(lg2 * static_cast<float>(L));
RETRO_SIMT_UNROLL
    for (int u = 0; u < COLS / 8; ++u)
RETRO_SIMT_UNROLL
        for (int e = 0; e < 4; ++e) m[u][e] *= decay_L;
RETRO_SIMT_UNROLL
    for (int kk = 0; kk < kTile / 16; ++kk) {
        float f[4];   // for k = 16kk + 2t, +1, +8, +9
RETRO_SIMT_UNROLL
        for (int e = 0; e < 4; ++e) {
            const int k = kk * 16 + 2 * t + (e & 1) + (e >= 2 ? 8 : 0);
            const float w = REV ? scale * simt::exp2_fast(lg2 * static_cast<float>(k + 1))
                                : simt::exp2_fast(lg2 * static_cast<float>(L - 1 - k));   // then selected
            f[e] = k >= L ? 0.0f : w;
        }
        u32 ca[4];   // A[n][k] = C[k][n]: registers 0, 1 hold k = 2t, 2t+1; 2, 3 hold k + 8
        load_a_t(ca, Cs, ldc, mr0, kk * 16, lane);
RETRO_SIMT_UNROLL
        for (int r = 0; r < 4; ++r)
            ca[r] = simt::pack_bf16x2(bf16_lo(ca[r]) * f[r >= 2 ? 2 : 0], bf16_hi(ca[r]) * f[r >= 2 ? 3 : 1]);
RETRO_SIMT_UNROLL
        for (int u = 0; u < COLS / 8; u += 2) {
            u32 bf[2][2];
            load_b_kn(bf, Bs, lda, kk * 16, k0 + u * 8, lane);
            simt::mma_bf16_16816(m[u], ca, bf[0]);
            simt::mma_bf16_16816(m[u + 1], ca, bf[1]);
        }
    }
}

// One warp's 16 x 64 block of a chunk's output, rows [r0, r0 + 16) and columns [n0, n0 + 64):
//   out = diag(coef_n) A M + P V,   P = bf16(scale gamma^|i-j| A Bt^T) on the causal side (REV: j >= i), 0 elsewhere
// with coef_n = scale gamma^(n+1) forward, gamma^(L-1-n) reverse (0 past L). A and Bt: the chunk's rows, [64][DK + 8]
// (k over DK); M's columns from its transpose's bf16 copy Mt ([cols][DK + 8], B fragments by plain loads) or, with
// M_KN, from M itself row-major ([DK][ld_m], by ldmatrix.trans); V: the chunk's value rows [64][ld_v]. Rows below L
// are stored to out_chunk + n * out_stride + n0 (bf16).
// X_LDSM: X = A M's fragments by ldmatrix (the 128-column walks at Da = 64 or 128: forward walk 5,432 -> 5,160
// instructions, no spill; in the 64-column walks it cost a block an SM, ptxas sm_90, session 28).
template <int DK, bool REV, bool M_KN, bool X_LDSM = false>
RETRO_SIMT_DEVICE void chunk_output(u16* out_chunk, ll out_stride, const u16* A, const u16* Bt, const u16* Mop, int ld_m,
                                    const u16* V, int ld_v, int r0, int n0, int L, float lg2, float scale, int lane) {
    const int g = lane / 4, t = lane % 4;
    const int rows[2] = {r0 + g, r0 + g + 8};   // this lane's two rows n of the chunk
    float acc[8][4];
    if constexpr (M_KN) rows_times_kn<DK>(acc, A, r0, Mop, ld_m, n0, lane);
    else if constexpr (X_LDSM && DK % 64 == 0) rows_times_rows_t_x4<DK>(acc, A, r0, Mop + n0 * ld_m, lane);
    else rows_times_rows_t<DK>(acc, A, r0, Mop + n0 * ld_m, lane);   // M^T's rows are M's columns
    const float coef[2] = {row_coef<REV>(rows[0], L, lg2, scale), row_coef<REV>(rows[1], L, lg2, scale)};
RETRO_SIMT_UNROLL
    for (int u = 0; u < 8; ++u)
RETRO_SIMT_UNROLL
        for (int e = 0; e < 4; ++e) acc[u][e] *= coef[e / 2];
    u32 pk[8][2];
    {
        float sc[8][4];
        // S = A Bt^T (rows of Bt past L are zeros), its fragments by ldmatrix at Da = 64 and 128 (at 128, 40 shared
        // loads a warp for S instead of 160; ptxas sm_90: no spill, no walk form across an occupancy line); at
        // Da = 32 and 96 a 64-column walk lost a block an SM with it (session 28)
        if constexpr (DK % 64 == 0) rows_times_rows_t_x4<DK>(sc, A, r0, Bt, lane);
        else rows_times_rows_t<DK>(sc, A, r0, Bt, lane);
        // opaque, so that the 32 distances, masks and decays a lane are recomputed each chunk rather than held in
        // registers across the walk
        mask_decay_pack<8, REV>(pk, sc, simt::opaque(rows[0] - 2 * t), lg2, scale);
    }
RETRO_SIMT_UNROLL
    for (int kk = 0; kk < kTile / 16; ++kk) {   // += P V, V's rows as B's k
        const u32 pa[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
        accumulate_kn(acc, pa, V, ld_v, kk * 16, n0, lane);
    }
    for (int r = 0; r < 2; ++r) {
        if (rows[r] >= L) continue;
        u16* o = out_chunk + rows[r] * out_stride + n0;
RETRO_SIMT_UNROLL
        for (int u = 0; u < 8; ++u)
            *reinterpret_cast<u32*>(o + u * 8 + 2 * t) = simt::pack_bf16x2(acc[u][2 * r], acc[u][2 * r + 1]);
    }
}

// grid (Dc / NC, B * H), chunk_threads<NC>() threads, chunk_smem<DA, NC, STAGES, DUAL, COPIES>() bytes; every operand
// 16-byte aligned. init (nullable): the state before the first chunk walked; fin (nullable): after the last.
// DUAL (Da = Dc = NC: one block a head): also out2 [B, T, H, Da] = the walk of (A2, C, B) over M^T, the same state
// seen from the other side, e.g. dk = walk(v, dO, q; G^T) beside dv = walk(k, q, dO; G) (a2: [B, T, H, Dc]).
template <int DA, int NC, bool REV, int STAGES, bool DUAL = false, int COPIES = 1>
RETRO_SIMT_KERNEL(chunk_threads<NC>())
retention_chunk_mma(u16* out, const u16* __restrict__ a, const u16* __restrict__ b, const u16* __restrict__ c,
                    const float* init, float* fin, ChunkArgs p, PairDecays decays, const u16* __restrict__ a2 = nullptr,
                    u16* out2 = nullptr) {
    static_assert(STAGES == 1 || STAGES == 2, "one stage, or two with the next chunk's loads in flight");
    static_assert(NC == 64 || NC == 128, "64 or 128 columns a block");
    static_assert(!DUAL || DA == NC, "the dual walk's second output has Da columns, all in the block");
    static_assert(COPIES == 1 || (COPIES == 2 && STAGES == 2), "two copies of M alternate with the two stages");
    constexpr int lda = row_ld<DA>(), ldc = NC + 8;
    constexpr int stage_elems = chunk_stage_bytes<DA, NC, DUAL>() / 2;
    u16* const smem = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* const Mt0 = smem + STAGES * stage_elems;   // bf16 M^T [NC][DA + 8], COPIES of them

    const ll bh = simt::block_y(), item = bh / p.H, h = bh % p.H;
    const int col0 = static_cast<int>(simt::block_x()) * NC;
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32;
    // (at NC = 64, warp < 4: written so that the compiler knows it, one base register for all three)
    const int r0 = NC == 64 ? warp * 16 : (warp % 4) * 16;   // this warp's 16 rows of the chunk
    const int c0 = NC == 64 ? 0 : (warp / 4) * 64;           // and 64 columns of the block's output
    const int mr0 = warp * 16;                                // its 16 rows of M^T (columns of M)
    const float lg2_head = decays.lg2[h];
    const ll chunks = (p.T + kTile - 1) / kTile;

    // M^T in C fragments: m[u][e] = M^T[mr0 + g + 8 (e >= 2)][8u + 2t + (e & 1)]
    float m[DA / 8][4];
    load_state<DA, DA>(m, init, p, bh, col0, mr0, 0, lane);
    write_state_copy<DA>(Mt0, m, mr0, 0, lane);

    if (STAGES == 2) issue_loads<DA, NC>(smem, REV ? chunks - 1 : 0, a, b, c, DUAL ? a2 : nullptr, item, h, col0, p);
    // one chunk of the walk from stage s (a compile-time stage: every shared-memory address of the products is then
    // a register and an immediate, where a stage index in a register cost ptxas ~200 registers of addresses)
    auto walk_chunk = [&](auto stage, ll step) {
        constexpr int s = decltype(stage)::value;
        // the copy of M this chunk reads (written by the chunk before) and the one its update writes: with two
        // copies the stage's index, which alternates as the chunks do
        const u16* Mt = Mt0 + (COPIES == 2 ? s : 0) * NC * lda;
        u16* Mt_next = Mt0 + (COPIES == 2 ? s ^ 1 : 0) * NC * lda;
        const ll chunk = REV ? chunks - 1 - step : step;
        const int L = static_cast<int>(p.T - chunk * kTile < kTile ? p.T - chunk * kTile : kTile);
        const float lg2 = simt::opaque(lg2_head);   // recomputed decays each chunk: registers go to the tiles
        if constexpr (STAGES == 2) {
            simt::async_wait_all();
            simt::sync_block();   // this chunk's stage and last chunk's M copy are everyone's; the other stage is free
            if (step + 1 < chunks) issue_loads<DA, NC>(smem + (s ^ 1) * stage_elems, REV ? chunk - 1 : chunk + 1, a, b, c, DUAL ? a2 : nullptr, item, h, col0, p);
        } else {
            simt::sync_block();   // last chunk's readers of the stage are done
            issue_loads<DA, NC>(smem, chunk, a, b, c, DUAL ? a2 : nullptr, item, h, col0, p);
            simt::async_wait_all();
            simt::sync_block();
        }
        const u16* As = smem + s * stage_elems;
        const u16* Bs = As + kTile * lda;
        const u16* Cs = Bs + kTile * lda;
        const ll row0 = (item * p.T + chunk * kTile) * p.H + h;   // the chunk's first row (b, t, h)
        // out = coef_n A M + P C
        chunk_output<DA, REV, false, NC == 128>(out + row0 * p.Dc + col0, p.H * p.Dc, As, Bs, Mt, lda, Cs, ldc, r0, c0, L, lg2,
                                     p.scale, lane);
        if constexpr (DUAL)   // out2 = coef_n A2 M^T + P2 B, P2 from A2 C^T (M^T's copy read as M^T itself)
            chunk_output<NC, REV, true>(out2 + row0 * DA, p.H * DA, Cs + kTile * ldc, Cs, Mt, lda, Bs, lda, r0, c0, L,
                                        lg2, p.scale, lane);

        if constexpr (COPIES == 1) simt::sync_block();   // every warp's X has read M's copy
        // M^T = gamma^L M^T + (C diag f)^T B
        update_state<DA, REV>(m, Cs, ldc, Bs, lda, mr0, 0, L, lg2, p.scale, lane);
        write_state_copy<DA>(Mt_next, m, mr0, 0, lane);
    };
    if constexpr (STAGES == 2) {
        for (ll step = 0; step < chunks; step += 2) {
            walk_chunk(std::integral_constant<int, 0>{}, step);
            if (step + 1 < chunks) walk_chunk(std::integral_constant<int, 1>{}, step + 1);
        }
    } else {
        for (ll step = 0; step < chunks; ++step) walk_chunk(std::integral_constant<int, 0>{}, step);
    }
    if (fin) store_state<DA, DA>(fin, m, p, bh, col0, mr0, 0, lane);
}

}  // namespace retro::retention::chunk_mma
