// The CUDA NnBackend's few-row linear layer (a decode step's rows: at most kGemvMaxRows of them, fp32), written
// against kernels/simt.cuh so that tests/test_nn_gemv_host.cpp runs it on the host through the block emulator:
//   linear_rows_gemv: y[r, o] = x[r, :] . W[o, :] (+ b[o]) for r < NR, one warp per output column o for every row
//   at once (W read once, float4s where aligned, several row pieces in flight a warp; lanes' strided partial dots
//   meet in a fixed butterfly), then an epilogue:
//     GemvOut::plain     y = v
//     GemvOut::gelu      y = gelu_exact(v), and h = v where h is not null   (the feed-forward's first layer)
//     GemvOut::residual  y = res + v (y may be res: each element is read, then written, by one lane)
//     GemvOut::rotary    the first rot.heads heads of rot.D columns of each row rotated at the row's table row (the
//                        heads before rot.scaled_heads scaled by rot.scale first), the other columns y = v: the
//                        decoder's q | k projection and rotary_scale_forward in one launch. A warp then takes the two
//                        columns (t, t + R/2) of a rotated pair together (kernels/nn_rotary.cuh's rotate_pair).
//   With NORM the rows are first RMS-normalised into shared memory, xn = x * inv * gamma with inv = 1 / max(||x|| *
//   I^-1/2, eps) (kernels/nn_rows.cuh's rmsnorm_forward_warps, the same floats), and the dot products read xn: the
//   decoder's pre-norm + projection pairs in one launch instead of two (decoding is launch-bound,
//   docs/performance.md). Each block normalises the rows again (NR x I floats: cheaper than a launch).
// Every form does each output's arithmetic in the same order as the unfused ops (rmsnorm_forward_warps, this kernel
// plain, then gelu or residual_sum), so the fused ops give the two ops' bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "nn_rotary.cuh"
#include "nn_rows.cuh"
#include "simt.cuh"

#if defined(__CUDACC__) && !defined(RETRO_SIMT_HOST)
#define RETRO_GEMV_UNROLL4 _Pragma("unroll 4")
#else
#define RETRO_GEMV_UNROLL4
#endif

namespace retro::nn::gemv {

using ll = long long;

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kMaxRows = 8;                      // rows one launch takes (its accumulators are registers)
constexpr int kNormSmemLimit = 48 * 1024;        // NORM's NR x I floats, without opting in to more shared memory

enum class GemvOut : int { plain = 0, gelu = 1, residual = 2, rotary = 3 };

// GemvOut::rotary's table and heads: row r of the output at table row r (cos, sin [rows, R]); columns [0, heads * D)
// are `heads` heads of D, whose first R channels rotate as pairs (t, t + R/2) and the rest pass; heads h <
// scaled_heads are multiplied by scale first (nn/nn_backend.h's rotary_scale_forward).
struct GemvRotary {
    const float* cos = nullptr;
    const float* sin = nullptr;
    int heads = 0, D = 0, R = 0, scaled_heads = 0;
    float scale = 1.0f;
};

constexpr float kRsqrt2 = 0.70710678118654752440f;
// gelu(x) = x Phi(x), exact (erf) form, as nn/gelu.h: the one expression of the gelu op and this epilogue
RETRO_SIMT_HOST_DEVICE float gelu_exact(float x) { return 0.5f * x * (1.0f + erff(x * kRsqrt2)); }

// Shared memory a launch takes: NORM's normalised rows.
RETRO_SIMT_HOST_DEVICE ll smem_bytes(int rows, ll I, bool norm) { return norm ? static_cast<ll>(rows) * I * 4 : 0; }

// acc[r] = the lane's strided part of x[r, :] . w (float4s when VEC4), then summed over the warp's lanes in the fixed
// butterfly: every lane ends with the whole dot.
template <int NR, bool VEC4>
RETRO_SIMT_DEVICE void dot_rows(float (&acc)[NR], const float* __restrict__ w, const float* __restrict__ xin, ll I,
                                int lane) {
    for (int r = 0; r < NR; r++) acc[r] = 0.0f;
    if constexpr (VEC4) {
        // unrolled: several 512-byte row pieces in flight a warp (the loads, not the FMAs, bound a 1-row GEMV;
        // session 20's ncu table: 5 us a call for 1-4 MB of weights); the same order of sums per lane
        RETRO_GEMV_UNROLL4
        for (ll q = lane; q < I / 4; q += 32) {
            float wv[4];
            simt::load_float4_ro(wv, w + 4 * q);   // (W: read-only while any kernel runs)
            for (int r = 0; r < NR; r++) {
                float xv[4];
                simt::load_float4(xv, xin + r * I + 4 * q);
                acc[r] += wv[0] * xv[0] + wv[1] * xv[1] + wv[2] * xv[2] + wv[3] * xv[3];
            }
        }
    } else {
        for (ll i = lane; i < I; i += 32) {
            const float wv = simt::load_ro(w + i);
            for (int r = 0; r < NR; r++) acc[r] += wv * xin[r * I + i];
        }
    }
    for (int r = 0; r < NR; r++) acc[r] = rows::warp_sum(acc[r]);
}

// The kernel's work after its launch prologue, for linear_rows_gemv and for a fused decode step's op
// (kernels/nn_decode_program_cuda.cu: the same columns to the same warps of a grid of any size, so the same bits).
template <int NR, bool VEC4, bool NORM>
RETRO_SIMT_DEVICE void linear_rows_gemv_body(float* y, float* __restrict__ h, const float* __restrict__ x,
                                             const float* __restrict__ W, const float* __restrict__ b, const float* res,
                                             const float* __restrict__ gamma, ll I, ll O, int out, float scale,
                                             float eps, const GemvRotary& rot) {
    const int lane = simt::thread_x() % 32, warp = simt::thread_x() / 32;
    const float* xin = x;
    if constexpr (NORM) {
        float* xs = reinterpret_cast<float*>(simt::dynamic_smem());
        for (int r = warp; r < NR; r += kWarps) {
            const float* xr = x + r * I;
            float ss = 0.0f;
            for (ll c = lane; c < I; c += 32) {
                const float v = xr[c];
                ss += v * v;
            }
            const float inv = rows::clamped_inverse(rows::norm_from_squares(ss, scale), eps);
            for (ll c = lane; c < I; c += 32) xs[r * I + c] = xr[c] * inv * gamma[c];
        }
        simt::sync_block();
        xin = xs;
    }
    // work units: one column each, but a rotated pair (two columns) in GemvOut::rotary's rotated heads
    const bool rotating = out == static_cast<int>(GemvOut::rotary);
    const int half = rot.R / 2, head_units = rot.D - half;
    const ll rot_units = rotating ? static_cast<ll>(rot.heads) * head_units : 0;
    const ll rot_cols = rotating ? static_cast<ll>(rot.heads) * rot.D : 0;
    const ll units = rot_units + (O - rot_cols);
    const ll first = (simt::block_x() * kThreads + simt::thread_x()) / 32, warps = simt::grid_x() * kWarps;
    for (ll u = first; u < units; u += warps) {
        ll o = rot_cols + (u - rot_units), o2 = -1;   // o2: the pair's second column
        int head = -1, t = 0;
        if (u < rot_units) {
            head = static_cast<int>(u / head_units);
            const int j = static_cast<int>(u - static_cast<ll>(head) * head_units);
            o = static_cast<ll>(head) * rot.D + (j < half ? j : rot.R + (j - half));
            if (j < half) {
                t = j;
                o2 = o + half;
            }
        }
        const float bias = b && lane == 0 ? b[o] : 0.0f;   // loaded with the row, not after it
        const float bias2 = b && lane == 0 && o2 >= 0 ? b[o2] : 0.0f;
        float acc[NR], acc2[NR] = {};
        dot_rows<NR, VEC4>(acc, W + o * I, xin, I, lane);
        if (o2 >= 0) dot_rows<NR, VEC4>(acc2, W + o2 * I, xin, I, lane);
        if (lane == 0)
            for (int r = 0; r < NR; r++) {
                const float v = b ? acc[r] + bias : acc[r];
                if (out == static_cast<int>(GemvOut::gelu)) {
                    if (h) h[r * O + o] = v;
                    y[r * O + o] = gelu_exact(v);
                } else if (out == static_cast<int>(GemvOut::residual)) {
                    y[r * O + o] = res[r * O + o] + v;
                } else if (head >= 0) {   // a rotated head's channel (rotary_rows's arithmetic, out_scale 1)
                    const float m = head < rot.scaled_heads ? rot.scale : 1.0f;
                    if (o2 >= 0) {
                        const float v2 = b ? acc2[r] + bias2 : acc2[r];
                        float y1, y2;
                        rotary::rotate_pair<false>(y1, y2, v * m, v2 * m, rot.cos + r * rot.R, rot.sin + r * rot.R, t,
                                                   half, 1.0f);
                        y[r * O + o] = y1;
                        y[r * O + o2] = y2;
                    } else {
                        y[r * O + o] = v * m * 1.0f;
                    }
                } else {
                    y[r * O + o] = v;
                }
            }
    }
}

// grid: any (grid-stride over o, kWarps columns a block), kThreads threads, smem_bytes(NR, I, NORM). VEC4: I % 4 == 0
// and W (and x, without NORM) 16-byte aligned. scale = I^-1/2 and eps: NORM's (ignored otherwise).
template <int NR, bool VEC4, bool NORM>
RETRO_SIMT_KERNEL(kThreads)
linear_rows_gemv(float* y, float* __restrict__ h, const float* __restrict__ x, const float* __restrict__ W,
                 const float* __restrict__ b, const float* res, const float* __restrict__ gamma, ll I, ll O, int out,
                 float scale, float eps, GemvRotary rot = {}) {
    // a programmatic dependent launch (nn_backend_common.cuh's launch_kernel, sm_90+): the next kernel may start
    // launching now; this one fetches its first weight rows into L2 while the kernel before it finishes, then waits
    // for it before reading x or res or writing y
    simt::launch_dependents();
    {
        const int lane = simt::thread_x() % 32;
        const ll u0 = (simt::block_x() * kThreads + simt::thread_x()) / 32;
        if (u0 < O)
            for (ll i = 32 * lane; i < I; i += 32 * 32) simt::prefetch_l2(W + u0 * I + i);
    }
    simt::grid_dependency_wait();
    linear_rows_gemv_body<NR, VEC4, NORM>(y, h, x, W, b, res, gamma, I, O, out, scale, eps, rot);
}

}  // namespace retro::nn::gemv
