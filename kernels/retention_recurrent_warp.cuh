// Recurrent retention's four state walks fused over time with the state in registers (fla's fused_recurrent shape,
// RETENTION.md §1 and §6): each lane owns one line of the K x V state — a column j where its output is indexed by j
// (o, dv), a row i where it is indexed by i (dq, dk) — so a token's output is a sum along the lane's own line, with
// no reduction across lanes. Per token the two vectors that run along the line (e.g. k_t and q_t for o) are loaded
// once, 32 consecutive elements a warp load, and broadcast to the lanes by shuffles:
//   fwd_o  (line S[:, j]):  S = a S + k_t v_t[j];            o_t[j]  = scale Σ_i q_t[i] S[i][j]      ht = S
//   fwd_dq (line S[i, :]):  S = a S + k_t[i] v_t;            dq_t[i] = scale Σ_j S[i][j] dO_t[j]
//   rev_dk (line G[i, :]):  G = a G + (scale q_t[i]) dO_t;   dk_t[i] = Σ_j G[i][j] v_t[j]          dh0 = gamma G
//   rev_dv (line G[:, j]):  G = a G + (scale q_t) dO_t[j];   dv_t[j] = Σ_i G[i][j] k_t[i]
// with a = gamma, except a = 1 at the first step of a reverse walk (G starts at dht), as the shared-memory walk of
// kernels/retention_common.cuh (walk_kernel, RECUR), which stays the path for lines longer than 128. The state
// starts from h0 / dht or 0. Four independent warps a block, 32 lines each; lanes past the owned dimension shuffle
// along with zeros and store nothing. Inputs and outputs are fp32 or bf16 (bits, u16); the state is fp32.
// Compiled by nvcc (kernels/retention_recurrent.cu) and on the host over tests/simt_host.h
// (tests/test_retention_recurrent_host.cpp, against lib/retention/recurrent.h in double).
#pragma once

#include <cstdint>

#include "simt.cuh"

namespace retro::retention::recurrent_warp {

using ll = long long;
using u16 = std::uint16_t;

constexpr int kMaxHeads = 128;
constexpr int kWarps = 4, kThreads = kWarps * 32, kLines = kThreads;   // lines (state rows or columns) a block

enum class WalkKind { fwd_o, fwd_dq, rev_dk, rev_dv };

struct WalkArgs {
    ll B, T, H, K, V;   // q, k: [B, T, H, K]; v, dO: [B, T, H, V]; states [B, H, K, V]
    float scale;
};
struct WalkDecays {   // natural log of gamma per head, by value
    float lg[kMaxHeads];
};

RETRO_SIMT_DEVICE float load_value(const float* p) { return *p; }
RETRO_SIMT_DEVICE float load_value(const u16* p) { return simt::bf16_value(*p); }
RETRO_SIMT_DEVICE void store_value(float* p, float x) { *p = x; }
RETRO_SIMT_DEVICE void store_value(u16* p, float x) { *p = simt::bf16_bits(x); }

// Whether a walk's line (its length: K for o and dv, V for dq and dk) fits the kernel for LMAX.
RETRO_SIMT_HOST_DEVICE bool fits(WalkKind w, ll K, ll V, int lmax) {
    const bool column = w == WalkKind::fwd_o || w == WalkKind::rev_dv;
    return (column ? K : V) <= lmax;
}

// One walk; grid (ceil(owned / kLines), B * H) with owned = V for o and dv, K for dq and dk; kThreads threads, no
// shared memory. out [B, T, H, owned] (=); init [B, H, K, V] or null; fin (ht for fwd_o, dh0 for rev_dk) or null.
template <int LMAX, typename X, WalkKind W>
RETRO_SIMT_KERNEL(kThreads)
recurrent_walk_warp(const X* __restrict__ q, const X* __restrict__ k, const X* __restrict__ v,
                    const X* __restrict__ dO, X* __restrict__ out, const float* init, float* fin, WalkArgs p,
                    WalkDecays g) {   // init and fin may be one buffer (a decode step's state in place)
    constexpr bool column = W == WalkKind::fwd_o || W == WalkKind::rev_dv;   // the lane owns a column j of the state
    constexpr bool reverse = W == WalkKind::rev_dk || W == WalkKind::rev_dv;
    constexpr int R = LMAX / 32;
    const ll bh = simt::block_y(), b = bh / p.H, h = bh % p.H;
    const int lane = simt::thread_x() % 32;
    const ll own = simt::block_x() * kLines + simt::thread_x();
    const ll owned = column ? p.V : p.K, len = column ? p.K : p.V;
    const bool valid = own < owned;
    const float gamma = simt::exp2_fast(g.lg[h] * 1.4426950408889634f);

    // the state line: element l is S[l][own] (column) or S[own][l] (row)
    float line[LMAX];
    const float* S0 = init ? init + bh * p.K * p.V : nullptr;
RETRO_SIMT_UNROLL
    for (int l = 0; l < LMAX; ++l) {
        float x = 0.0f;
        if (S0 && valid && l < len) x = column ? S0[l * p.V + own] : S0[own * p.V + l];
        line[l] = x;
    }
    // per token: the update's vector along the line, the update's own scalar, the output's vector along the line
    const X* upd_vec = W == WalkKind::fwd_o ? k : W == WalkKind::fwd_dq ? v : W == WalkKind::rev_dk ? dO : q;
    const X* upd_own = W == WalkKind::fwd_o ? v : W == WalkKind::fwd_dq ? k : W == WalkKind::rev_dk ? q : dO;
    const X* out_vec = W == WalkKind::fwd_o ? q : W == WalkKind::fwd_dq ? dO : W == WalkKind::rev_dk ? v : k;
    const float upd_coef = reverse ? p.scale : 1.0f, out_coef = reverse ? 1.0f : p.scale;
    // token t's vectors along the line (32 consecutive elements a warp load) and the own scalar; the next token's
    // are loaded while this one computes
    auto load_token = [&](ll t, float (&uv)[R], float (&ov)[R], float& u) {
        const ll row = (b * p.T + t) * p.H + h;   // (b, t, h)
RETRO_SIMT_UNROLL
        for (int r = 0; r < R; ++r) {
            const ll l = r * 32 + lane;
            uv[r] = l < len ? load_value(upd_vec + row * len + l) : 0.0f;
            ov[r] = l < len ? load_value(out_vec + row * len + l) : 0.0f;
        }
        u = valid ? upd_coef * load_value(upd_own + row * owned + own) : 0.0f;
    };
    float uv[R], ov[R], u;
    load_token(reverse ? p.T - 1 : 0, uv, ov, u);
    for (ll step = 0; step < p.T; ++step) {
        const ll t = reverse ? p.T - 1 - step : step;
        float nuv[R] = {}, nov[R] = {}, nu = 0.0f;
        if (step + 1 < p.T) load_token(reverse ? t - 1 : t + 1, nuv, nov, nu);
        const float a = reverse && step == 0 ? 1.0f : gamma;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
RETRO_SIMT_UNROLL
        for (int r = 0; r < R; ++r)
RETRO_SIMT_UNROLL
            for (int s = 0; s < 32; ++s) {
                const int l = r * 32 + s;
                const float x = simt::shfl_idx(uv[r], s), y = simt::shfl_idx(ov[r], s);
                line[l] = a * line[l] + x * u;   // x: the line's element of the update vector, u: the own scalar
                acc[l % 4] += line[l] * y;
            }
        if (valid)
            store_value(out + ((b * p.T + t) * p.H + h) * owned + own,
                        out_coef * ((acc[0] + acc[1]) + (acc[2] + acc[3])));
        if (step + 1 < p.T) {
RETRO_SIMT_UNROLL
            for (int r = 0; r < R; ++r) {
                uv[r] = nuv[r];
                ov[r] = nov[r];
            }
            u = nu;
        }
    }
    if (fin && valid && (W == WalkKind::fwd_o || W == WalkKind::rev_dk)) {
        const float f = W == WalkKind::rev_dk ? gamma : 1.0f;   // dh0 = gamma G_0
        float* F = fin + bh * p.K * p.V;
RETRO_SIMT_UNROLL
        for (int l = 0; l < LMAX; ++l)
            if (l < len) {
                if (column) F[l * p.V + own] = f * line[l];
                else F[own * p.V + l] = f * line[l];
            }
    }
}

}  // namespace retro::retention::recurrent_warp
