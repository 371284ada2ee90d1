// The CUDA NnBackend's rotary kernel (rotary_forward / rotary_backward and their scaled forms, nn/rotary.h's partial
// NeoX rotation), written against kernels/simt.cuh so that tests/test_nn_rotary_host.cpp runs it on the host through
// the block emulator:
//   rotary_rows: a block per group of rows of x [rows, H*D] (as many rows as its threads cover with a rotated pair
//   each: rows_per_block; block-stride over groups), row r at table row r % N; the threads first over the group's
//   H * R/2 rotated pairs (t, t + R/2) of each head of each row, then over its H * (D - R) passed channels (none in
//   place without a scale: they hold their result already). The index arithmetic is 32-bit within a group, one
//   64-bit division a group: the kernel before session 24 (one thread per pair over the whole tensor) paid five
//   64-bit divisions an element, and ran the training step's 76 rotary calls at several times their memory traffic
//   (docs/performance.md, session 23's profile: 4.7 ms a step).
// Heads h < scaled_heads read x * scale (rotary_scale_forward: the queries' dim_head^-1/2, the same float as a scale
// pass before; x * 1 = x), every result is multiplied by out_scale (rotary_backward_scale: the same float as a scale
// pass after; y * 1 = y). No __restrict__: y may be x (each element is read, then written, by one thread).
#pragma once

#include "simt.cuh"

namespace retro::nn::rotary {

using ll = long long;

constexpr int kThreads = 256;

// One rotated pair (t, t + R/2) of a head: x1, x2 its inputs (scaled already), c and s its row of the table; the
// rotation as nn/rotary.h (BACKWARD: its transpose), times out_scale. Shared with the few-row GEMV's rotary epilogue
// (kernels/nn_gemv.cuh), so the two give the same floats.
template <bool BACKWARD>
RETRO_SIMT_DEVICE void rotate_pair(float& y1, float& y2, float x1, float x2, const float* c, const float* s, int t,
                                   int half, float out_scale) {
    if constexpr (!BACKWARD) {
        y1 = (x1 * c[t] - x2 * s[t]) * out_scale;
        y2 = (x2 * c[t + half] + x1 * s[t + half]) * out_scale;
    } else {
        y1 = (x1 * c[t] + x2 * s[t + half]) * out_scale;
        y2 = (x2 * c[t + half] - x1 * s[t]) * out_scale;
    }
}

// Rows a block takes at once: as many as its threads cover with one rotated pair each (a row of the 172M config's k
// has H * R/2 = 128 pairs, so a block per row left half of its 256 threads idle), at least one.
RETRO_SIMT_HOST_DEVICE int rows_per_block(int H, int R) {
    const int pairs = H * (R / 2);
    return pairs > 0 && pairs < kThreads ? kThreads / pairs : 1;
}

// grid: any (block-stride over groups of rows_per_block(H, R) rows; ceil(rows / group) blocks keep every one busy),
// kThreads threads, no shared memory. R even, R <= D, N + kThreads <= INT_MAX.
template <bool BACKWARD>
RETRO_SIMT_KERNEL(kThreads)
rotary_rows(float* y, const float* x, const float* cos, const float* sin, ll rows, ll N, int H, int D, int R,
            float scale, int scaled_heads, float out_scale) {
    const int half = R / 2, group = rows_per_block(H, R);
    // In place with nothing to scale, the passed channels already hold their result: no pass over them. That is
    // rotary_forward and rotary_backward as the model calls them (k and dk in place), where R = 32 of D = 64 leaves
    // half of every row passed: half of those calls' bytes (session 49's 172M profile: 7.7 ms of a 161 ms step at
    // 32 x 1024 in the two).
    const int pass = y != x || out_scale != 1.0f || (scaled_heads > 0 && scale != 1.0f) ? D - R : 0;
    const int pairs = H * half, passed = H * pass, n_rows = static_cast<int>(N);
    const ll stride = simt::grid_x() * static_cast<ll>(group);
    for (ll row0 = simt::block_x() * static_cast<ll>(group); row0 < rows; row0 += stride) {
        const int in_group = static_cast<int>(rows - row0 < group ? rows - row0 : group);
        const int n0 = static_cast<int>(row0 % N);   // the group's first table row (one 64-bit division a group)
        for (int e = simt::thread_x(); e < in_group * pairs; e += kThreads) {
            const int g = e / pairs, j = e - g * pairs, h = j / half, t = j - h * half;
            const int n_in = n0 + g;   // the table row: a division only where the group wraps past N
            const ll n = n_in < n_rows ? n_in : n_in % n_rows;
            const ll at = ((row0 + g) * H + h) * D + t;
            const float m = h < scaled_heads ? scale : 1.0f;
            float y1, y2;
            rotate_pair<BACKWARD>(y1, y2, x[at] * m, x[at + half] * m, cos + n * R, sin + n * R, t, half, out_scale);
            y[at] = y1;
            y[at + half] = y2;
        }
        for (int e = simt::thread_x(); e < in_group * passed; e += kThreads) {
            const int g = e / passed, j = e - g * passed, h = j / pass, t = j - h * pass;
            const ll at = ((row0 + g) * H + h) * D + R + t;
            const float m = h < scaled_heads ? scale : 1.0f;
            y[at] = x[at] * m * out_scale;
        }
    }
}

}  // namespace retro::nn::rotary
