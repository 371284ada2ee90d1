// CUDA NnBackend::attention_decode (nn/nn_backend.h): a decode step's attention for rows that each have one query —
// the self-attention over each sequence's cache, or CCA over each row's chunk with the null column and the pad mask —
// split over the keys as flash-decoding does, in one launch (the per-sequence path it replaces takes a cuBLAS GEMM,
// a softmax kernel and a second GEMM, and two copies for the self-attention, per sequence and layer).
//
// Why split: one query row per head leaves one block per (row, head): 8 blocks of 132 SMs for one sequence of the
// demo decoder, each walking ~550 keys in order (session 20's H200 profile: 0.08 ms a call, 28 % of a decoded token).
// Here a block takes (row, head, split) with kAttentionDecodeSplitKeys = 64 keys of a split:
//   split   the block holding position pos writes the new key and value first (no other block reads that row);
//           scores: kLanesPerKey = 4 neighbouring threads per key, each a quarter of the channels (float4 loads where
//           D % 16 == 0 and aligned), added by a fixed butterfly; a masked key scores -FLT_MAX, as the CPU;
//           m = max of the scores (and of the null column's score in split 0, which also adds e_null and
//           e_null null_v below); e_j = exp(s_j - m); l = sum_j e_j (block_reduce's trees);
//           partial output: warp w takes the keys w, w + 8, ..., its lanes the channels (coalesced rows of V), the
//           8 warps' sums added in warp order; (acc [D], m, l) to the workspace at (row, head, split).
//   combine the last of a (row, head)'s splits to finish (a counter per (row, head): each block adds 1 after a
//           __threadfence; the one that sees splits - 1 combines, then sets the counter back to 0) reads the splits
//           0 .. pos / 64 in order, a thread per channel: M = max m_s, out = sum_s acc_s exp(m_s - M) / sum_s l_s
//           exp(m_s - M). Session 20's first form ran this as a second kernel (6.1 us a call on the H200, 8 calls a
//           token); the counter decides which block combines, never what is summed or in which order.
// The grid covers every split of L positions (a graph replays with new positions: the grid cannot follow pos); a
// split past pos returns at once. Every sum in a fixed order (no atomic arithmetic on values): the same inputs give
// the same bits.
// D <= kAttentionDecodeMaxD; positions are the caller's (0 <= pos < L, as the host backend checks). One outside
// (a review's point: it would have written the new key past its slot's cache and left its counter short, every later
// call wrong) gives NaN for that row and head and touches nothing else (session 66; tests/test_nn_decode_program_host.cpp).
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "cuda_check.cuh"
#include "nn/nn_backend_cuda.h"
#include "nn_attention_decode.cuh"
#include "nn_backend_common.cuh"
#include "simt.cuh"

namespace retro::nn::detail {
namespace {

using ll = long long;
using decode::kSplitKeys;

__global__ __launch_bounds__(kThreads) void attention_decode_split_k(float* __restrict__ out, float* part,
                                                                     const float* __restrict__ q,
                                                                     NnBackend::DecodeCache cache,
                                                                     const std::int64_t* __restrict__ pos,
                                                                     const std::int64_t* __restrict__ seq, ll rows, ll H,
                                                                     ll D, ll S, bool vec4) {
    // a programmatic dependent launch (sm_90+): the next kernel may start launching; this one waits for the kernel
    // before it (the projection that wrote q and the new key and value) before it touches anything
    simt::launch_dependents();
    simt::grid_dependency_wait();
    decode::attention_decode_rows(out, part, q, cache, pos, seq, rows, H, D, S, vec4);
}

}  // namespace

void CudaNnBackend::attention_decode(float* out, const float* q, const DecodeCache& c, const std::int64_t* pos,
                                     const std::int64_t* seq, std::int64_t rows, std::int64_t H, std::int64_t D) {
    RETRO_CHECK(D <= kAttentionDecodeMaxD, "attention_decode: head dimension ", D, " > ", kAttentionDecodeMaxD);
    if (rows * H * D == 0) return;
    RETRO_CHECK(c.workspace != nullptr && c.counters != nullptr,
                "attention_decode: no workspace (attention_decode_workspace floats) or counters (rows * H, zero)");
    const std::int64_t S = decode::attention_decode_splits(c.L);
    const bool vec4 = decode::attention_decode_vec4(D, c.kcache);   // float4 loads of a key's quarter
    launch_kernel("attention_decode", dependent_launch_, attention_decode_split_k, grid_for(rows * H * S, 1), kThreads, 0, stream_, out,
                  c.workspace, q, c, pos, seq, static_cast<ll>(rows), static_cast<ll>(H), static_cast<ll>(D),
                  static_cast<ll>(S), vec4);
    RETRO_CUDA_LAUNCH_CHECK("attention_decode", stream_);
}

}  // namespace retro::nn::detail
