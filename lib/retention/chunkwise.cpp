// Chunkwise retention (chunkwise.h). With enough heads: one fused, cache-resident pass per head; otherwise
// intra-chunk products in parallel over (b, h, chunk), then a state walk per (b, h). Every product is an
// OpenBLAS GEMM on strided views of the [B,T,H,D] inputs; decay factors come from one gamma^d table.
#include "retention/chunkwise.h"

#include <algorithm>
#include <vector>

#include "core/threads.h"
#include "retention/blas.h"

namespace retro::retention {
namespace {

struct Plan {
    Resolved r;
    std::int64_t C, chunks;
    int K, V, HK, HV;
};

Plan make_plan(const Shape& s, const Options& opt) {
    Plan p{resolve(s, opt), std::min(opt.chunk_size, s.T), 0, static_cast<int>(s.K), static_cast<int>(s.V),
           static_cast<int>(s.H * s.K), static_cast<int>(s.H * s.V)};
    p.chunks = (s.T + p.C - 1) / p.C;
    return p;
}

template <typename F>
std::vector<F> powers(double log_gamma, std::int64_t n) {   // gamma^d, d in [0, n]
    std::vector<F> pw(static_cast<std::size_t>(n + 1));
    decay_table<F>(log_gamma, n + 1, pw.data());
    return pw;
}

// A (L×L) *= D: A[i][j] = gamma^(i-j) for j <= i, else 0.
template <typename F>
void apply_causal_decay(F* A, std::int64_t L, const F* pw) {
    for (std::int64_t i = 0; i < L; ++i)
        for (std::int64_t j = 0; j < L; ++j) A[i * L + j] = j <= i ? A[i * L + j] * pw[i - j] : F(0);
}

}  // namespace

// One head, chunks in order, everything cache-resident: with W = [A | Q_c ⊙ scale xi] (L × (C+K)) and
// Z = [V_c ; S_prev] ((C+K) × V), O_c = W Z is a single GEMM; then S = gamma^L S + K_c^T (V_c ⊙ zeta).
template <typename F>
void forward_head_fused(const Shape& s, const Plan& p, std::int64_t b, std::int64_t h, const F* q, const F* k,
                        const F* v, const F* h0, F* o, F* ht) {
    const F scale = static_cast<F>(p.r.scale);
    const std::int64_t C = p.C, W_ld = C + s.K;
    const auto pw = powers<F>(p.r.log_gamma[h], C);
    std::vector<F> W(static_cast<std::size_t>(C * W_ld), F(0)), Z(static_cast<std::size_t>(W_ld * s.V), F(0));
    F* S = Z.data() + C * s.V;   // the state lives in the last K rows of Z
    bool has_state = h0 != nullptr;
    if (h0) std::copy(h0 + state_offset(s, b, h), h0 + state_offset(s, b, h) + s.K * s.V, S);
    for (std::int64_t c = 0; c < p.chunks; ++c) {
        const std::int64_t t0 = c * C, L = std::min(C, s.T - t0);
        const int iL = static_cast<int>(L);
        const F* qc = q + row_offset(s, b, t0, h, s.K);
        const F* kc = k + row_offset(s, b, t0, h, s.K);
        const F* vc = v + row_offset(s, b, t0, h, s.V);
        gemm(false, true, iL, iL, p.K, scale, qc, p.HK, kc, p.HK, F(0), W.data(), static_cast<int>(W_ld));
        for (std::int64_t i = 0; i < L; ++i) {
            F* row = W.data() + i * W_ld;
            for (std::int64_t j = 0; j < L; ++j) row[j] = j <= i ? row[j] * pw[i - j] : F(0);
            for (std::int64_t j = L; j < C; ++j) row[j] = F(0);
            const F x = has_state ? scale * pw[i + 1] : F(0);
            for (std::int64_t j = 0; j < s.K; ++j) row[C + j] = x * qc[i * p.HK + j];
        }
        for (std::int64_t i = 0; i < L; ++i) std::copy(vc + i * p.HV, vc + i * p.HV + s.V, Z.data() + i * s.V);
        gemm(false, false, iL, p.V, static_cast<int>(W_ld), F(1), W.data(), static_cast<int>(W_ld), Z.data(), p.V,
             F(0), o + row_offset(s, b, t0, h, s.V), p.HV);
        for (std::int64_t i = 0; i < L; ++i)
            for (std::int64_t j = 0; j < s.V; ++j) Z[i * s.V + j] *= pw[L - 1 - i];   // V_c ⊙ zeta
        gemm(true, false, p.K, p.V, iL, F(1), kc, p.HK, Z.data(), p.V, has_state ? pw[L] : F(0), S, p.V);
        has_state = true;
    }
    if (ht) std::copy(S, S + s.K * s.V, ht + state_offset(s, b, h));
}

template <typename F>
void chunkwise_forward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                       F* o, F* ht) {
    const Plan p = make_plan(s, opt);
    const F scale = static_cast<F>(p.r.scale);
    BlasSingleThread blas1;
    if (s.B * s.H >= 2 * thread_count()) {   // enough heads to fill the threads: one fused pass per head
        parallel_for(s.B * s.H, [&](std::int64_t bh) { forward_head_fused(s, p, bh / s.H, bh % s.H, q, k, v, h0, o, ht); });
        return;
    }
    // Phase 1: O_c = scale (Q_c K_c^T ⊙ D_c) V_c.
    parallel_for(s.B * s.H * p.chunks, [&](std::int64_t task) {
        const std::int64_t bh = task / p.chunks, t0 = (task % p.chunks) * p.C, L = std::min(p.C, s.T - t0);
        const std::int64_t b = bh / s.H, h = bh % s.H;
        const int iL = static_cast<int>(L);
        const auto pw = powers<F>(p.r.log_gamma[h], L);
        std::vector<F> A(static_cast<std::size_t>(L * L));
        gemm(false, true, iL, iL, p.K, scale, q + row_offset(s, b, t0, h, s.K), p.HK, k + row_offset(s, b, t0, h, s.K),
             p.HK, F(0), A.data(), iL);
        apply_causal_decay(A.data(), L, pw.data());
        gemm(false, false, iL, p.V, iL, F(1), A.data(), iL, v + row_offset(s, b, t0, h, s.V), p.HV, F(0),
             o + row_offset(s, b, t0, h, s.V), p.HV);
    });
    // Phase 2: O_c += (Q_c ⊙ scale xi) S_prev; S = gamma^L S_prev + K_c^T (V_c ⊙ zeta).
    parallel_for(s.B * s.H, [&](std::int64_t bh) {
        const std::int64_t b = bh / s.H, h = bh % s.H;
        const auto pw = powers<F>(p.r.log_gamma[h], p.C);
        std::vector<F> S(static_cast<std::size_t>(s.K * s.V), F(0)), X(static_cast<std::size_t>(p.C * std::max(s.K, s.V))),
            w(static_cast<std::size_t>(p.C));
        bool has_state = h0 != nullptr;
        if (h0) std::copy(h0 + state_offset(s, b, h), h0 + state_offset(s, b, h) + s.K * s.V, S.begin());
        for (std::int64_t c = 0; c < p.chunks; ++c) {
            const std::int64_t t0 = c * p.C, L = std::min(p.C, s.T - t0);
            const int iL = static_cast<int>(L);
            const F* qc = q + row_offset(s, b, t0, h, s.K);
            if (has_state) {
                for (std::int64_t j = 0; j < L; ++j) w[j] = scale * pw[j + 1];
                scaled_rows(qc, p.HK, L, s.K, w.data(), X.data());
                gemm(false, false, iL, p.V, p.K, F(1), X.data(), p.K, S.data(), p.V, F(1),
                     o + row_offset(s, b, t0, h, s.V), p.HV);
            }
            for (std::int64_t j = 0; j < L; ++j) w[j] = pw[L - 1 - j];
            scaled_rows(v + row_offset(s, b, t0, h, s.V), p.HV, L, s.V, w.data(), X.data());
            gemm(true, false, p.K, p.V, iL, F(1), k + row_offset(s, b, t0, h, s.K), p.HK, X.data(), p.V,
                 has_state ? pw[L] : F(0), S.data(), p.V);
            has_state = true;
        }
        if (ht) std::copy(S.begin(), S.end(), ht + state_offset(s, b, h));
    });
}

template <typename F>
void chunkwise_backward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                        const F* dO, const F* dht, F* dq, F* dk, F* dv, F* dh0) {
    const Plan p = make_plan(s, opt);
    const F scale = static_cast<F>(p.r.scale);
    BlasSingleThread blas1;
    // Phase 1 (intra-chunk): A = scale Q K^T ⊙ D, dP = scale dO V^T ⊙ D; dQ = dP K, dK = dP^T Q, dV = A^T dO.
    parallel_for(s.B * s.H * p.chunks, [&](std::int64_t task) {
        const std::int64_t bh = task / p.chunks, t0 = (task % p.chunks) * p.C, L = std::min(p.C, s.T - t0);
        const std::int64_t b = bh / s.H, h = bh % s.H;
        const int iL = static_cast<int>(L);
        const auto pw = powers<F>(p.r.log_gamma[h], L);
        const F* qc = q + row_offset(s, b, t0, h, s.K);
        const F* kc = k + row_offset(s, b, t0, h, s.K);
        const F* vc = v + row_offset(s, b, t0, h, s.V);
        const F* doc = dO + row_offset(s, b, t0, h, s.V);
        std::vector<F> A(static_cast<std::size_t>(L * L)), dP(static_cast<std::size_t>(L * L));
        gemm(false, true, iL, iL, p.K, scale, qc, p.HK, kc, p.HK, F(0), A.data(), iL);
        gemm(false, true, iL, iL, p.V, scale, doc, p.HV, vc, p.HV, F(0), dP.data(), iL);
        apply_causal_decay(A.data(), L, pw.data());
        apply_causal_decay(dP.data(), L, pw.data());
        gemm(false, false, iL, p.K, iL, F(1), dP.data(), iL, kc, p.HK, F(0), dq + row_offset(s, b, t0, h, s.K), p.HK);
        gemm(true, false, iL, p.K, iL, F(1), dP.data(), iL, qc, p.HK, F(0), dk + row_offset(s, b, t0, h, s.K), p.HK);
        gemm(true, false, iL, p.V, iL, F(1), A.data(), iL, doc, p.HV, F(0), dv + row_offset(s, b, t0, h, s.V), p.HV);
    });
    // Phase 2 (states): forward sweep for dQ, reverse sweep for dK, dV, dh0.
    parallel_for(s.B * s.H, [&](std::int64_t bh) {
        const std::int64_t b = bh / s.H, h = bh % s.H, KV = s.K * s.V;
        const auto pw = powers<F>(p.r.log_gamma[h], p.C);
        std::vector<F> S(static_cast<std::size_t>(KV), F(0)), X(static_cast<std::size_t>(p.C * std::max(s.K, s.V))),
            Y(static_cast<std::size_t>(p.C * s.K)), w(static_cast<std::size_t>(p.C));
        bool has_state = h0 != nullptr;
        if (h0) std::copy(h0 + state_offset(s, b, h), h0 + state_offset(s, b, h) + KV, S.begin());
        for (std::int64_t c = 0; c < p.chunks; ++c) {   // dQ_c += (dO_c ⊙ scale xi) S_prev^T
            const std::int64_t t0 = c * p.C, L = std::min(p.C, s.T - t0);
            const int iL = static_cast<int>(L);
            if (has_state) {
                for (std::int64_t j = 0; j < L; ++j) w[j] = scale * pw[j + 1];
                scaled_rows(dO + row_offset(s, b, t0, h, s.V), p.HV, L, s.V, w.data(), X.data());
                gemm(false, true, iL, p.K, p.V, F(1), X.data(), p.V, S.data(), p.V, F(1),
                     dq + row_offset(s, b, t0, h, s.K), p.HK);
            }
            if (c + 1 == p.chunks) break;   // the last state is not needed here
            for (std::int64_t j = 0; j < L; ++j) w[j] = pw[L - 1 - j];
            scaled_rows(v + row_offset(s, b, t0, h, s.V), p.HV, L, s.V, w.data(), X.data());
            gemm(true, false, p.K, p.V, iL, F(1), k + row_offset(s, b, t0, h, s.K), p.HK, X.data(), p.V,
                 has_state ? pw[L] : F(0), S.data(), p.V);
            has_state = true;
        }
        std::vector<F>& G = S;   // G_c: gradient with respect to the state after chunk c
        bool has_grad = dht != nullptr;
        if (dht) std::copy(dht + state_offset(s, b, h), dht + state_offset(s, b, h) + KV, G.begin());
        for (std::int64_t c = p.chunks - 1; c >= 0; --c) {
            const std::int64_t t0 = c * p.C, L = std::min(p.C, s.T - t0);
            const int iL = static_cast<int>(L);
            if (has_grad) {   // dK_c += (V_c ⊙ zeta) G^T, dV_c += (K_c ⊙ zeta) G
                for (std::int64_t j = 0; j < L; ++j) w[j] = pw[L - 1 - j];
                scaled_rows(v + row_offset(s, b, t0, h, s.V), p.HV, L, s.V, w.data(), X.data());
                scaled_rows(k + row_offset(s, b, t0, h, s.K), p.HK, L, s.K, w.data(), Y.data());
                gemm(false, true, iL, p.K, p.V, F(1), X.data(), p.V, G.data(), p.V, F(1),
                     dk + row_offset(s, b, t0, h, s.K), p.HK);
                gemm(false, false, iL, p.V, p.K, F(1), Y.data(), p.K, G.data(), p.V, F(1),
                     dv + row_offset(s, b, t0, h, s.V), p.HV);
            }
            if (c == 0 && !dh0) break;
            for (std::int64_t j = 0; j < L; ++j) w[j] = scale * pw[j + 1];   // G = gamma^L G + (Q_c ⊙ scale xi)^T dO_c
            scaled_rows(q + row_offset(s, b, t0, h, s.K), p.HK, L, s.K, w.data(), Y.data());
            gemm(true, false, p.K, p.V, iL, F(1), Y.data(), p.K, dO + row_offset(s, b, t0, h, s.V), p.HV,
                 has_grad ? pw[L] : F(0), G.data(), p.V);
            has_grad = true;
        }
        if (dh0) std::copy(G.begin(), G.end(), dh0 + state_offset(s, b, h));
    });
}

#define RETRO_CHUNKWISE_INSTANTIATE(F)                                                                  \
    template void chunkwise_forward<F>(const Shape&, const Options&, const F*, const F*, const F*,      \
                                       const F*, F*, F*);                                               \
    template void chunkwise_backward<F>(const Shape&, const Options&, const F*, const F*, const F*,     \
                                        const F*, const F*, const F*, F*, F*, F*, F*);
RETRO_CHUNKWISE_INSTANTIATE(float)
RETRO_CHUNKWISE_INSTANTIATE(double)

}  // namespace retro::retention
