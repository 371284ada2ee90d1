// The fused (flash-style) attention's kernels on raw mma.sync (m16n8k16, bf16 operands, fp32 accumulation), with the
// score tile S, the probabilities P and dS kept in registers: the C fragments of one product are the A fragments of
// the next (kernels/simt.cuh lays the fragments out), so nothing of a 64 x 64 tile goes through shared memory. The
// algorithm is FlashAttention-2's (Dao 2023, Algorithms 1 and 2) as in the wmma kernels of
// kernels/nn_flash_attention_cuda.cu, which these replace (the same interface and rounding points; the stash for
// backward is now lse and O's bf16 copy, and Delta = rowsum(bf16(dO) bf16(O)) as FlashAttention-2's):
//   forward: a block per 64 queries of one (item, head), warp w owns rows [16w, 16w + 16); walk the key blocks (to
//            the diagonal when causal) keeping each row's running max m and sum l of exp(s - m) (l sums the
//            bf16-rounded p that P V multiplies) and O in fp32 registers; out = O / l, lse = m + log l.
//   dQ:      a block per 64 queries walks the key blocks: dS = P (dP - Delta), P = exp(S - lse), dP = dO V^T;
//            dQ += dS K.
//   dK, dV:  a block per 64 keys, warp w owns keys [16w, 16w + 16), walks the query blocks that see them with S^T =
//            K Q^T and dP^T = V dO^T: dV += P^T dO, dK += dS^T Q.
// Beyond the decoder's causal self-attention they take nn/attention.h's other cases (CCA, the encoder): Nq queries
// against Nk keys, a learned null key/value per head ahead of the keys (virtual key 0; its gradients come out of the
// dK/dV kernel as that virtual row, one per (item, head), for the caller to sum over items), and a key mask. A
// masked score is -FLT_MAX as in the reference (a row whose every key is masked averages all Nk values uniformly;
// its lse is stored as +inf and backward uses p = 1/Nk there), masked entries pass no gradient (dS = 0), and
// positions past Nq or the keys are -inf (no part of any sum). Causal only with Nq = Nk, no null, no mask.
// No atomics: every sum has a fixed order, a run repeats bit for bit. The queries arrive scaled (S = Q K^T).
// The operands q, k, v, dO are fp32 (rounded to bf16 as each tile is loaded) or, template In = u16, bf16 copies made
// once by the launcher (tiles by cp.async; attention without a null column or key mask): the same bits either way.
// Shared memory holds bf16 tiles of 64 rows (stride D + 8: a fragment load's 8 x 4 lanes on 32 different banks);
// where a product needs the operand with the head dimension as its columns (V in P V, K in dS K, Q and dO in the
// dK/dV products), ldmatrix.trans reads it from the same rows (until 2026-11-27 a transposed copy was made from a
// second read of the rows, every step).
// Compiled by nvcc for the GPU (kernels/nn_flash_attention_cuda.cu) and by the host compiler over tests/simt_host.h
// (tests/test_flash_mma_host.cpp), which runs every thread of a block and checks the kernels against attention in
// double on a machine without a GPU.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "mma_tiles.cuh"

namespace retro::nn::flash {

using namespace retro::mma_tiles;

struct FlashDims {
    ll B, Nq, Nk, H, D, HD;   // items, queries, keys, heads, head size, H * D (a row's stride in q, k, v, out)
    bool causal;              // query i sees keys j <= i (Nq = Nk)
    bool null_kv;             // virtual key 0 is null_k / null_v [H*D]; virtual key jv > 0 is key jv - 1
    const float* null_k;
    const float* null_v;
    const std::uint8_t* key_mask;   // [B, Nk], 0 = masked; or null
    bool classes_every_step = false;   // the backward classifies every entry (RETRO_UNFUSE=flash_fast_steps: the
                                       // A/B of its branch-free steps; the same floats either way)
    RETRO_SIMT_HOST_DEVICE ll keys() const { return Nk + (null_kv ? 1 : 0); }
};

// Dynamic shared memory of each kernel (bytes). STAGES = 2 (bf16 operands only: their tiles come by cp.async) keeps
// two of the tiles a step loads, so that the next step's copies fly while this one computes.
// Besides the tiles: the backward kernels' 64 query rows' lse and Delta (fp32), the block's 64 key-mask flags.
constexpr int kRowStatBytes = 2 * kTile * 4, kMaskBytes = kTile;
template <int D, int STAGES = 1>
constexpr int forward_smem() {   // Q, then K, V and the flags a stage
    return row_tile_bytes<D>() + STAGES * (2 * row_tile_bytes<D>() + kMaskBytes);
}
template <int D, int STAGES = 1>
constexpr int dq_smem() {   // Q, dO, lse and Delta, then K, V and the flags a stage
    return 2 * row_tile_bytes<D>() + kRowStatBytes + STAGES * (2 * row_tile_bytes<D>() + kMaskBytes);
}
template <int D, int STAGES = 1>
constexpr int dkdv_smem() {   // K, V and the flags, then Q, dO, lse and Delta a stage
    return 2 * row_tile_bytes<D>() + kMaskBytes + STAGES * (2 * row_tile_bytes<D>() + kRowStatBytes);
}

// Runs body(stage, i) for i = first .. last with stage (i - first) % STAGES as a compile-time constant
// (std::integral_constant): the loop unrolled by STAGES, so that each stage's shared-memory addresses are a register
// plus an immediate (as kernels/retention_chunk_mma.cuh's walk; a stage index in a register costs addresses).
template <int STAGES, typename Body>
RETRO_SIMT_DEVICE void staged_loop(ll first, ll last, const Body& body) {
    static_assert(STAGES == 1 || STAGES == 2, "one or two stages");
    for (ll i = first; i <= last; i += STAGES) {
        body(std::integral_constant<int, 0>{}, i);
        if constexpr (STAGES == 2)
            if (i + 1 <= last) body(std::integral_constant<int, 1>{}, i + 1);
    }
}

// The start of a walk step: with two stages, wait for this step's copies (issued the step before), a barrier (they
// are everyone's, and the other stage's readers are done), then issue_next() when there is a next step, its copies in
// flight while this one computes; with one stage, a barrier (the stage's readers are done), issue_this(), wait, a
// barrier.
template <int STAGES, typename IssueThis, typename IssueNext>
RETRO_SIMT_DEVICE void begin_step(bool has_next, const IssueThis& issue_this, const IssueNext& issue_next) {
    if constexpr (STAGES == 2) {
        simt::async_wait_all();
        simt::sync_block();
        if (has_next) issue_next();
    } else {
        simt::sync_block();
        issue_this();
        simt::async_wait_all();
        simt::sync_block();
    }
}

// Where query i and virtual key jv meet: visible, masked (the key mask or the future: score -FLT_MAX, no gradient), or
// hidden (past the queries or the keys: in no sum). key_off: the key's mask flag (load_key_flags).
enum EntryClass : int { kVisible = 0, kMasked = 1, kHidden = 2 };
RETRO_SIMT_DEVICE int entry_class(ll i, ll jv, bool key_off, const FlashDims& m) {
    if (i >= m.Nq || jv >= m.keys()) return kHidden;
    if (key_off || (m.causal && jv > i)) return kMasked;   // causal: no null, jv is the key
    return kVisible;
}

// Row sources of a tile: query/dO row i of an (item, head) operand [Nq, H*D] (offset to the head), and virtual key
// jv of k or v [Nk, H*D] with the null row ahead; null past the end (the tile row is zero). In: the operands' type,
// float (rounded to bf16 as a tile is loaded) or u16 (bf16 bits, copied by cp.async: the launcher's bf16 copies of
// the operands, for attention without a null column or key mask).
template <typename In>
struct QueryRows {
    using Elem = In;
    const In* base;
    RETRO_SIMT_DEVICE const In* operator()(ll i, const FlashDims& m) const { return i < m.Nq ? base + i * m.HD : nullptr; }
};
template <typename In>
struct KeyRows {
    using Elem = In;
    const In* base;
    const In* null_row;   // [D] of this head, or null
    RETRO_SIMT_DEVICE const In* operator()(ll jv, const FlashDims& m) const {
        if (jv >= m.keys()) return nullptr;
        if (m.null_kv) return jv == 0 ? null_row : base + (jv - 1) * m.HD;
        return base + jv * m.HD;
    }
};

// Rows [r0, r0 + 64) of `rows` as bf16 tile[64][D + 8] (a missing row is zero). fp32 rows: four columns a thread,
// read as one float4 where the row is 16-byte aligned (every row of a cudaMalloc'd [., H*D] operand is) and stored
// as 8 bytes. bf16 rows (16-byte aligned: the launcher's copies): cp.async, 16 bytes a thread, complete after
// simt::async_wait_all (each kernel waits before the barrier that follows its loads).
template <int D, typename Rows>
RETRO_SIMT_DEVICE void load_rows(u16* tile, const Rows& rows, ll r0, const FlashDims& m) {
    constexpr int ld = row_ld<D>();
    if constexpr (std::is_same_v<typename Rows::Elem, u16> && D == 64) {
        // a thread the same 16 bytes of every rows_per_pass-th row, the trip count a constant: the loop unrolls
        // whole (with e < kTile D / 8 stepping by kThreads it was a runtime loop, unrolled by 4 with a remainder:
        // ~430 instructions a step for the two-stage dK/dV kernel's 8 copies, ~180 now; nvdisasm, session 28).
        // D = 64 only: at 32 and 128 ptxas then spilled in the one-stage dK/dV and one-block kernels (4-8 bytes)
        constexpr int per_row = D / 8, rows_per_pass = kThreads / per_row;
        static_assert(kThreads % per_row == 0 && kTile % rows_per_pass == 0, "whole rows a pass");
        const int r = simt::thread_x() / per_row, c = 8 * (simt::thread_x() % per_row);
RETRO_SIMT_UNROLL
        for (int k = 0; k < kTile / rows_per_pass; ++k) {
            const u16* src = rows(r0 + r + k * rows_per_pass, m);
            simt::copy16_async(tile + (r + k * rows_per_pass) * ld + c, src ? src + c : rows.base,
                               src != nullptr);   // zeros past the end
        }
    } else if constexpr (std::is_same_v<typename Rows::Elem, u16>) {
        for (int e = simt::thread_x(); e < kTile * D / 8; e += kThreads) {
            const int r = e / (D / 8), c = 8 * (e % (D / 8));
            const u16* src = rows(r0 + r, m);
            simt::copy16_async(tile + r * ld + c, src ? src + c : rows.base, src != nullptr);   // zeros past the end
        }
    } else {
        for (int e = simt::thread_x(); e < kTile * D / 4; e += kThreads) {
            const int r = e / (D / 4), c = 4 * (e % (D / 4));
            const float* src = rows(r0 + r, m);
            float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (src && reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {
                simt::load_float4(x, src + c);
            } else if (src) {
                for (int i = 0; i < 4; ++i) x[i] = src[c + i];
            }
            u32* dst = reinterpret_cast<u32*>(tile + r * ld + c);   // 8-byte aligned: ld and c are multiples of 4
            dst[0] = simt::pack_bf16x2(x[0], x[1]);
            dst[1] = simt::pack_bf16x2(x[2], x[3]);
        }
    }
}

// flags[e] = 1 when virtual key jv0 + e of item b is masked by the key mask (never the null key).
RETRO_SIMT_DEVICE void load_key_flags(unsigned char* flags, ll jv0, ll b, const FlashDims& m) {
    for (int e = simt::thread_x(); e < kTile; e += kThreads) {
        const ll jv = jv0 + e, j = jv - (m.null_kv ? 1 : 0);
        flags[e] = m.key_mask && j >= 0 && j < m.Nk && !m.key_mask[b * m.Nk + j] ? 1 : 0;
    }
}

// Key block kb's K and V tiles and mask flags into a stage laid out [K][V][flags] (the forward's and dQ's walks).
template <int D, typename In>
RETRO_SIMT_DEVICE void load_key_stage(unsigned char* stage, const KeyRows<In>& krows, const KeyRows<In>& vrows, ll kb,
                                      ll b, const FlashDims& m) {
    u16* Ks = reinterpret_cast<u16*>(stage);
    load_rows<D>(Ks, krows, kb * kTile, m);
    load_rows<D>(Ks + kTile * row_ld<D>(), vrows, kb * kTile, m);
    load_key_flags(stage + 2 * row_tile_bytes<D>(), kb * kTile, b, m);
}

// Row i of an output [Nq or Nk, H*D] (offset to the head), or null past `count` rows.
RETRO_SIMT_DEVICE float* out_row(float* base, ll i, ll count, const FlashDims& m) {
    return i < count ? base + i * m.HD : nullptr;
}


// The (item, head) of block column x and where its operands start: queries/outputs [Nq, H*D], keys/values [Nk, H*D].
struct Head {
    ll bh, b, h, q_base, k_base;
};
RETRO_SIMT_DEVICE Head head_of(ll bh, const FlashDims& m) {
    const ll b = bh / m.H, h = bh % m.H;
    return {bh, b, h, b * m.Nq * m.HD + h * m.D, b * m.Nk * m.HD + h * m.D};
}

// Where virtual key jv's gradient row goes in dk (or dv) [B, Nk, H*D]: the null key's share for this item
// (jv = 0 with null_kv: a row of null_items [B, H*D], for the caller to sum over items), key jv - 1 (null_kv) or jv,
// or nowhere past the keys (null).
RETRO_SIMT_DEVICE float* key_grad_row(float* base, float* null_items, ll jv, const Head& hd, const FlashDims& m) {
    if (m.null_kv && jv == 0) return null_items + hd.b * m.HD + hd.h * m.D;
    if (jv >= m.keys()) return nullptr;
    return base + hd.k_base + (jv - (m.null_kv ? 1 : 0)) * m.HD;
}

// This head's null key or value row of a kernel over In operands: the fp32 row (null_kv) or none (the bf16 copies come
// without a null column: the launcher's condition).
template <typename In>
RETRO_SIMT_DEVICE const In* null_row_of(const float* null_rows, const Head& hd, const FlashDims& m) {
    if constexpr (std::is_same_v<In, float>) return m.null_kv ? null_rows + hd.h * m.D : nullptr;
    else {
        (void)null_rows, (void)hd, (void)m;
        return nullptr;
    }
}

// Grids of the forward, dQ and dK/dV kernels: (B * H, blocks of 64 rows): the hardware starts blocks in x-fastest
// order, so every head's block y = 0 goes first. The query block of block y, the longest walks first: causal query
// block qb walks qb + 1 key blocks, so y = 0 is the last query block (for the dK/dV kernel key block y itself is
// the longest first). Before 2026-11-27 the grid was (blocks, B * H) in ascending order: a causal launch ended with
// its longest walks.
RETRO_SIMT_DEVICE ll longest_first_query_block(const FlashDims& m) {
    const ll blocks = (m.Nq + kTile - 1) / kTile;
    return m.causal ? blocks - 1 - simt::block_y() : simt::block_y();
}

// The last key block query block qb walks: the diagonal when causal (Nq = Nk), else every block.
RETRO_SIMT_DEVICE ll last_key_block(ll qb, const FlashDims& m) {
    const ll key_blocks = (m.keys() + kTile - 1) / kTile;
    return m.causal && qb < key_blocks - 1 ? qb : key_blocks - 1;
}

// How a (query block, key block) step classifies its entries: every entry visible (whole tiles, no key mask, off the
// causal diagonal); with DIAG, the causal diagonal of whole tiles without a key mask, where entry (query q0 + a, key
// q0 + b) is masked exactly when b > a — two tile offsets compared in 32 bits, the same classes entry_class gives
// there; else entry by entry (a key mask, a tile past the queries or keys, RETRO_UNFUSE=flash_fast_steps, and the
// diagonal without DIAG). Until session 29 the diagonal took entry_class's 64-bit tests entry by entry (nvdisasm,
// session 28: 153 ISETP in the dQ kernel's block).
enum StepKind : int { kStepPlain = 0, kStepDiagonal = 1, kStepClasses = 2 };
template <int KIND>
using StepKindT = std::integral_constant<int, KIND>;
template <bool DIAG>
RETRO_SIMT_DEVICE int step_kind(ll q0, ll jv0, const FlashDims& m) {
    if (m.key_mask || q0 + kTile > m.Nq || jv0 + kTile > m.keys() || m.classes_every_step) return kStepClasses;
    if (m.causal && q0 == jv0) return DIAG ? kStepDiagonal : kStepClasses;
    return kStepPlain;
}
// Runs body(StepKindT<kind>{}) with the step's kind as a compile-time constant (a branch the block takes alike).
template <bool DIAG, typename Body>
RETRO_SIMT_DEVICE void with_step_kind(int kind, const Body& body) {
    if (kind == kStepPlain) body(StepKindT<kStepPlain>{});
    else if (DIAG && kind == kStepDiagonal) body(StepKindT<DIAG ? kStepDiagonal : kStepClasses>{});
    else body(StepKindT<kStepClasses>{});
}
// Which kernels take the diagonal form: those over bf16 operands (the backend's causal self-attention; the fp32-operand
// forms serve CCA and the encoder, never causal in the model) at head sizes 64 and 128. Elsewhere the third form moved
// ptxas's allocation across occupancy lines for nothing (sm_90, session 29: the D = 32 forward 86 -> 128 registers,
// five blocks an SM to four; the fp32 D = 128 dQ 165 -> 242, three to two).
template <int D, typename In>
constexpr bool kDiagonalSteps = std::is_same_v<In, u16> && D >= 64;

// out [B, Nq, H*D] = softmax(Q K^T) V (out null: not written), its bf16 copy out_bf16 (for backward's Delta and, in
// the bf16 activations mode, the output projection; the stash in the caller's probabilities) and lse [B, H, Nq]
// (+inf for a row whose every key is masked); out_lo (or null): what the copy dropped, bf16(o - bf16(o)), for Delta
// where the null column or a key mask makes it cancel (flash_mma_delta); grid (B * H, ceil(Nq / 64)),
// kThreads threads, forward_smem<D, STAGES>() bytes.
template <int D, typename In = float, int STAGES = 1>
RETRO_SIMT_KERNEL(kThreads)
flash_mma_forward(float* __restrict__ out, u16* __restrict__ out_bf16, float* __restrict__ lse,
                  const In* __restrict__ q, const In* __restrict__ k, const In* __restrict__ v, FlashDims m,
                  u16* __restrict__ out_lo = nullptr) {
    static_assert(STAGES == 1 || std::is_same_v<In, u16>, "two stages need the cp.async loads of bf16 operands");
    constexpr int ld = row_ld<D>(), stage_bytes = 2 * row_tile_bytes<D>() + kMaskBytes;
    u16* Qs = reinterpret_cast<u16*>(simt::dynamic_smem());
    unsigned char* stages = reinterpret_cast<unsigned char*>(Qs + kTile * ld);   // [STAGES]: K, V, flags

    const Head hd = head_of(simt::block_x(), m);
    const ll qb = longest_first_query_block(m), q0 = qb * kTile;
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, t = lane % 4;
    const int lr[2] = {warp * 16 + lane / 4, warp * 16 + lane / 4 + 8};   // this lane's two queries in the block
    const ll rows[2] = {q0 + lr[0], q0 + lr[1]};
    const KeyRows<In> krows{k + hd.k_base, null_row_of<In>(m.null_k, hd, m)};
    const KeyRows<In> vrows{v + hd.k_base, null_row_of<In>(m.null_v, hd, m)};

    load_rows<D>(Qs, QueryRows<In>{q + hd.q_base}, q0, m);
    float o[D / 8][4];
RETRO_SIMT_UNROLL
    for (int u = 0; u < D / 8; ++u)
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) o[u][c] = 0.0f;
    float mrow[2] = {-INFINITY, -INFINITY};   // each row's running max (the same in its four lanes)
    float lrow[2] = {0.0f, 0.0f};             // this lane's part of each row's running sum
    float mref[2] = {0.0f, 0.0f};             // the max exp() was taken against (0 while a row has seen no key)

    const ll last = last_key_block(qb, m);
    if constexpr (STAGES == 2)
        if (last >= 0) load_key_stage<D>(stages, krows, vrows, 0, hd.b, m);   // (no step: no copy left unwaited)
    staged_loop<STAGES>(0, last, [&](auto stage, ll kb) {
        constexpr int sg = decltype(stage)::value;
        const u16* Ks = reinterpret_cast<const u16*>(stages + sg * stage_bytes);
        const u16* Vs = Ks + kTile * ld;
        const unsigned char* off = stages + sg * stage_bytes + 2 * row_tile_bytes<D>();
        const ll j0 = kb * kTile;
        begin_step<STAGES>(   // (the first step's wait also covers Q's copies)
            kb + 1 <= last, [&] { load_key_stage<D>(stages, krows, vrows, kb, hd.b, m); },
            [&] { load_key_stage<D>(stages + (sg ^ 1) * stage_bytes, krows, vrows, kb + 1, hd.b, m); });
        float s[8][4];
        rows_times_rows_t<D>(s, Qs, warp * 16, Ks, lane);
        constexpr bool diag = kDiagonalSteps<D, In>;
        with_step_kind<diag>(step_kind<diag>(q0, j0, m), [&](auto kind) {   // masked scores -FLT_MAX, hidden -inf
            constexpr int K = decltype(kind)::value;
            if constexpr (K != kStepPlain) {
RETRO_SIMT_UNROLL
                for (int n = 0; n < 8; ++n)
RETRO_SIMT_UNROLL
                    for (int c = 0; c < 4; ++c) {
                        const int e = n * 8 + 2 * t + (c & 1);
                        if constexpr (K == kStepDiagonal) {
                            if (e > lr[c / 2]) s[n][c] = -FLT_MAX;
                        } else {
                            const int cls = entry_class(rows[c / 2], j0 + e, off[e], m);
                            if (cls == kMasked) s[n][c] = -FLT_MAX;
                            if (cls == kHidden) s[n][c] = -INFINITY;
                        }
                    }
            }
        });
        float mx[2] = {mrow[0], mrow[1]};
RETRO_SIMT_UNROLL
        for (int n = 0; n < 8; ++n)
RETRO_SIMT_UNROLL
            for (int c = 0; c < 4; ++c) mx[c / 2] = fmaxf(mx[c / 2], s[n][c]);
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
        accumulate_p_rows<D>(o, pk, Vs, ld, lane);
    });
    float inv[2];
RETRO_SIMT_UNROLL
    for (int r = 0; r < 2; ++r) {
        lrow[r] += simt::shfl_xor(lrow[r], 1);
        lrow[r] += simt::shfl_xor(lrow[r], 2);
        inv[r] = lrow[r] > 0.0f ? 1.0f / lrow[r] : 0.0f;
    }
    if (out) {   // (null: the caller keeps only the bf16 copy, NnBackend::attention_output_bf16_offset)
        float* ob = out + hd.q_base;
        store_rows<D>(out_row(ob, rows[0], m.Nq, m), out_row(ob, rows[1], m.Nq, m), o, inv[0], inv[1], lane);
    }
    // the same values rounded, pairs as one 32-bit store (D and H*D are even); with out_lo the rounding's remainder
    // too (hi + lo holds o to about 16 bits), from the product rounded once (simt::mul_rn: no fma with the subtraction)
    u16* cb = out_bf16 + hd.q_base;
    for (int r = 0; r < 2; ++r)
        if (rows[r] < m.Nq)
RETRO_SIMT_UNROLL
            for (int u = 0; u < D / 8; ++u) {
                const float x0 = simt::mul_rn(o[u][2 * r], inv[r]), x1 = simt::mul_rn(o[u][2 * r + 1], inv[r]);
                const ll at = rows[r] * m.HD + u * 8 + 2 * t;
                *reinterpret_cast<u32*>(cb + at) = simt::pack_bf16x2(x0, x1);
                if (out_lo)
                    *reinterpret_cast<u32*>(out_lo + hd.q_base + at) =
                        simt::pack_bf16x2(x0 - simt::bf16_value(simt::bf16_bits(x0)),
                                          x1 - simt::bf16_value(simt::bf16_bits(x1)));
            }
    if (t == 0)
        for (int r = 0; r < 2; ++r)   // max -FLT_MAX: every key the row saw was masked (p = 1 / Nk each)
            if (rows[r] < m.Nq) lse[hd.bh * m.Nq + rows[r]] = mrow[r] == -FLT_MAX ? INFINITY : mref[r] + logf(lrow[r]);
}

// Delta [B, H, Nq]: Delta[bh, i] = sum_d bf16(dO[b, i, h*D + d]) O[b, i, h*D + d] with O the forward's bf16 copy
// (FlashAttention-2's Delta from bf16 dO and O), a warp per row; grid (ceil(B*H*Nq / 4)), kThreads threads. dO is
// rounded as dP = dO V^T sees it, so that where one key takes the whole row (p = 1: a CCA row whose neighbours are
// all masked, left with the null column; O is then that value's bf16 exactly) dP - Delta is 0 as in the
// reference, not the rounding of dO. o_lo (or null): the forward's out_lo, added to the copy. Where a row's
// probabilities sit mostly on one column (the null column, or few unmasked neighbours) dP - Delta cancels to a
// small dS, and the copy's rounding in Delta stays whole: the op harness's nn.flash_cca case had dnull_k at 6.6e-3
// of its rms from the copy alone (the H200 and the host emulator alike, session 49), 2.0e-3 with hi + lo on the
// host emulator (dq 2.35e-3 -> 1.78e-3).
template <typename O16>
RETRO_SIMT_KERNEL(kThreads)
flash_mma_delta(float* __restrict__ delta, const float* __restrict__ dout, const O16* __restrict__ o, FlashDims m,
                const O16* __restrict__ o_lo = nullptr) {
    const int lane = simt::thread_x() % 32;
    const ll r = simt::block_x() * kWarps + simt::thread_x() / 32;
    const bool in = r < m.B * m.H * m.Nq;
    float acc = 0.0f;
    if (in) {
        const ll bh = r / m.Nq, i = r % m.Nq, b = bh / m.H, h = bh % m.H;
        const ll at = (b * m.Nq + i) * m.HD + h * m.D;
        for (ll d = lane; d < m.D; d += 32) {   // (products of two bf16 values are exact: an fma gives the same sum)
            const float g = simt::bf16_value(simt::bf16_bits(dout[at + d]));
            acc += g * simt::bf16_value(o[at + d]);
            if (o_lo) acc += g * simt::bf16_value(o_lo[at + d]);
        }
    }
    for (int w = 16; w > 0; w >>= 1) acc += simt::shfl_xor(acc, w);
    if (in && lane == 0) delta[r] = acc;
}

// A backward block's 64 query rows of lse and Delta (0 past Nq): thread e < 64 fetches row q0 + e's pair into
// registers, then stores it; fetching a step ahead and storing after the step's products keeps the load's latency
// off the walk (the two-stage dK/dV kernel).
struct RowStats {
    float l = 0.0f, d = 0.0f;
};
RETRO_SIMT_DEVICE RowStats fetch_lse_delta(const float* __restrict__ lse, const float* __restrict__ delta, ll bh, ll q0,
                                           const FlashDims& m) {
    static_assert(kThreads >= kTile, "a thread a row");
    const int e = simt::thread_x();
    if (e < kTile && q0 + e < m.Nq) return {lse[bh * m.Nq + q0 + e], delta[bh * m.Nq + q0 + e]};
    return {};
}
RETRO_SIMT_DEVICE void store_lse_delta(float* Ls, float* Dl, const RowStats& v) {
    const int e = simt::thread_x();
    if (e < kTile) {
        Ls[e] = v.l;
        Dl[e] = v.d;
    }
}
RETRO_SIMT_DEVICE void load_lse_delta(float* Ls, float* Dl, const float* __restrict__ lse,
                                      const float* __restrict__ delta, ll bh, ll q0, const FlashDims& m) {
    store_lse_delta(Ls, Dl, fetch_lse_delta(lse, delta, bh, q0, m));
}

// p and dS = P (dP - Delta) of one entry: p = exp(s - lse), or 1 / Nk in a row whose every key is masked (lse +inf);
// masked entries pass no gradient, hidden ones are in no sum.
RETRO_SIMT_DEVICE void softmax_backward_entry(float& p, float& ds, float s, float dp, float l, float dl, int cls,
                                              const FlashDims& m) {
    p = 0.0f;
    ds = 0.0f;
    if (cls == kHidden) return;
    if (l == INFINITY) {
        p = 1.0f / static_cast<float>(m.Nk);
        return;
    }
    if (cls == kMasked) return;   // exp(-FLT_MAX - lse) = 0
    p = simt::exp2_fast((s - l) * kLog2e);
    ds = p * (dp - dl);
}

// One 16 x 64 slice held as C fragments: dS and P rounded to bf16 pairs, each where its output is given (a call
// for each lets a kernel use P before dS exists: fewer registers live at once). Entry (n, c):
// entry(StepKindT<KIND>, n, c, cls, l, dl) gives its class (as the step's kind decides it) and the lse and Delta it
// uses (a row's for dQ, a column's for dK/dV).
// kStepPlain (every entry visible, no key mask, so no row's lse is +inf): each entry p = exp(s - lse), dS = p (dP -
// Delta) with no branch (the class entry() computes is unused and compiled away); kStepDiagonal: the same, then 0 for
// p and dS where masked (selected, not branched); both the floats softmax_backward_entry gives.
template <int KIND, typename Entry>
RETRO_SIMT_DEVICE void softmax_backward_tile_as(u32 (*ds_out)[2], u32 (*p_out)[2], const float (&s)[8][4],
                                                const float (&dp)[8][4], const FlashDims& m, Entry&& entry) {
RETRO_SIMT_UNROLL
    for (int n = 0; n < 8; ++n) {
        float p[4], ds[4];
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) {
            int cls;
            float l, dl;
            entry(StepKindT<KIND>{}, n, c, cls, l, dl);
            if constexpr (KIND == kStepClasses) {
                softmax_backward_entry(p[c], ds[c], s[n][c], dp[n][c], l, dl, cls, m);
            } else {
                p[c] = simt::exp2_fast((s[n][c] - l) * kLog2e);
                ds[c] = p[c] * (dp[n][c] - dl);
                if constexpr (KIND == kStepDiagonal) {   // a masked entry's exp may be inf: selected away
                    p[c] = cls == kMasked ? 0.0f : p[c];
                    ds[c] = cls == kMasked ? 0.0f : ds[c];
                }
            }
        }
        if (ds_out) {
            ds_out[n][0] = simt::pack_bf16x2(ds[0], ds[1]);
            ds_out[n][1] = simt::pack_bf16x2(ds[2], ds[3]);
        }
        if (p_out) {
            p_out[n][0] = simt::pack_bf16x2(p[0], p[1]);
            p_out[n][1] = simt::pack_bf16x2(p[2], p[3]);
        }
    }
}

// The same with the step's kind (step_kind<DIAG>) decided once (a branch the block takes alike).
template <bool DIAG, typename Entry>
RETRO_SIMT_DEVICE void softmax_backward_tile(u32 (*ds_out)[2], u32 (*p_out)[2], const float (&s)[8][4],
                                             const float (&dp)[8][4], const FlashDims& m, int kind, Entry&& entry) {
    with_step_kind<DIAG>(kind, [&](auto k) {
        softmax_backward_tile_as<decltype(k)::value>(ds_out, p_out, s, dp, m, entry);
    });
}

// One key block of a query block's backward for warp `warp`'s 16 query rows (q0 + 16 warp, ...): S = Q K^T and dP =
// dO V^T from the tiles, dS = P (dP - Delta) as bf16 pairs (dsk) and P too where p_out is given, dQ += dS K (acc).
// Qs, dOs, Ks, Vs: [64][D + 8] tiles; Ls, Dl: the query rows' lse and Delta; off: the key block's mask flags.
// (S and dP by ldmatrix here, as the dK/dV kernel takes them, cost a block an SM in the one-block kernel and the
// one-stage dQ at D = 32, and 20 bytes of spill in the two-stage dQ at D = 64: ptxas sm_90, session 28.)
template <int D, bool DIAG = false>
RETRO_SIMT_DEVICE void query_rows_step(float (&acc)[D / 8][4], u32 (&dsk)[8][2], u32 (*p_out)[2], const u16* Qs,
                                       const u16* dOs, const u16* Ks, const u16* Vs, const float* Ls, const float* Dl,
                                       const unsigned char* off, ll q0, ll j0, const FlashDims& m, int warp, int lane) {
    const int g = lane / 4, t = lane % 4;
    const int lr[2] = {warp * 16 + g, warp * 16 + g + 8};   // this lane's two query rows within the block
    float s[8][4], dp[8][4];
    rows_times_rows_t<D>(s, Qs, warp * 16, Ks, lane);    // S = Q K^T
    rows_times_rows_t<D>(dp, dOs, warp * 16, Vs, lane);  // dP = dO V^T
    softmax_backward_tile<DIAG>(dsk, p_out, s, dp, m, step_kind<DIAG>(q0, j0, m),
                          [&](auto kind, int n, int c, int& cls, float& l, float& dl) {
                              constexpr int K = decltype(kind)::value;
                              const int e = n * 8 + 2 * t + (c & 1), r = lr[c / 2];   // entry (query r, key e)
                              if constexpr (K == kStepClasses) cls = entry_class(q0 + r, j0 + e, off[e], m);
                              else if constexpr (K == kStepDiagonal) cls = e > r ? kMasked : kVisible;
                              else cls = kVisible;
                              l = Ls[r];
                              dl = Dl[r];
                          });
    accumulate_p_rows<D>(acc, dsk, Ks, row_ld<D>(), lane);   // dQ += dS K
}

// dQ [B, Nq, H*D] for the 64 queries of block y (longest_first_query_block) of (item, head) x (the null key's share
// included); grid (B * H, ceil(Nq / 64)), dq_smem<D, STAGES>().
template <int D, typename In = float, int STAGES = 1>
RETRO_SIMT_KERNEL(kThreads)
flash_mma_backward_dq(float* __restrict__ dq, const In* __restrict__ q, const In* __restrict__ k,
                      const In* __restrict__ v, const In* __restrict__ dout, const float* __restrict__ lse,
                      const float* __restrict__ delta, FlashDims m) {
    static_assert(STAGES == 1 || std::is_same_v<In, u16>, "two stages need the cp.async loads of bf16 operands");
    constexpr int ld = row_ld<D>(), stage_bytes = 2 * row_tile_bytes<D>() + kMaskBytes;
    u16* Qs = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* dOs = Qs + kTile * ld;
    float* Ls = reinterpret_cast<float*>(dOs + kTile * ld);
    float* Dl = Ls + kTile;
    unsigned char* stages = reinterpret_cast<unsigned char*>(Dl + kTile);   // [STAGES]: K, V, flags

    const Head hd = head_of(simt::block_x(), m);
    const ll qb = longest_first_query_block(m), q0 = qb * kTile;
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, g = lane / 4;
    const int lr[2] = {warp * 16 + g, warp * 16 + g + 8};   // this lane's two query rows within the block
    const KeyRows<In> krows{k + hd.k_base, null_row_of<In>(m.null_k, hd, m)};
    const KeyRows<In> vrows{v + hd.k_base, null_row_of<In>(m.null_v, hd, m)};

    load_rows<D>(Qs, QueryRows<In>{q + hd.q_base}, q0, m);
    load_rows<D>(dOs, QueryRows<In>{dout + hd.q_base}, q0, m);
    load_lse_delta(Ls, Dl, lse, delta, hd.bh, q0, m);
    float acc[D / 8][4];
RETRO_SIMT_UNROLL
    for (int u = 0; u < D / 8; ++u)
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) acc[u][c] = 0.0f;

    const ll last = last_key_block(qb, m);
    if constexpr (STAGES == 2)
        if (last >= 0) load_key_stage<D>(stages, krows, vrows, 0, hd.b, m);   // (no step: no copy left unwaited)
    staged_loop<STAGES>(0, last, [&](auto stage, ll kb) {
        constexpr int sg = decltype(stage)::value;
        const u16* Ks = reinterpret_cast<const u16*>(stages + sg * stage_bytes);
        const unsigned char* off = stages + sg * stage_bytes + 2 * row_tile_bytes<D>();
        begin_step<STAGES>(   // (the first step's wait and barrier also cover Q, dO, lse and Delta)
            kb + 1 <= last, [&] { load_key_stage<D>(stages, krows, vrows, kb, hd.b, m); },
            [&] { load_key_stage<D>(stages + (sg ^ 1) * stage_bytes, krows, vrows, kb + 1, hd.b, m); });
        u32 dsk[8][2];
        query_rows_step<D, kDiagonalSteps<D, In>>(acc, dsk, nullptr, Qs, dOs, Ks, Ks + kTile * ld, Ls, Dl, off, q0,
                                                  kb * kTile, m, warp, lane);
    });
    float* db = dq + hd.q_base;
    store_rows<D>(out_row(db, q0 + lr[0], m.Nq, m), out_row(db, q0 + lr[1], m.Nq, m), acc, 1.0f, 1.0f, lane);
}

// dK, dV [B, Nk, H*D] for the 64 virtual keys of block y of (item, head) x (grid (B * H, ceil(keys / 64))); with a
// null key, block 0's virtual key 0
// is the null key: its rows go to dnull_k_items / dnull_v_items [B, H*D] (this item's share, =), for the caller to
// sum over items. dkdv_smem<D, STAGES>() bytes.
template <int D, typename In = float, int STAGES = 1>
RETRO_SIMT_KERNEL(kThreads)
flash_mma_backward_dkdv(float* __restrict__ dk, float* __restrict__ dv, float* __restrict__ dnull_k_items,
                        float* __restrict__ dnull_v_items, const In* __restrict__ q, const In* __restrict__ k,
                        const In* __restrict__ v, const In* __restrict__ dout, const float* __restrict__ lse,
                        const float* __restrict__ delta, FlashDims m) {
    static_assert(STAGES == 1 || std::is_same_v<In, u16>, "two stages need the cp.async loads of bf16 operands");
    constexpr int ld = row_ld<D>(), stage_bytes = 2 * row_tile_bytes<D>() + kRowStatBytes;
    u16* Ks = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* Vs = Ks + kTile * ld;
    unsigned char* off = reinterpret_cast<unsigned char*>(Vs + kTile * ld);
    unsigned char* stages = off + kMaskBytes;   // [STAGES]: Q, dO, lse, Delta

    const Head hd = head_of(simt::block_x(), m);
    const ll kb = simt::block_y(), k0 = kb * kTile;   // causal: the first key blocks walk the most query blocks
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int lk[2] = {warp * 16 + g, warp * 16 + g + 8};   // this lane's two keys within the block
    const QueryRows<In> qrows{q + hd.q_base}, dorows{dout + hd.q_base};

    load_rows<D>(Ks, KeyRows<In>{k + hd.k_base, null_row_of<In>(m.null_k, hd, m)}, k0, m);
    load_rows<D>(Vs, KeyRows<In>{v + hd.k_base, null_row_of<In>(m.null_v, hd, m)}, k0, m);
    load_key_flags(off, k0, hd.b, m);
    float dK[D / 8][4], dV[D / 8][4];
RETRO_SIMT_UNROLL
    for (int u = 0; u < D / 8; ++u)
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) {
            dK[u][c] = 0.0f;
            dV[u][c] = 0.0f;
        }
    const ll query_blocks = (m.Nq + kTile - 1) / kTile, first = m.causal ? kb : 0;
    const auto issue = [&](unsigned char* stage, ll qb) {   // query block qb's Q and dO into a stage
        u16* Qs = reinterpret_cast<u16*>(stage);
        load_rows<D>(Qs, qrows, qb * kTile, m);
        load_rows<D>(Qs + kTile * ld, dorows, qb * kTile, m);
    };
    const auto stats_of = [&](unsigned char* stage) { return reinterpret_cast<float*>(stage + 2 * row_tile_bytes<D>()); };
    if constexpr (STAGES == 2)
        if (first < query_blocks) {   // (no step: no copy left unwaited; dK and dV are then stored as zeros)
            issue(stages, first);
            load_lse_delta(stats_of(stages), stats_of(stages) + kTile, lse, delta, hd.bh, first * kTile, m);
        }
    staged_loop<STAGES>(first, query_blocks - 1, [&](auto stage, ll qb) {
        constexpr int sg = decltype(stage)::value;
        const u16* Qs = reinterpret_cast<const u16*>(stages + sg * stage_bytes);
        const u16* dOs = Qs + kTile * ld;
        const float* Ls = stats_of(stages + sg * stage_bytes);
        const float* Dl = Ls + kTile;
        const ll q0 = qb * kTile;
        [[maybe_unused]] RowStats next_stats;   // the next query block's lse and Delta (two stages): fetched now,
                                                // stored after this step's products
        begin_step<STAGES>(   // (the first step's wait and barrier also cover K, V and the flags)
            qb + 1 < query_blocks,
            [&] {
                issue(stages, qb);
                load_lse_delta(stats_of(stages), stats_of(stages) + kTile, lse, delta, hd.bh, q0, m);
            },
            [&] {
                issue(stages + (sg ^ 1) * stage_bytes, qb + 1);
                next_stats = fetch_lse_delta(lse, delta, hd.bh, q0 + kTile, m);
            });
        float st[8][4], dpt[8][4];
        // the fragments by ldmatrix: 40 shared loads for both products at D = 64 instead of 176 (the fast step's
        // block 544 -> 424 instructions, nvdisasm sm_90); ptxas: registers within the same blocks an SM at every D,
        // the fp32 D = 128 form's spill 68 -> 32 bytes (session 28)
        rows_times_rows_t_x4<D>(st, Ks, warp * 16, Qs, lane);    // S^T = K Q^T
        rows_times_rows_t_x4<D>(dpt, Vs, warp * 16, dOs, lane);  // dP^T = V dO^T
        constexpr bool diag = kDiagonalSteps<D, In>;
        const int kind = step_kind<diag>(q0, k0, m);
        auto entry = [&](auto kind_t, int n, int c, int& cls, float& l, float& dl) {
            constexpr int K = decltype(kind_t)::value;
            const int e = n * 8 + 2 * t + (c & 1), r = lk[c / 2];   // entry (key r, query e)
            if constexpr (K == kStepClasses) cls = entry_class(q0 + e, k0 + r, off[r], m);
            else if constexpr (K == kStepDiagonal) cls = r > e ? kMasked : kVisible;
            else cls = kVisible;
            l = Ls[e];
            dl = Dl[e];
        };
        if constexpr (D >= 128) {
            // P for dV first, then dS (P's exp2 again) for dK: with P and dS live together beside the 128 registers
            // of dK and dV, ptxas (sm_90) spilled 120 bytes; at D <= 64 the one pass takes fewer registers (166
            // against 240 at D = 64)
            {
                u32 pk[8][2];
                softmax_backward_tile<diag>(nullptr, pk, st, dpt, m, kind, entry);
                accumulate_p_rows<D>(dV, pk, dOs, ld, lane);   // dV += P^T dO
            }
            u32 dsk[8][2];
            softmax_backward_tile<diag>(dsk, nullptr, st, dpt, m, kind, entry);
            accumulate_p_rows<D>(dK, dsk, Qs, ld, lane);   // dK += dS^T Q
        } else {
            u32 dsk[8][2], pk[8][2];
            softmax_backward_tile<diag>(dsk, pk, st, dpt, m, kind, entry);
            accumulate_p_rows<D>(dV, pk, dOs, ld, lane);   // dV += P^T dO
            accumulate_p_rows<D>(dK, dsk, Qs, ld, lane);   // dK += dS^T Q
        }
        if constexpr (STAGES == 2)
            if (qb + 1 < query_blocks) {   // the other stage is no one's until the next step's barrier
                float* Ln = stats_of(stages + (sg ^ 1) * stage_bytes);
                store_lse_delta(Ln, Ln + kTile, next_stats);
            }
    });
    store_rows<D>(key_grad_row(dk, dnull_k_items, k0 + lk[0], hd, m), key_grad_row(dk, dnull_k_items, k0 + lk[1], hd, m),
                  dK, 1.0f, 1.0f, lane);
    store_rows<D>(key_grad_row(dv, dnull_v_items, k0 + lk[0], hd, m), key_grad_row(dv, dnull_v_items, k0 + lk[1], hd, m),
                  dV, 1.0f, 1.0f, lane);
}

// Attention with at most 64 queries (CCA: a chunk's queries against its neighbours' tokens and the null column), or
// 128 (QB = 2: the encoder's neighbour tokens, D <= 64, not causal): dQ, dK and dV in one block per (item, head),
// which walks the key blocks once (session 25, written without a GPU). The two kernels above compute S and dP twice
// (S = Q K^T in the dQ kernel, S^T = K Q^T in the dK/dV kernel's block for every key block, each loading the whole Q
// and dO tile again: at the 172M config's CCA, 128 x 8 heads x 5 key blocks = 5,120 dK/dV blocks of one step each,
// 11 TFLOP/s in session 23's profile; its encoder 17.5). Here each warp computes S and dP once for its 16 query rows
// of each 64-row query block (QB of them), P and dS go to dQ += dS K in registers as in the dQ kernel (the same
// bits), and through shared memory as bf16 [query][key] tiles to the products over the queries: warp w's keys
// [16w, 16w + 16) take dV = P^T dO and dK = dS^T Q over all 64 QB queries (A fragments of P^T by ldmatrix.trans),
// finished and stored at once since no other block has queries for them. Grid (B * H), one_block_smem<D, QB>()
// bytes; Nq <= 64 QB.
template <int D, int QB = 1>
constexpr int one_block_smem() {   // Q and dO (64 QB rows), K and V, then P and dS (bf16 [64 QB][64 + 8] each)
    return QB * (2 * row_tile_bytes<D>() + 2 * row_tile_bytes<kTile>() + kRowStatBytes) + 2 * row_tile_bytes<D>() +
           kMaskBytes;
}

// A warp's 16 x 64 slice held as bf16 pairs of C fragments (pk[n][0]: row g, columns 8n + 2t, +1; pk[n][1]: row
// g + 8) into rows [row0, row0 + 16) of a row-major bf16 tile of stride ld.
RETRO_SIMT_DEVICE void store_pairs(u16* tile, int ld, const u32 (&pk)[8][2], int row0, int lane) {
    const int g = lane / 4, t = lane % 4;
    u16* p = tile + (row0 + g) * ld + 2 * t;   // element offsets: the constants fold into the stores' immediates
RETRO_SIMT_UNROLL
    for (int n = 0; n < 8; ++n) {
        *reinterpret_cast<u32*>(p + n * 8) = pk[n][0];
        *reinterpret_cast<u32*>(p + 8 * ld + n * 8) = pk[n][1];
    }
}

// acc (16 x D) = rows [row0, row0 + 16) of T^T times X, T a bf16 [R][ld] tile whose columns are A's rows (P or dS
// as [query][key]: the warp's keys) and X's rows [R][D + 8] the same R queries.
template <int D, int R>
RETRO_SIMT_DEVICE void transposed_times_rows(float (&acc)[D / 8][4], const u16* T, int ld, int row0, const u16* X, int lane) {
RETRO_SIMT_UNROLL
    for (int u = 0; u < D / 8; ++u)
RETRO_SIMT_UNROLL
        for (int c = 0; c < 4; ++c) acc[u][c] = 0.0f;
RETRO_SIMT_UNROLL
    for (int kk = 0; kk < R / 16; ++kk) {
        u32 a[4];
        load_a_t(a, T, ld, row0, kk * 16, lane);
        accumulate_kn(acc, a, X, row_ld<D>(), kk * 16, 0, lane);
    }
}

template <int D, typename In = float, int QB = 1>
RETRO_SIMT_KERNEL(kThreads)
flash_mma_backward_one_block(float* __restrict__ dq, float* __restrict__ dk, float* __restrict__ dv,
                             float* __restrict__ dnull_k_items, float* __restrict__ dnull_v_items,
                             const In* __restrict__ q, const In* __restrict__ k, const In* __restrict__ v,
                             const In* __restrict__ dout, const float* __restrict__ lse,
                             const float* __restrict__ delta, FlashDims m) {
    static_assert(QB == 1 || (QB == 2 && D <= 64), "one query block, or two at D <= 64 (the dQ accumulators)");
    constexpr int ld = row_ld<D>(), ldp = row_ld<kTile>(), R = QB * kTile;
    u16* Qs = reinterpret_cast<u16*>(simt::dynamic_smem());
    u16* dOs = Qs + R * ld;
    u16* Ks = dOs + R * ld;
    u16* Vs = Ks + kTile * ld;
    u16* Ps = Vs + kTile * ld;
    u16* dSs = Ps + R * ldp;
    float* Ls = reinterpret_cast<float*>(dSs + R * ldp);
    float* Dl = Ls + R;
    unsigned char* off = reinterpret_cast<unsigned char*>(Dl + R);

    const Head hd = head_of(simt::block_x(), m);
    const int tid = simt::thread_x(), warp = tid / 32, lane = tid % 32, g = lane / 4;
    const int lr[2] = {warp * 16 + g, warp * 16 + g + 8};   // this lane's two rows of a query block (dQ), or keys
    const KeyRows<In> krows{k + hd.k_base, null_row_of<In>(m.null_k, hd, m)};
    const KeyRows<In> vrows{v + hd.k_base, null_row_of<In>(m.null_v, hd, m)};

RETRO_SIMT_UNROLL
    for (int qb = 0; qb < QB; ++qb) {
        load_rows<D>(Qs + qb * kTile * ld, QueryRows<In>{q + hd.q_base}, qb * kTile, m);
        load_rows<D>(dOs + qb * kTile * ld, QueryRows<In>{dout + hd.q_base}, qb * kTile, m);
        load_lse_delta(Ls + qb * kTile, Dl + qb * kTile, lse, delta, hd.bh, qb * kTile, m);
    }
    float acc[QB][D / 8][4];   // dQ of the warp's rows in each query block
RETRO_SIMT_UNROLL
    for (int qb = 0; qb < QB; ++qb)
RETRO_SIMT_UNROLL
        for (int u = 0; u < D / 8; ++u)
RETRO_SIMT_UNROLL
            for (int c = 0; c < 4; ++c) acc[qb][u][c] = 0.0f;

    const ll last = last_key_block(QB - 1, m);   // (causal only with QB = 1: the backend's condition)
    for (ll kb = 0; kb <= last; ++kb) {
        const ll j0 = kb * kTile;
        simt::sync_block();   // the previous key block's K, V, P and dS are no longer read
        load_rows<D>(Ks, krows, j0, m);
        load_rows<D>(Vs, vrows, j0, m);
        load_key_flags(off, j0, hd.b, m);
        simt::async_wait_all();
        simt::sync_block();
RETRO_SIMT_UNROLL
        for (int qb = 0; qb < QB; ++qb) {
            u32 dsk[8][2], pk[8][2];
            query_rows_step<D>(acc[qb], dsk, pk, Qs + qb * kTile * ld, dOs + qb * kTile * ld, Ks, Vs, Ls + qb * kTile,
                               Dl + qb * kTile, off, qb * kTile, j0, m, warp, lane);
            store_pairs(Ps + qb * kTile * ldp, ldp, pk, warp * 16, lane);
            store_pairs(dSs + qb * kTile * ldp, ldp, dsk, warp * 16, lane);
        }
        simt::sync_block();   // every warp's rows of P and dS are in
        float dkv[D / 8][4];
        transposed_times_rows<D, R>(dkv, Ps, ldp, warp * 16, dOs, lane);   // dV = P^T dO for keys [16w, 16w + 16)
        store_rows<D>(key_grad_row(dv, dnull_v_items, j0 + lr[0], hd, m), key_grad_row(dv, dnull_v_items, j0 + lr[1], hd, m),
                      dkv, 1.0f, 1.0f, lane);
        transposed_times_rows<D, R>(dkv, dSs, ldp, warp * 16, Qs, lane);   // dK = dS^T Q
        store_rows<D>(key_grad_row(dk, dnull_k_items, j0 + lr[0], hd, m), key_grad_row(dk, dnull_k_items, j0 + lr[1], hd, m),
                      dkv, 1.0f, 1.0f, lane);
    }
    float* db = dq + hd.q_base;
RETRO_SIMT_UNROLL
    for (int qb = 0; qb < QB; ++qb)
        store_rows<D>(out_row(db, qb * kTile + lr[0], m.Nq, m), out_row(db, qb * kTile + lr[1], m.Nq, m), acc[qb], 1.0f,
                      1.0f, lane);
}

}  // namespace retro::nn::flash
