// The CUDA NnBackend's row-wise RMSNorm and its column sums (dgamma, db, the null key/value and copy-head
// gradients), written against kernels/simt.cuh so that tests/test_nn_rows_host.cpp runs them on the host through
// the block emulator against nn/rmsnorm.h in double:
//   - rmsnorm_forward_warps / rmsnorm_backward_warps: a warp per row, 8 rows to a 256-thread block (grid-stride over
//     rows); the lanes' strided partial sums meet in a fixed butterfly, so no barrier and no shared memory (the
//     block-per-row kernels before them paid a block tree of eight barriers per row). Forms as nn_backend_cuda.cu's
//     ops: RESIDUAL writes x = a + b first (each lane its own elements, then the same sum of squares: the bits of
//     the two ops apart), ADD accumulates dx (+=); without ADD dx may alias dy or x (each lane reads its elements
//     before it writes them, and the dot's shuffle orders every lane's reads before any write).
//   - column_partials_tiles / column_partials_add_tiles: sum_n term(n, j) in two deterministic passes. Pass 1: a
//     block per (32 columns, chunk of rows); thread (tx, ty) sums rows r0 + ty, r0 + ty + 8, ... of column tx in
//     order, then row-lane 0 adds the 8 lanes in order into part[chunk, j]. Pass 2: a block per 32 columns; thread
//     (tx, ty) sums chunks ty, ty + 8, ... in order, row-lane 0 adds the 8 and then the sum to out[j] (+=). Every
//     load of a warp reads 32 consecutive floats of one row.
#pragma once

#include <cmath>
#include <cstdint>

#include "simt.cuh"

namespace retro::nn::rows {

using ll = long long;

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kColumnTile = 32, kRowLanes = kThreads / kColumnTile;
constexpr int kColumnSmemBytes = kRowLanes * (kColumnTile + 1) * 4;   // the column kernels' dynamic shared memory

RETRO_SIMT_DEVICE float warp_sum(float v) {
    for (int w = 16; w > 0; w >>= 1) v += simt::shfl_xor(v, w);
    return v;
}

// A row's norm ||x|| * scale from the lanes' strided partial sums of squares (the fixed butterfly), and the factor
// 1 / max(norm, eps) a normalised element x * inv * gamma takes: rmsnorm_forward_warps's arithmetic, shared with the
// few-row GEMV's normalising prologue (kernels/nn_gemv.cuh) so the two give the same floats.
RETRO_SIMT_DEVICE float norm_from_squares(float lane_squares, float scale) { return sqrtf(warp_sum(lane_squares)) * scale; }
RETRO_SIMT_DEVICE float clamped_inverse(float norm, float eps) { return 1.0f / (norm < eps ? eps : norm); }

// norm[n] = ||x[n]|| * scale (scale = C^-1/2), y[n, c] = x[n, c] / max(norm, eps) * gamma[c]; RESIDUAL: x = a + b
// first; BF16_OUT: y stored only as its bf16 bits y16 (round to nearest even; y unused). grid: any (grid-stride over
// rows, kWarps rows a block), kThreads threads, no shared memory.
// (rmsnorm_forward_rows: the kernel's body, also a fused decode step's op: kernels/nn_decode_program_cuda.cu)
template <bool RESIDUAL, bool BF16_OUT = false>
RETRO_SIMT_DEVICE void rmsnorm_forward_rows(float* __restrict__ y, float* __restrict__ norm, float* x, const float* a,
                                            const float* b, const float* __restrict__ gamma, ll N, ll C, float scale,
                                            float eps, std::uint16_t* __restrict__ y16) {
    const int lane = simt::thread_x() % 32;
    for (ll n = simt::block_x() * kWarps + simt::thread_x() / 32; n < N; n += simt::grid_x() * kWarps) {
        float* xr = x + n * C;
        float ss = 0.0f;
        for (ll c = lane; c < C; c += 32) {
            float v;
            if constexpr (RESIDUAL) {
                v = a[n * C + c] + b[n * C + c];
                xr[c] = v;
            } else {
                v = xr[c];
            }
            ss += v * v;
        }
        const float nm = norm_from_squares(ss, scale);
        if (lane == 0) norm[n] = nm;
        const float inv = clamped_inverse(nm, eps);
        if constexpr (BF16_OUT) {
            std::uint16_t* yr = y16 + n * C;
            for (ll c = lane; c < C; c += 32) yr[c] = simt::bf16_bits(xr[c] * inv * gamma[c]);
        } else {
            float* yr = y + n * C;
            for (ll c = lane; c < C; c += 32) yr[c] = xr[c] * inv * gamma[c];
        }
    }
}

template <bool RESIDUAL, bool BF16_OUT = false>
RETRO_SIMT_KERNEL(kThreads)
rmsnorm_forward_warps(float* __restrict__ y, float* __restrict__ norm, float* x, const float* a, const float* b,
                      const float* __restrict__ gamma, ll N, ll C, float scale, float eps,
                      std::uint16_t* __restrict__ y16 = nullptr) {
    rmsnorm_forward_rows<RESIDUAL, BF16_OUT>(y, norm, x, a, b, gamma, N, C, scale, eps, y16);
}

// dx[n, c] = gamma[c] dy[n, c] / d - [norm >= eps] x[n, c] (sum_j gamma_j dy_j x_j) / (d^2 norm C), d = max(norm, eps)
// (nn/rmsnorm.h); ADD: dx += instead of =. Launch as rmsnorm_forward_warps.
// A row's factors of that: inv = 1 / d and k (the lanes' strided dot in the fixed butterfly; every lane gets both).
struct RowBackward {
    float inv, k;
};
RETRO_SIMT_DEVICE RowBackward row_backward(const float* xr, const float* gr, const float* __restrict__ gamma, float nm,
                                          ll C, int lane, float eps) {
    const float inv = 1.0f / (nm < eps ? eps : nm);
    float dot = 0.0f;
    for (ll c = lane; c < C; c += 32) dot += gamma[c] * gr[c] * xr[c];
    dot = warp_sum(dot);
    return {inv, (nm >= eps && nm > 0.0f) ? dot * inv * inv / (nm * static_cast<float>(C)) : 0.0f};
}
template <bool ADD>
RETRO_SIMT_KERNEL(kThreads)
rmsnorm_backward_warps(float* dx, const float* dy, const float* x, const float* __restrict__ gamma,
                       const float* __restrict__ norm, ll N, ll C, float eps) {
    const int lane = simt::thread_x() % 32;
    for (ll n = simt::block_x() * kWarps + simt::thread_x() / 32; n < N; n += simt::grid_x() * kWarps) {
        const float* xr = x + n * C;
        const float* gr = dy + n * C;
        const auto [inv, k] = row_backward(xr, gr, gamma, norm[n], C, lane, eps);
        float* dxr = dx + n * C;
        for (ll c = lane; c < C; c += 32) {
            const float d = gamma[c] * gr[c] * inv - k * xr[c];
            if constexpr (ADD) dxr[c] += d;
            else dxr[c] = d;
        }
    }
}

// rmsnorm_backward_warps's dx (=, or += with ADD) and, in the same pass over dy and x, dgamma's partial sums per
// block (the separate column-sum pass read dy and x again). Block b takes rows [b * per, min(N, (b + 1) * per)), warp
// w its rows r0 + w, r0 + w + kWarps, ...; each lane adds its columns' terms dy x / max(norm, eps) (GammaTerm's
// expression) into the warp's row of shared memory (one lane a column: no races), before it writes dx (so dx may be
// dy or x, as in rmsnorm_backward_warps); then the block adds its warps' rows in warp order into part[b, c]. Pass 2
// is column_partials_add_tiles over the blocks (chunks = blocks): every sum in a fixed order. grid
// ceil(N / per) blocks, kThreads threads, dgamma_smem_bytes(C) of shared memory.
RETRO_SIMT_HOST_DEVICE ll dgamma_smem_bytes(ll C) { return static_cast<ll>(kWarps) * C * 4; }
RETRO_SIMT_HOST_DEVICE ll dgamma_block_rows(ll N) {   // at least a row a warp, at most 1024 blocks
    const ll per = (N + 1023) / 1024;
    return per < kWarps ? kWarps : per;
}
template <bool ADD>
RETRO_SIMT_KERNEL(kThreads)
rmsnorm_backward_dgamma_warps(float* dx, float* __restrict__ part, const float* dy, const float* x,
                              const float* __restrict__ gamma, const float* __restrict__ norm, ll N, ll C, ll per,
                              float eps) {
    float* sh = reinterpret_cast<float*>(simt::dynamic_smem());
    const int lane = simt::thread_x() % 32, w = simt::thread_x() / 32;
    const ll b = simt::block_x(), r0 = b * per, r1 = r0 + per < N ? r0 + per : N;
    float* acc = sh + w * C;
    for (ll c = lane; c < C; c += 32) acc[c] = 0.0f;
    for (ll n = r0 + w; n < r1; n += kWarps) {
        const float* xr = x + n * C;
        const float* gr = dy + n * C;
        const auto [inv, k] = row_backward(xr, gr, gamma, norm[n], C, lane, eps);
        float* dxr = dx + n * C;
        for (ll c = lane; c < C; c += 32) {
            const float g = gr[c], xv = xr[c];
            acc[c] += g * xv * inv;
            const float d = gamma[c] * g * inv - k * xv;
            if constexpr (ADD) dxr[c] += d;
            else dxr[c] = d;
        }
    }
    simt::sync_block();
    for (ll c = simt::thread_x(); c < C; c += kThreads) {
        float s = 0.0f;
        for (int ww = 0; ww < kWarps; ++ww) s += sh[ww * C + c];
        part[b * C + c] = s;
    }
}

// Rows per chunk of pass 1 for N rows: at least 64, at most 256 chunks.
RETRO_SIMT_HOST_DEVICE ll column_chunk_rows(ll N) {
    const ll per = (N + 255) / 256;
    return per < 64 ? 64 : per;
}

// Pass 1: part[chunk, j] = sum over rows [chunk * per, min(N, (chunk + 1) * per)) of term(n, j). grid (ceil(C / 32),
// chunks), kThreads threads, kColumnSmemBytes of shared memory. With `copy` each term(n, j) is also stored there,
// rounded to bf16 (bits) at [n, j]: the summed values as a GEMM's bf16 input in the same pass (gelu_linear_backward's
// dy and db).
template <typename Term>
RETRO_SIMT_KERNEL(kThreads)
column_partials_tiles(float* __restrict__ part, ll N, ll C, ll per, Term term, std::uint16_t* __restrict__ copy = nullptr) {
    float* sh = reinterpret_cast<float*>(simt::dynamic_smem());
    const int tx = simt::thread_x() % kColumnTile, ty = simt::thread_x() / kColumnTile;
    const ll j = simt::block_x() * kColumnTile + tx, chunk = simt::block_y();
    const ll r0 = chunk * per, r1 = r0 + per < N ? r0 + per : N;
    float acc = 0.0f;
    if (j < C)
        for (ll n = r0 + ty; n < r1; n += kRowLanes) {
            const float v = term(n, j);
            if (copy) copy[n * C + j] = simt::bf16_bits(v);
            acc += v;
        }
    sh[ty * (kColumnTile + 1) + tx] = acc;
    simt::sync_block();
    if (ty == 0 && j < C) {
        float s = 0.0f;
        for (int r = 0; r < kRowLanes; ++r) s += sh[r * (kColumnTile + 1) + tx];
        part[chunk * C + j] = s;
    }
}

// Pass 2: out[j] += the chunks' partials of column j. grid ceil(C / 32), kThreads threads, kColumnSmemBytes.
// (A template, as every kernel here: this header is included by several .cu files.)
template <typename F>
RETRO_SIMT_KERNEL(kThreads)
column_partials_add_tiles(F* __restrict__ out, const F* __restrict__ part, ll C, ll chunks) {
    float* sh = reinterpret_cast<float*>(simt::dynamic_smem());
    const int tx = simt::thread_x() % kColumnTile, ty = simt::thread_x() / kColumnTile;
    const ll j = simt::block_x() * kColumnTile + tx;
    F acc = 0;
    if (j < C)
        for (ll c = ty; c < chunks; c += kRowLanes) acc += part[c * C + j];
    sh[ty * (kColumnTile + 1) + tx] = acc;
    simt::sync_block();
    if (ty == 0 && j < C) {
        float s = 0.0f;
        for (int r = 0; r < kRowLanes; ++r) s += sh[r * (kColumnTile + 1) + tx];
        out[j] += s;
    }
}

}  // namespace retro::nn::rows
