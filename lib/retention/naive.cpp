// Naive retention (naive.h): the T×T mask D[n,m] = exp2((n-m)·log2 gamma)·[n>=m] materialised in F,
// dense products over all (n, m) pairs, so an overflowing mask entry (inf·0 = NaN) reaches the output,
// as in fla's naive.py (RETENTION.md §5). Backward: dV = A^T dO, dP = scale(dO V^T ⊙ D), dQ = dP K, dK = dP^T Q (§6).
#include "retention/naive.h"

#include <cmath>
#include <vector>

#include "core/threads.h"
#include "retention/blas.h"

namespace retro::retention {
namespace {

// Fills the full T×T mask in F: positive exponents above the diagonal are evaluated, then masked.
template <typename F>
void fill_mask(std::int64_t T, double log_gamma, std::vector<F>& D) {
    const F log2g = static_cast<F>(log_gamma / std::log(2.0));
    D.resize(static_cast<std::size_t>(T * T));
    for (std::int64_t n = 0; n < T; ++n)
        for (std::int64_t m = 0; m < T; ++m)
            D[n * T + m] = std::exp2(static_cast<F>(n - m) * log2g) * static_cast<F>(n >= m ? 1 : 0);
}

template <typename F>
F pow_exp2(double log_gamma, std::int64_t d) {   // gamma^d the naive way (d >= 0 here)
    return std::exp2(static_cast<F>(d) * static_cast<F>(log_gamma / std::log(2.0)));
}

template <typename F>
std::int64_t count_nonfinite(const F* x, std::int64_t n) {
    std::int64_t c = 0;
    for (std::int64_t i = 0; i < n; ++i) c += std::isfinite(x[i]) ? 0 : 1;
    return c;
}

}  // namespace

template <typename F>
NaiveReport naive_forward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v,
                          const F* h0, F* o, F* ht) {
    const Resolved r = resolve(s, opt);
    const std::int64_t T = s.T, K = s.K, V = s.V, HK = s.H * K, HV = s.H * V;
    const int iT = static_cast<int>(T), iK = static_cast<int>(K), iV = static_cast<int>(V);
    BlasSingleThread blas1;
    parallel_for(s.B * s.H, [&](std::int64_t bh) {
        const std::int64_t b = bh / s.H, h = bh % s.H;
        const double lg = r.log_gamma[h];
        const F scale = static_cast<F>(r.scale);
        const F* qb = q + row_offset(s, b, 0, h, K);
        const F* kb = k + row_offset(s, b, 0, h, K);
        const F* vb = v + row_offset(s, b, 0, h, V);
        F* ob = o + row_offset(s, b, 0, h, V);
        std::vector<F> D, P(static_cast<std::size_t>(T * T));
        fill_mask(T, lg, D);
        gemm(false, true, iT, iT, iK, scale, qb, static_cast<int>(HK), kb, static_cast<int>(HK), F(0), P.data(), iT);
        for (std::int64_t i = 0; i < T * T; ++i) P[i] *= D[i];
        gemm(false, false, iT, iV, iT, F(1), P.data(), iT, vb, static_cast<int>(HV), F(0), ob, static_cast<int>(HV));
        const F* S0 = h0 ? h0 + state_offset(s, b, h) : nullptr;
        if (S0)
            for (std::int64_t n = 0; n < T; ++n) {
                const F c = scale * pow_exp2<F>(lg, n + 1);
                for (std::int64_t j = 0; j < V; ++j) {
                    F acc = 0;
                    for (std::int64_t i = 0; i < K; ++i) acc += qb[n * HK + i] * S0[i * V + j];
                    ob[n * HV + j] += c * acc;
                }
            }
        if (ht) {
            F* St = ht + state_offset(s, b, h);
            const F gT = pow_exp2<F>(lg, T);
            for (std::int64_t i = 0; i < K * V; ++i) St[i] = S0 ? gT * S0[i] : F(0);
            for (std::int64_t m = 0; m < T; ++m) {
                const F z = pow_exp2<F>(lg, T - 1 - m);
                for (std::int64_t i = 0; i < K; ++i)
                    for (std::int64_t j = 0; j < V; ++j) St[i * V + j] += z * kb[m * HK + i] * vb[m * HV + j];
            }
        }
    });
    NaiveReport rep;
    rep.nonfinite = count_nonfinite(o, s.B * T * HV) + (ht ? count_nonfinite(ht, s.B * s.H * K * V) : 0);
    return rep;
}

template <typename F>
NaiveReport naive_backward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v,
                           const F* h0, const F* dO, const F* dht, F* dq, F* dk, F* dv, F* dh0) {
    const Resolved r = resolve(s, opt);
    const std::int64_t T = s.T, K = s.K, V = s.V, HK = s.H * K, HV = s.H * V;
    const int iT = static_cast<int>(T), iK = static_cast<int>(K), iV = static_cast<int>(V);
    const int iHK = static_cast<int>(HK), iHV = static_cast<int>(HV);
    BlasSingleThread blas1;
    parallel_for(s.B * s.H, [&](std::int64_t bh) {
        const std::int64_t b = bh / s.H, h = bh % s.H;
        const double lg = r.log_gamma[h];
        const F scale = static_cast<F>(r.scale);
        const F* qb = q + row_offset(s, b, 0, h, K);
        const F* kb = k + row_offset(s, b, 0, h, K);
        const F* vb = v + row_offset(s, b, 0, h, V);
        const F* dob = dO + row_offset(s, b, 0, h, V);
        F* dqb = dq + row_offset(s, b, 0, h, K);
        F* dkb = dk + row_offset(s, b, 0, h, K);
        F* dvb = dv + row_offset(s, b, 0, h, V);
        std::vector<F> D, A(static_cast<std::size_t>(T * T)), dP(static_cast<std::size_t>(T * T));
        fill_mask(T, lg, D);
        gemm(false, true, iT, iT, iK, scale, qb, iHK, kb, iHK, F(0), A.data(), iT);         // A = scale QK^T ⊙ D
        gemm(false, true, iT, iT, iV, scale, dob, iHV, vb, iHV, F(0), dP.data(), iT);       // dP = scale dO V^T ⊙ D
        for (std::int64_t i = 0; i < T * T; ++i) {
            A[i] *= D[i];
            dP[i] *= D[i];
        }
        gemm(true, false, iT, iV, iT, F(1), A.data(), iT, dob, iHV, F(0), dvb, iHV);        // dV = A^T dO
        gemm(false, false, iT, iK, iT, F(1), dP.data(), iT, kb, iHK, F(0), dqb, iHK);       // dQ = dP K
        gemm(true, false, iT, iK, iT, F(1), dP.data(), iT, qb, iHK, F(0), dkb, iHK);        // dK = dP^T Q
        const F* S0 = h0 ? h0 + state_offset(s, b, h) : nullptr;
        const F* G = dht ? dht + state_offset(s, b, h) : nullptr;
        if (S0)   // dq_n += scale gamma^(n+1) S0 do_n
            for (std::int64_t n = 0; n < T; ++n) {
                const F c = scale * pow_exp2<F>(lg, n + 1);
                for (std::int64_t i = 0; i < K; ++i) {
                    F acc = 0;
                    for (std::int64_t j = 0; j < V; ++j) acc += S0[i * V + j] * dob[n * HV + j];
                    dqb[n * HK + i] += c * acc;
                }
            }
        if (G)    // dk_m += gamma^(T-1-m) dht v_m, dv_m += gamma^(T-1-m) dht^T k_m
            for (std::int64_t m = 0; m < T; ++m) {
                const F z = pow_exp2<F>(lg, T - 1 - m);
                for (std::int64_t i = 0; i < K; ++i) {
                    F acc = 0;
                    for (std::int64_t j = 0; j < V; ++j) acc += G[i * V + j] * vb[m * HV + j];
                    dkb[m * HK + i] += z * acc;
                }
                for (std::int64_t j = 0; j < V; ++j) {
                    F acc = 0;
                    for (std::int64_t i = 0; i < K; ++i) acc += G[i * V + j] * kb[m * HK + i];
                    dvb[m * HV + j] += z * acc;
                }
            }
        if (dh0) {   // dh0 = gamma^T dht + scale sum_n gamma^(n+1) q_n^T do_n
            F* d0 = dh0 + state_offset(s, b, h);
            const F gT = pow_exp2<F>(lg, T);
            for (std::int64_t i = 0; i < K * V; ++i) d0[i] = G ? gT * G[i] : F(0);
            for (std::int64_t n = 0; n < T; ++n) {
                const F c = scale * pow_exp2<F>(lg, n + 1);
                for (std::int64_t i = 0; i < K; ++i)
                    for (std::int64_t j = 0; j < V; ++j) d0[i * V + j] += c * qb[n * HK + i] * dob[n * HV + j];
            }
        }
    });
    NaiveReport rep;
    rep.nonfinite = count_nonfinite(dq, s.B * T * HK) + count_nonfinite(dk, s.B * T * HK) +
                    count_nonfinite(dv, s.B * T * HV) + (dh0 ? count_nonfinite(dh0, s.B * s.H * K * V) : 0);
    return rep;
}

#define RETRO_NAIVE_INSTANTIATE(F)                                                                      \
    template NaiveReport naive_forward<F>(const Shape&, const Options&, const F*, const F*, const F*,   \
                                          const F*, F*, F*);                                            \
    template NaiveReport naive_backward<F>(const Shape&, const Options&, const F*, const F*, const F*,  \
                                           const F*, const F*, const F*, F*, F*, F*, F*);
RETRO_NAIVE_INSTANTIATE(float)
RETRO_NAIVE_INSTANTIATE(double)

}  // namespace retro::retention
