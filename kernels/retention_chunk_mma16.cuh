// Chunkwise retention's state walk with 16 warps a block (session 27, issue 19): the walk of retention_chunk_mma.cuh
// (same recurrences, same operands, same results bit for bit) for 128 output columns a block, two load stages and two
// copies of the state, with twice the warps at half the registers each. Session 23's ncu found the 8-warp walk
// latency-bound: one block an SM at 255 registers a thread, two warps a scheduler, no eligible warp 61 % of cycles.
// Here 512 threads at <= 128 registers: four warps a scheduler to hide each other's mma and shared-memory latency.
// Work of warp w (strip s = w % 4, slice q = w / 4):
//   - output rows [16s, 16s + 16), columns [32q, 32q + 32): X = A M (M's columns from M^T's bf16 copy, rows
//     [32q, +32)), times coef_n, plus P C over the strip's key slices on the causal side;
//   - P's slice: keys [16q, 16q + 16) of the strip's rows, S = A B^T (16 x 16), masked, decayed, scaled and rounded
//     to bf16 in registers: exactly one A fragment of P (kk = q), which the warp stores in its fragment layout to
//     shared memory (Ps, 512 bytes a fragment, conflict-free) for the strip's other three warps. A slice wholly off
//     the causal side (forward q > s, reverse q < s) is neither computed nor read. A named barrier a strip (4 warps)
//     then hands the slices over: the 8-warp walk's two warps a strip each computed the strip's whole S (16 x 64);
//     here each S entry is computed once, and P C skips the zero slices;
//   - state: M^T rows [16 (w % 8), + 16) and columns [Da/2 (w / 8), + Da/2) (fp32 registers, Da/2 / 8 fragments),
//     updated as in the 8-warp walk (update_state), written to the next copy.
// Barriers a chunk: the block's one (the stage has landed and the last chunk's copy of M is written) and each
// strip's named one (its P slices are written). Ps is rewritten by chunk n + 1 only after the block barrier that
// every warp passes once done with chunk n's P, so one buffer serves. Every product sums in the 8-warp walk's order
// (a slice skipped adds exact zeros there), so the outputs and the final state equal it bit for bit (host test; on a
// GPU for finite inputs: a NaN or Inf in a skipped slice's C, or a -0 sum, is where the two could differ).
// Shared memory: the 8-warp walk's two stages and two copies plus 8 KB of P fragments (182,272 bytes at Da = 128: an
// H100 or H200, not an A100, which keeps the 8-warp walk there; at Da <= 96 an A100 can take it too).
// Compiled by nvcc (retention_chunkwise.cu, RETRO_RETENTION_KERNELS=mma16) and by the host compiler over
// tests/simt_host.h (tests/test_retention_chunk_host.cpp).
#pragma once

#include "retention_chunk_mma.cuh"

namespace retro::retention::chunk_mma {

constexpr int kWideColumns = 128, kWideThreads = 512;
constexpr int kWideStrips = 4, kWideSlices = 4;   // 16-row strips of the chunk, 16-key slices of P (and 32-column
                                                  // slices of the output)
constexpr int kWidePBytes = kWideStrips * kWideSlices * 4 * 32 * 4;   // one A fragment (4 registers x 32 lanes) each

template <int DA>
constexpr int chunk16_smem() {
    return chunk_smem<DA, kWideColumns, 2, false, 2>() + kWidePBytes;
}

// grid (Dc / 128, B * H), kWideThreads threads, chunk16_smem<DA>() bytes; operands as retention_chunk_mma's (not the
// dual walk).
template <int DA, bool REV>
RETRO_SIMT_KERNEL(kWideThreads)
retention_chunk_mma16(u16* out, const u16* __restrict__ a, const u16* __restrict__ b, const u16* __restrict__ c,
                      const float* init, float* fin, ChunkArgs p, PairDecays decays) {
    constexpr int NC = kWideColumns, lda = row_ld<DA>(), ldc = NC + 8;
    constexpr int MCOLS = DA / 2;   // M^T's columns a warp holds
    static_assert(MCOLS % 16 == 0, "Da a multiple of 32");
    constexpr int stage_elems = chunk_stage_bytes<DA, NC>() / 2;
    u16* const smem = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* const Mt0 = smem + 2 * stage_elems;                       // two bf16 copies of M^T [NC][DA + 8]
    u32* const Ps = reinterpret_cast<u32*>(Mt0 + 2 * NC * lda);   // P's A fragments [strip][slice][register][lane]

    const ll bh = simt::block_y(), item = bh / p.H, h = bh % p.H;
    const int col0 = static_cast<int>(simt::block_x()) * NC;
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int strip = warp % kWideStrips, slice = warp / kWideStrips;
    const int r0 = strip * 16, n0 = slice * 32, j0 = slice * 16;   // output rows, output columns, P's keys
    const int mr0 = (warp % 8) * 16, k0 = (warp / 8) * MCOLS;      // the warp's block of M^T
    // P's slice has entries on the causal side (forward j <= i, reverse j >= i)
    const bool slice_live = REV ? slice >= strip : slice <= strip;
    const float lg2_head = decays.lg2[h];
    const ll chunks = (p.T + kTile - 1) / kTile;

    float m[MCOLS / 8][4];
    load_state<DA, MCOLS>(m, init, p, bh, col0, mr0, k0, lane);
    write_state_copy<DA, MCOLS>(Mt0, m, mr0, k0, lane);
    issue_loads<DA, NC, kWideThreads>(smem, REV ? chunks - 1 : 0, a, b, c, nullptr, item, h, col0, p);

    // one chunk from stage s (compile-time, as in retention_chunk_mma), reading M's copy s, writing copy s ^ 1
    auto walk_chunk = [&](auto stage, ll step) {
        constexpr int s = decltype(stage)::value;
        const u16* Mt = Mt0 + s * NC * lda;
        u16* Mt_next = Mt0 + (s ^ 1) * NC * lda;
        const ll chunk = REV ? chunks - 1 - step : step;
        const int L = static_cast<int>(p.T - chunk * kTile < kTile ? p.T - chunk * kTile : kTile);
        const float lg2 = simt::opaque(lg2_head);
        simt::async_wait_all();
        simt::sync_block();   // this chunk's stage and last chunk's M copy are everyone's; the other stage is free
        if (step + 1 < chunks)
            issue_loads<DA, NC, kWideThreads>(smem + (s ^ 1) * stage_elems, REV ? chunk - 1 : chunk + 1, a, b, c, nullptr,
                                              item, h, col0, p);
        const u16* As = smem + s * stage_elems;
        const u16* Bs = As + kTile * lda;
        const u16* Cs = Bs + kTile * lda;

        // P's slice: S = A B^T for the strip's rows and keys [j0, j0 + 16), into Ps as the A fragment kk = slice
        u32* const P_strip = Ps + strip * kWideSlices * 4 * 32;
        if (slice_live) {
            float sc[2][4];
            rows_times_rows_t_x4<DA>(sc, As, r0, Bs + j0 * lda, lane);   // (rows of B past L are zeros)
            u32 pk[2][2];
            mask_decay_pack<2, REV>(pk, sc, simt::opaque(r0 + g - 2 * t - j0), lg2, p.scale);
            u32* dst = P_strip + slice * 4 * 32 + lane;
            dst[0] = pk[0][0];
            dst[32] = pk[0][1];
            dst[64] = pk[1][0];
            dst[96] = pk[1][1];
        }
        // X = A M for the warp's 32 columns (M^T's rows n0..), times coef_n, while the strip's slices come in
        float acc[4][4];
        rows_times_rows_t_x4<DA>(acc, As, r0, Mt + n0 * lda, lane);
        const float coef[2] = {row_coef<REV>(r0 + g, L, lg2, p.scale), row_coef<REV>(r0 + g + 8, L, lg2, p.scale)};
RETRO_SIMT_UNROLL
        for (int u = 0; u < 4; ++u)
RETRO_SIMT_UNROLL
            for (int e = 0; e < 4; ++e) acc[u][e] *= coef[e / 2];
        // the strip's P slices are written: bar.sync orders the shared-memory stores before it for the four warps
        // that take part (the asm's memory clobber keeps the compiler from moving them across); ids 1..4 (barrier 0
        // is sync_block's), given in a register, so ptxas reserves all 16 (one 512-thread block an SM anyway)
        simt::sync_named(1 + strip, kWideSlices * 32);
RETRO_SIMT_UNROLL
        for (int kk = 0; kk < kWideSlices; ++kk) {   // += P C over the live slices, C's rows as B's k
            if (REV ? kk < strip : kk > strip) continue;
            const u32* src = P_strip + kk * 4 * 32 + lane;
            const u32 pa[4] = {src[0], src[32], src[64], src[96]};
            accumulate_kn(acc, pa, Cs, ldc, kk * 16, n0, lane);
        }
        const ll row0 = (item * p.T + chunk * kTile) * p.H + h;   // the chunk's first row (b, t, h)
        u16* const out_chunk = out + row0 * p.Dc + col0 + n0;
        for (int r = 0; r < 2; ++r) {
            const int n = r0 + g + 8 * r;
            if (n >= L) continue;
            u16* o = out_chunk + n * p.H * p.Dc;
RETRO_SIMT_UNROLL
            for (int u = 0; u < 4; ++u)
                *reinterpret_cast<u32*>(o + u * 8 + 2 * t) = simt::pack_bf16x2(acc[u][2 * r], acc[u][2 * r + 1]);
        }
        update_state<MCOLS, REV>(m, Cs, ldc, Bs, lda, mr0, k0, L, lg2, p.scale, lane);
        write_state_copy<DA, MCOLS>(Mt_next, m, mr0, k0, lane);
    };
    for (ll step = 0; step < chunks; step += 2) {
        walk_chunk(std::integral_constant<int, 0>{}, step);
        if (step + 1 < chunks) walk_chunk(std::integral_constant<int, 1>{}, step + 1);
    }
    if (fin) store_state<DA, MCOLS>(fin, m, p, bh, col0, mr0, k0, lane);
}

}  // namespace retro::retention::chunk_mma
