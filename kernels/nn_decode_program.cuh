// A fused decode step's device code and its plan (kernels/nn_decode_program_cuda.cu launches it; the method is
// described there): decode_program_body walks a recorded step's ops (nn/decode_program.h), each op the device code of
// the kernel its NnBackend call launches, with a grid barrier between phases and L2 prefetches of the coming weights;
// plan_decode_program lays out, on the host, the weights' prefetch stream and each op's schedule. Written against
// kernels/simt.cuh, so the host emulator runs the whole step as a cooperative launch (tests/test_nn_decode_program_host.cpp:
// its bits against the same ops launched one by one, every block order and warp schedule).
// provides: StreamPiece, OpSchedule, DecodeProgramPlan, plan_decode_program, decode_program_body
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "nn/decode_program.h"
#include "nn/rmsnorm.h"
#include "nn_attention_decode.cuh"
#include "nn_gemv.cuh"
#include "nn_row_copies.cuh"
#include "nn_rows.cuh"
#include "simt.cuh"

namespace retro::nn::detail::program {

using ll = long long;
constexpr float kEps = static_cast<float>(RMSNORM_EPS);   // the few-row GEMV's and the rows kernel's eps
constexpr ll kPrefetchMaxBytes = 16ll << 20;              // of an op's weights in the prefetch stream (L2: 50 MB)

// The weights of the step's GEMV ops form one stream, op after op (each op's first kPrefetchMaxBytes: a matrix larger
// than that, e.g. a 172M config's 98 MB logits, would only evict what comes before it); op i asks L2, as it starts, for
// the stream's bytes [from, to): everything up to the end of op i + 1's weights plus a window beyond
// (RETRO_DECODE_PREFETCH_MB, 16), less what earlier ops asked for. So DRAM keeps streaming the coming ops' weights
// while the grid works on L2-resident ones and waits at barriers (the weights depend on nothing a step computes).
struct StreamPiece {   // one op's part of the stream
    const char* w;
    ll begin, bytes;   // stream offset, bytes
};
struct OpSchedule {   // op i: the stream's bytes it asks for, and whether it waits at a grid barrier first
    ll from, to;
    int barrier_before;           // nn::decode_barriers: 0 where the op joins the phase of the ops before it
    int piece_first, piece_end;   // the pieces [first, end) that [from, to) overlaps: the device walks only these
};
struct DecodeProgramPlan {
    std::vector<StreamPiece> pieces;
    std::vector<OpSchedule> schedule;   // one an op
};

// The prefetch stream and each op's schedule for `p`, with `window` bytes of look-ahead.
inline DecodeProgramPlan plan_decode_program(const DecodeProgram& p, ll window) {
    DecodeProgramPlan plan;
    std::vector<ll> op_end(p.ops.size());   // stream offset at the end of each op's weights
    ll total = 0;
    for (std::size_t i = 0; i < p.ops.size(); i++) {
        const DecodeOp& op = p.ops[i];
        if (decode_op_is_gemv(op.kind)) {
            const ll bytes = std::min<ll>(op.I * op.O * static_cast<ll>(sizeof(float)), kPrefetchMaxBytes);
            plan.pieces.push_back({reinterpret_cast<const char*>(op.W), total, bytes});
            total += bytes;
        }
        op_end[i] = total;
    }
    const std::vector<bool> barriers = decode_barriers(p);
    plan.schedule.resize(p.ops.size());
    ll asked = 0;
    for (std::size_t i = 0; i < p.ops.size(); i++) {
        const ll next_end = op_end[std::min(i + 1, p.ops.size() - 1)];
        const ll to = std::min(total, next_end + window);
        plan.schedule[i] = {asked, std::max(asked, to), barriers[i] ? 1 : 0, 0, 0};
        asked = std::max(asked, to);
    }
    // each op's pieces, found here once: every thread scanning all of them before every op (30-70 pieces, two loads
    // each) cost an estimated 0.5 µs an op on the step's critical path (a helper's review, session 55)
    const int n_pieces = static_cast<int>(plan.pieces.size());
    for (OpSchedule& s : plan.schedule) {
        int k = 0;
        while (k < n_pieces && plan.pieces[k].begin + plan.pieces[k].bytes <= s.from) k++;
        s.piece_first = k;
        while (k < n_pieces && plan.pieces[k].begin < s.to) k++;
        s.piece_end = s.to > s.from ? k : s.piece_first;
    }
    return plan;
}

// I^-1/2 as the host computes it for the launched kernels (double, then rounded once: both correctly rounded)
RETRO_SIMT_DEVICE float inverse_sqrt_of(ll I) { return static_cast<float>(1.0 / sqrt(static_cast<double>(I > 1 ? I : 1))); }

RETRO_SIMT_DEVICE bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// the few-row GEMV as launch_gemv_n picks it: float4s where I % 4 == 0 and W (and x, without a norm) are aligned
template <int NR>
RETRO_SIMT_DEVICE void gemv_op(float* y, const float* x, const float* W, const float* b, const float* res,
                               const float* gamma, ll I, ll O, gemv::GemvOut out, const gemv::GemvRotary& rot) {
    const bool norm = gamma != nullptr, vec4 = I % 4 == 0 && aligned16(W) && (norm || aligned16(x));
    const float scale = inverse_sqrt_of(I);
    const int o = static_cast<int>(out);
    if (norm) {
        if (vec4) gemv::linear_rows_gemv_body<NR, true, true>(y, nullptr, x, W, b, res, gamma, I, O, o, scale, kEps, rot);
        else gemv::linear_rows_gemv_body<NR, false, true>(y, nullptr, x, W, b, res, gamma, I, O, o, scale, kEps, rot);
    } else {
        if (vec4) gemv::linear_rows_gemv_body<NR, true, false>(y, nullptr, x, W, b, res, gamma, I, O, o, scale, kEps, rot);
        else gemv::linear_rows_gemv_body<NR, false, false>(y, nullptr, x, W, b, res, gamma, I, O, o, scale, kEps, rot);
    }
}

// One op, as the kernel its NnBackend call launches runs it (grid-stride: any grid gives its bits).
template <int NR>
RETRO_SIMT_DEVICE void run_op(const DecodeOp& op) {
    switch (op.kind) {
        case DecodeOpKind::embedding_position:
            copies::embedding_rows(op.out, op.ids, op.table, op.N, op.O, op.index, op.pos_table);
            break;
        case DecodeOpKind::linear:
            gemv_op<NR>(op.out, op.x, op.W, op.b, nullptr, nullptr, op.I, op.O, gemv::GemvOut::plain, {});
            break;
        case DecodeOpKind::rmsnorm_linear:
            gemv_op<NR>(op.out, op.x, op.W, op.b, nullptr, op.gamma, op.I, op.O,
                        op.gelu ? gemv::GemvOut::gelu : gemv::GemvOut::plain, {});
            break;
        case DecodeOpKind::linear_residual:
            gemv_op<NR>(op.out, op.x, op.W, op.b, op.res, nullptr, op.I, op.O, gemv::GemvOut::residual, {});
            break;
        case DecodeOpKind::linear_rotary: {
            const gemv::GemvRotary rot{op.rot.table.cos, op.rot.table.sin, static_cast<int>(op.rot.heads),
                                       static_cast<int>(op.rot.D), static_cast<int>(op.rot.table.rot_dim),
                                       static_cast<int>(op.rot.scaled_heads), op.rot.scale};
            gemv_op<NR>(op.out, op.x, op.W, op.b, nullptr, op.gamma, op.I, op.O, gemv::GemvOut::rotary, rot);
            break;
        }
        case DecodeOpKind::rmsnorm:
            rows::rmsnorm_forward_rows<false>(op.out, op.norm, const_cast<float*>(op.x), nullptr, nullptr, op.gamma,
                                              op.N, op.I, inverse_sqrt_of(op.I), kEps, nullptr);
            break;
        case DecodeOpKind::attention_decode:
            decode::attention_decode_rows(op.out, op.cache.workspace, op.x, op.cache, op.index, op.seq, op.N, op.heads,
                                          op.D, decode::attention_decode_splits(op.cache.L),
                                          decode::attention_decode_vec4(op.D, op.cache.kcache));
            break;
        case DecodeOpKind::scatter_rows: copies::scatter_rows_elements(op.out, op.x, op.index, op.N, op.I); break;
        case DecodeOpKind::zero: copies::zero_elements(op.out, op.I); break;
        case DecodeOpKind::residual_sum: copies::sum_elements(op.out, op.x, op.res, op.I); break;
    }
}

// this block's share of the stream's bytes [span.from, span.to) into L2, 128-byte lines over every thread of the grid
RETRO_SIMT_DEVICE void prefetch_span(const StreamPiece* __restrict__ pieces, int pieces_n, const OpSchedule& span) {
    if (span.to <= span.from) return;
    const ll t = simt::global_thread(), threads = simt::grid_threads();
    const int k_end = span.piece_end < pieces_n ? span.piece_end : pieces_n;
    for (int k = span.piece_first; k < k_end; k++) {
        const StreamPiece pc = pieces[k];
        const ll a = span.from > pc.begin ? span.from : pc.begin, end = pc.begin + pc.bytes,
                 b = span.to < end ? span.to : end;
        if (a >= b) continue;
        for (ll line = (a - pc.begin) / 128 + t; line * 128 < b - pc.begin; line += threads)
            simt::prefetch_l2(pc.w + line * 128);
    }
}

// The step: every thread of a cooperative grid (at most what fits at once) walks the ops in order; a grid barrier
// where the op reads or writes what an op of the phase before wrote (or writes what it read), else only the block's
// own (its shared memory: the norm prologue's rows, attention's arrays). Dynamic shared memory: the largest norm
// prologue's (gemv::smem_bytes).
template <int NR>
RETRO_SIMT_DEVICE void decode_program_body(const DecodeOp* __restrict__ ops, int n, const StreamPiece* __restrict__ pieces,
                                           int pieces_n, const OpSchedule* __restrict__ schedule) {
    for (int i = 0; i < n; i++) {
        if (i > 0) {
            if (schedule[i].barrier_before) simt::grid_sync();
            else simt::sync_block();
        }
        if (i + 1 == n) simt::launch_dependents();   // the sampler after the step may start launching (it waits)
        prefetch_span(pieces, pieces_n, schedule[i]);
        run_op<NR>(ops[i]);
    }
}

}  // namespace retro::nn::detail::program
