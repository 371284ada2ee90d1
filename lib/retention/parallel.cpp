// Parallel retention (parallel.h). Query blocks of 64 tokens run in parallel over (b, h, block); each
// computes its scores against the causal prefix with one GEMM. Decay across blocks is factored as
// gamma^(n-m) = gamma^(n-n0)·gamma^(n0-m) with both exponents >= 0, so nothing is ever exponentiated above 1.
#include "retention/parallel.h"

#include <algorithm>
#include <vector>

#include "core/threads.h"
#include "retention/blas.h"

namespace retro::retention {
namespace {

constexpr std::int64_t kBlock = 64;

template <typename F>
std::vector<std::vector<F>> head_tables(const Shape& s, const Resolved& r) {   // gamma^d, d in [0, T]
    std::vector<std::vector<F>> t(static_cast<std::size_t>(s.H));
    for (std::int64_t h = 0; h < s.H; ++h) {
        t[h].resize(static_cast<std::size_t>(s.T + 1));
        decay_table<F>(r.log_gamma[h], s.T + 1, t[h].data());
    }
    return t;
}

// P is L×width with row i = position n0+i and column c = position c (c < n0 + L). Multiplies by D[n,c].
template <typename F>
void decay_query_block(F* P, std::int64_t L, std::int64_t n0, std::int64_t width, const F* pw) {
    for (std::int64_t i = 0; i < L; ++i) {
        F* row = P + i * width;
        const F a = pw[i];
        for (std::int64_t c = 0; c < n0; ++c) row[c] *= a * pw[n0 - c];
        for (std::int64_t c = n0; c < width; ++c) row[c] = (c - n0 <= i) ? row[c] * pw[i - (c - n0)] : F(0);
    }
}

// Pt is L×N with row i = key position m0+i and column c = query position m0+c. Multiplies by D[m0+c, m0+i].
template <typename F>
void decay_key_block(F* Pt, std::int64_t L, std::int64_t N, const F* pw) {
    for (std::int64_t i = 0; i < L; ++i) {
        F* row = Pt + i * N;
        for (std::int64_t c = 0; c < L; ++c) row[c] = (c >= i) ? row[c] * pw[c - i] : F(0);
        const F a = pw[L - i];
        for (std::int64_t c = L; c < N; ++c) row[c] *= a * pw[c - L];
    }
}

// One query block's product, shared by the forward and dQ (the same math with the roles of K and V swapped):
// out[n0, n0+L) = (scale X Y^T ⊙ D) Z + (X ⊙ scale xi) S0' with xi_n = gamma^(n+1), S0' = S0 (forward: X = Q,
// Y = K, Z = V) or S0^T (dQ: X = dO, Y = V, Z = K). X, out: the block's rows; Y, Z: rows from 0 of (b, h);
// dx, dz: the widths of X/Y and Z/out rows (their strides H·dx, H·dz); S0 is K×V in both cases (K = dx forward).
template <typename F>
void query_block_product(const Shape& s, std::int64_t n0, std::int64_t L, F scale, const F* pw, const F* X,
                         const F* Y, const F* Z, std::int64_t dx, std::int64_t dz, const F* S0, bool S0_transposed,
                         F* out) {
    const std::int64_t n1 = n0 + L;
    const int iL = static_cast<int>(L), in1 = static_cast<int>(n1), idx = static_cast<int>(dx),
              idz = static_cast<int>(dz), ix = static_cast<int>(s.H * dx), iz = static_cast<int>(s.H * dz);
    std::vector<F> P(static_cast<std::size_t>(L * n1));
    gemm(false, true, iL, in1, idx, scale, X, ix, Y, ix, F(0), P.data(), in1);
    decay_query_block(P.data(), L, n0, n1, pw);
    gemm(false, false, iL, idz, in1, F(1), P.data(), in1, Z, iz, F(0), out, iz);
    if (!S0) return;
    std::vector<F> w(static_cast<std::size_t>(L)), Xs(static_cast<std::size_t>(L * dx));
    for (std::int64_t i = 0; i < L; ++i) w[i] = scale * pw[n0 + i + 1];
    scaled_rows(X, s.H * dx, L, dx, w.data(), Xs.data());
    const int ld_S0 = S0_transposed ? idx : idz;   // S0 is K×V: V wide
    gemm(false, S0_transposed, iL, idz, idx, F(1), Xs.data(), idx, S0, ld_S0, F(1), out, iz);
}

}  // namespace

template <typename F>
void parallel_forward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                      F* o, F* ht) {
    const Resolved r = resolve(s, opt);
    const std::int64_t T = s.T, K = s.K, V = s.V;
    const int iK = static_cast<int>(K), iV = static_cast<int>(V), iHK = static_cast<int>(s.H * K);
    const auto pw = head_tables<F>(s, r);
    const std::int64_t blocks = (T + kBlock - 1) / kBlock;
    const F scale = static_cast<F>(r.scale);
    BlasSingleThread blas1;
    parallel_for(s.B * s.H * blocks, [&](std::int64_t task) {
        const std::int64_t bh = task / blocks, n0 = (task % blocks) * kBlock, L = std::min(kBlock, T - n0);
        const std::int64_t b = bh / s.H, h = bh % s.H;
        query_block_product(s, n0, L, scale, pw[h].data(), q + row_offset(s, b, n0, h, K), k + row_offset(s, b, 0, h, K),
                            v + row_offset(s, b, 0, h, V), K, V, h0 ? h0 + state_offset(s, b, h) : nullptr, false,
                            o + row_offset(s, b, n0, h, V));
    });
    if (!ht) return;
    parallel_for(s.B * s.H, [&](std::int64_t bh) {   // ht = gamma^T S0 + K^T (V ⊙ zeta)
        const std::int64_t b = bh / s.H, h = bh % s.H;
        F* St = ht + state_offset(s, b, h);
        if (h0) std::copy(h0 + state_offset(s, b, h), h0 + state_offset(s, b, h) + K * V, St);
        else std::fill(St, St + K * V, F(0));
        std::vector<F> zeta(static_cast<std::size_t>(T)), Vz(static_cast<std::size_t>(T * V));
        for (std::int64_t m = 0; m < T; ++m) zeta[m] = pw[h][T - 1 - m];
        scaled_rows(v + row_offset(s, b, 0, h, V), s.H * V, T, V, zeta.data(), Vz.data());
        gemm(true, false, iK, iV, static_cast<int>(T), F(1), k + row_offset(s, b, 0, h, K), iHK, Vz.data(), iV,
             h0 ? pw[h][T] : F(0), St, iV);
    });
}

template <typename F>
void parallel_backward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                       const F* dO, const F* dht, F* dq, F* dk, F* dv, F* dh0) {
    const Resolved r = resolve(s, opt);
    const std::int64_t T = s.T, K = s.K, V = s.V;
    const int iK = static_cast<int>(K), iV = static_cast<int>(V), iHK = static_cast<int>(s.H * K),
              iHV = static_cast<int>(s.H * V);
    const auto pw = head_tables<F>(s, r);
    const std::int64_t blocks = (T + kBlock - 1) / kBlock;
    const F scale = static_cast<F>(r.scale);
    BlasSingleThread blas1;
    // dQ over query blocks: dP = scale (dO V^T ⊙ D), dQ = dP K + (dO ⊙ scale xi) S0^T.
    parallel_for(s.B * s.H * blocks, [&](std::int64_t task) {
        const std::int64_t bh = task / blocks, n0 = (task % blocks) * kBlock, L = std::min(kBlock, T - n0);
        const std::int64_t b = bh / s.H, h = bh % s.H;
        query_block_product(s, n0, L, scale, pw[h].data(), dO + row_offset(s, b, n0, h, V), v + row_offset(s, b, 0, h, V),
                            k + row_offset(s, b, 0, h, K), V, K, h0 ? h0 + state_offset(s, b, h) : nullptr, true,
                            dq + row_offset(s, b, n0, h, K));
    });
    // dK, dV over key blocks [m0, m0+L) against queries [m0, T).
    parallel_for(s.B * s.H * blocks, [&](std::int64_t task) {
        const std::int64_t bh = task / blocks, m0 = (task % blocks) * kBlock, L = std::min(kBlock, T - m0);
        const std::int64_t b = bh / s.H, h = bh % s.H, N = T - m0;
        const F* kb = k + row_offset(s, b, m0, h, K);
        const F* vb = v + row_offset(s, b, m0, h, V);
        const F* qn = q + row_offset(s, b, m0, h, K);
        const F* don = dO + row_offset(s, b, m0, h, V);
        F* dkb = dk + row_offset(s, b, m0, h, K);
        F* dvb = dv + row_offset(s, b, m0, h, V);
        const int iL = static_cast<int>(L), iN = static_cast<int>(N);
        std::vector<F> P(static_cast<std::size_t>(L * N));
        gemm(false, true, iL, iN, iK, scale, kb, iHK, qn, iHK, F(0), P.data(), iN);     // A^T rows
        decay_key_block(P.data(), L, N, pw[h].data());
        gemm(false, false, iL, iV, iN, F(1), P.data(), iN, don, iHV, F(0), dvb, iHV);    // dV = A^T dO
        gemm(false, true, iL, iN, iV, scale, vb, iHV, don, iHV, F(0), P.data(), iN);    // dP^T rows
        decay_key_block(P.data(), L, N, pw[h].data());
        gemm(false, false, iL, iK, iN, F(1), P.data(), iN, qn, iHK, F(0), dkb, iHK);     // dK = dP^T Q
        if (dht) {   // dk_m += zeta_m dht v_m, dv_m += zeta_m dht^T k_m
            const F* G = dht + state_offset(s, b, h);
            std::vector<F> z(static_cast<std::size_t>(L)), Vz(static_cast<std::size_t>(L * V)),
                Kz(static_cast<std::size_t>(L * K));
            for (std::int64_t i = 0; i < L; ++i) z[i] = pw[h][T - 1 - (m0 + i)];
            scaled_rows(vb, s.H * V, L, V, z.data(), Vz.data());
            scaled_rows(kb, s.H * K, L, K, z.data(), Kz.data());
            gemm(false, true, iL, iK, iV, F(1), Vz.data(), iV, G, iV, F(1), dkb, iHK);
            gemm(false, false, iL, iV, iK, F(1), Kz.data(), iK, G, iV, F(1), dvb, iHV);
        }
    });
    if (!dh0) return;
    parallel_for(s.B * s.H, [&](std::int64_t bh) {   // dh0 = gamma^T dht + (Q ⊙ scale xi)^T dO
        const std::int64_t b = bh / s.H, h = bh % s.H;
        F* d0 = dh0 + state_offset(s, b, h);
        if (dht) std::copy(dht + state_offset(s, b, h), dht + state_offset(s, b, h) + K * V, d0);
        else std::fill(d0, d0 + K * V, F(0));
        std::vector<F> w(static_cast<std::size_t>(T)), Qx(static_cast<std::size_t>(T * K));
        for (std::int64_t n = 0; n < T; ++n) w[n] = scale * pw[h][n + 1];
        scaled_rows(q + row_offset(s, b, 0, h, K), s.H * K, T, K, w.data(), Qx.data());
        gemm(true, false, iK, iV, static_cast<int>(T), F(1), Qx.data(), iK, dO + row_offset(s, b, 0, h, V), iHV,
             dht ? pw[h][T] : F(0), d0, iV);
    });
}

template <typename F>
void parallel_last_row(const Shape& s, const Options& opt, const F* q_last, const F* k, const F* v,
                       const F* h0, F* o_last) {
    const Resolved r = resolve(s, opt);
    const std::int64_t T = s.T, K = s.K, V = s.V;
    const int iK = static_cast<int>(K), iV = static_cast<int>(V), iHK = static_cast<int>(s.H * K),
              iHV = static_cast<int>(s.H * V), iT = static_cast<int>(T);
    const F scale = static_cast<F>(r.scale);
    BlasSingleThread blas1;
    parallel_for(s.B * s.H, [&](std::int64_t bh) {
        const std::int64_t b = bh / s.H, h = bh % s.H;
        const F* qh = q_last + (b * s.H + h) * K;
        F* oh = o_last + (b * s.H + h) * V;
        std::vector<F> w(static_cast<std::size_t>(T)), pw(static_cast<std::size_t>(T + 1));
        decay_table<F>(r.log_gamma[h], T + 1, pw.data());
        gemm(false, true, 1, iT, iK, scale, qh, iK, k + row_offset(s, b, 0, h, K), iHK, F(0), w.data(), iT);
        for (std::int64_t m = 0; m < T; ++m) w[m] *= pw[T - 1 - m];
        gemm(false, false, 1, iV, iT, F(1), w.data(), iT, v + row_offset(s, b, 0, h, V), iHV, F(0), oh, iV);
        if (h0)
            gemm(false, false, 1, iV, iK, scale * pw[T], qh, iK, h0 + state_offset(s, b, h), iV, F(1), oh, iV);
    });
}

#define RETRO_PARALLEL_INSTANTIATE(F)                                                                   \
    template void parallel_forward<F>(const Shape&, const Options&, const F*, const F*, const F*,       \
                                      const F*, F*, F*);                                                \
    template void parallel_backward<F>(const Shape&, const Options&, const F*, const F*, const F*,      \
                                       const F*, const F*, const F*, F*, F*, F*, F*);                   \
    template void parallel_last_row<F>(const Shape&, const Options&, const F*, const F*, const F*,      \
                                       const F*, F*);
RETRO_PARALLEL_INSTANTIATE(float)
RETRO_PARALLEL_INSTANTIATE(double)

}  // namespace retro::retention
