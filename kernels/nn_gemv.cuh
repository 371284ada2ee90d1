// The CUDA NnBackend's few-row linear layer (a decode step's rows: at most kGemvMaxRows of them, fp32), written
// against kernels/simt.cuh so that tests/test_nn_gemv_host.cpp runs it on the host through the block emulator:
//   linear_rows_gemv: y[r, o] = x[r, :] . W[o, :] (+ b[o]) for r < NR, one warp per output column o for every row
//   at once (W read once, float4s where aligned, several row pieces in flight a warp; lanes' strided partial dots
//   meet in a fixed butterfly), then an epilogue:
//     GemvOut::plain     y = v
//     GemvOut::gelu      y = gelu_exact(v), and h = v where h is not null   (the feed-forward's first layer)
//     GemvOut::residual  y = res + v (y may be res: each element is read, then written, by one lane)
//   With NORM the rows are first RMS-normalised into shared memory, xn = x * inv * gamma with inv = 1 / max(||x|| *
//   I^-1/2, eps) (kernels/nn_rows.cuh's rmsnorm_forward_warps, the same floats), and the dot products read xn: the
//   decoder's pre-norm + projection pairs in one launch instead of two (decoding is launch-bound,
//   docs/performance.md). Each block normalises the rows again (NR x I floats: cheaper than a launch).
// Every form does each output's arithmetic in the same order as the unfused ops (rmsnorm_forward_warps, this kernel
// plain, then gelu or residual_sum), so the fused ops give the two ops' bits.
#pragma once

#include <cmath>
#include <cstdint>

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

enum class GemvOut : int { plain = 0, gelu = 1, residual = 2 };

constexpr float kRsqrt2 = 0.70710678118654752440f;
// gelu(x) = x Phi(x), exact (erf) form, as nn/gelu.h: the one expression of the gelu op and this epilogue
RETRO_SIMT_HOST_DEVICE float gelu_exact(float x) { return 0.5f * x * (1.0f + erff(x * kRsqrt2)); }

// Shared memory a launch takes: NORM's normalised rows.
RETRO_SIMT_HOST_DEVICE ll smem_bytes(int rows, ll I, bool norm) { return norm ? static_cast<ll>(rows) * I * 4 : 0; }

// grid: any (grid-stride over o, kWarps columns a block), kThreads threads, smem_bytes(NR, I, NORM). VEC4: I % 4 == 0
// and W (and x, without NORM) 16-byte aligned. scale = I^-1/2 and eps: NORM's (ignored otherwise).
template <int NR, bool VEC4, bool NORM>
RETRO_SIMT_KERNEL(kThreads)
linear_rows_gemv(float* y, float* __restrict__ h, const float* __restrict__ x, const float* __restrict__ W,
                 const float* __restrict__ b, const float* res, const float* __restrict__ gamma, ll I, ll O, int out,
                 float scale, float eps) {
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
    const ll first = (simt::block_x() * kThreads + simt::thread_x()) / 32, warps = simt::grid_x() * kWarps;
    for (ll o = first; o < O; o += warps) {
        const float* w = W + o * I;
        const float bias = b && lane == 0 ? b[o] : 0.0f;   // loaded with the row, not after it
        float acc[NR];
        for (int r = 0; r < NR; r++) acc[r] = 0.0f;
        if constexpr (VEC4) {
            // unrolled: several 512-byte row pieces in flight a warp (the loads, not the FMAs, bound a 1-row GEMV;
            // session 20's ncu table: 5 us a call for 1-4 MB of weights); the same order of sums per lane
            RETRO_GEMV_UNROLL4
            for (ll q = lane; q < I / 4; q += 32) {
                float wv[4];
                simt::load_float4(wv, w + 4 * q);
                for (int r = 0; r < NR; r++) {
                    float xv[4];
                    simt::load_float4(xv, xin + r * I + 4 * q);
                    acc[r] += wv[0] * xv[0] + wv[1] * xv[1] + wv[2] * xv[2] + wv[3] * xv[3];
                }
            }
        } else {
            for (ll i = lane; i < I; i += 32) {
                const float wv = w[i];
                for (int r = 0; r < NR; r++) acc[r] += wv * xin[r * I + i];
            }
        }
        for (int r = 0; r < NR; r++) acc[r] = rows::warp_sum(acc[r]);
        if (lane == 0)
            for (int r = 0; r < NR; r++) {
                const float v = b ? acc[r] + bias : acc[r];
                if (out == static_cast<int>(GemvOut::gelu)) {
                    if (h) h[r * O + o] = v;
                    y[r * O + o] = gelu_exact(v);
                } else if (out == static_cast<int>(GemvOut::residual)) {
                    y[r * O + o] = res[r * O + o] + v;
                } else {
                    y[r * O + o] = v;
                }
            }
    }
}

}  // namespace retro::nn::gemv
