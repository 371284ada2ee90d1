// Recurrent retention (recurrent.h): one K×V state per head, one token at a time. Forward splits the
// state by columns (tiles of V), which are independent, so it runs in parallel over (b, h, V tile).
// Backward replays the states for dq, then sweeps in reverse for dk, dv, dh0 (RETENTION.md §6).
#include "retention/recurrent.h"

#include <algorithm>
#include <vector>

#include "core/threads.h"

namespace retro::retention {

template <typename F>
void recurrent_forward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                       F* o, F* ht) {
    const Resolved r = resolve(s, opt);
    const std::int64_t K = s.K, V = s.V, HK = s.H * K, HV = s.H * V;
    const std::int64_t VT = std::min<std::int64_t>(V, 64), tiles = (V + VT - 1) / VT;
    parallel_for(s.B * s.H * tiles, [&](std::int64_t task) {
        const std::int64_t bh = task / tiles, j0 = (task % tiles) * VT, w = std::min(VT, V - j0);
        const std::int64_t b = bh / s.H, h = bh % s.H;
        const F g = decay_pow<F>(r.log_gamma[h], 1), scale = static_cast<F>(r.scale);
        std::vector<F> S(static_cast<std::size_t>(K * w), F(0));
        if (h0)
            for (std::int64_t i = 0; i < K; ++i)
                for (std::int64_t j = 0; j < w; ++j) S[i * w + j] = h0[state_offset(s, b, h) + i * V + j0 + j];
        const F* qt = q + row_offset(s, b, 0, h, K);
        const F* kt = k + row_offset(s, b, 0, h, K);
        const F* vt = v + row_offset(s, b, 0, h, V) + j0;
        F* ot = o + row_offset(s, b, 0, h, V) + j0;
        std::vector<F> acc(static_cast<std::size_t>(w));
        for (std::int64_t t = 0; t < s.T; ++t, qt += HK, kt += HK, vt += HV, ot += HV) {
            std::fill(acc.begin(), acc.end(), F(0));
            for (std::int64_t i = 0; i < K; ++i) {
                F* Si = S.data() + i * w;
                const F ki = kt[i], qi = qt[i];
                for (std::int64_t j = 0; j < w; ++j) {
                    Si[j] = g * Si[j] + ki * vt[j];
                    acc[j] += qi * Si[j];
                }
            }
            for (std::int64_t j = 0; j < w; ++j) ot[j] = scale * acc[j];
        }
        if (ht)
            for (std::int64_t i = 0; i < K; ++i)
                for (std::int64_t j = 0; j < w; ++j) ht[state_offset(s, b, h) + i * V + j0 + j] = S[i * w + j];
    });
}

template <typename F>
void recurrent_backward(const Shape& s, const Options& opt, const F* q, const F* k, const F* v, const F* h0,
                        const F* dO, const F* dht, F* dq, F* dk, F* dv, F* dh0) {
    const Resolved r = resolve(s, opt);
    const std::int64_t T = s.T, K = s.K, V = s.V;
    parallel_for(s.B * s.H, [&](std::int64_t bh) {
        const std::int64_t b = bh / s.H, h = bh % s.H;
        const F g = decay_pow<F>(r.log_gamma[h], 1), scale = static_cast<F>(r.scale);
        const std::int64_t so = state_offset(s, b, h);
        std::vector<F> S(static_cast<std::size_t>(K * V), F(0));
        if (h0) std::copy(h0 + so, h0 + so + K * V, S.begin());
        for (std::int64_t t = 0; t < T; ++t) {   // replay: dq_t = scale S_t do_t
            const F* kt = k + row_offset(s, b, t, h, K);
            const F* vt = v + row_offset(s, b, t, h, V);
            const F* dot = dO + row_offset(s, b, t, h, V);
            F* dqt = dq + row_offset(s, b, t, h, K);
            for (std::int64_t i = 0; i < K; ++i) {
                F* Si = S.data() + i * V;
                F acc = 0;
                for (std::int64_t j = 0; j < V; ++j) {
                    Si[j] = g * Si[j] + kt[i] * vt[j];
                    acc += Si[j] * dot[j];
                }
                dqt[i] = scale * acc;
            }
        }
        std::vector<F>& G = S;   // reuse: G_t, the gradient with respect to S_t
        if (dht) std::copy(dht + so, dht + so + K * V, G.begin());
        else std::fill(G.begin(), G.end(), F(0));
        for (std::int64_t t = T - 1; t >= 0; --t) {
            const F* qt = q + row_offset(s, b, t, h, K);
            const F* kt = k + row_offset(s, b, t, h, K);
            const F* vt = v + row_offset(s, b, t, h, V);
            const F* dot = dO + row_offset(s, b, t, h, V);
            F* dkt = dk + row_offset(s, b, t, h, K);
            F* dvt = dv + row_offset(s, b, t, h, V);
            const F carry = t == T - 1 ? F(1) : g;
            std::fill(dvt, dvt + V, F(0));
            for (std::int64_t i = 0; i < K; ++i) {
                F* Gi = G.data() + i * V;
                const F sq = scale * qt[i], ki = kt[i];
                F acc = 0;
                for (std::int64_t j = 0; j < V; ++j) {
                    Gi[j] = carry * Gi[j] + sq * dot[j];
                    acc += Gi[j] * vt[j];
                    dvt[j] += Gi[j] * ki;
                }
                dkt[i] = acc;
            }
        }
        if (dh0)
            for (std::int64_t i = 0; i < K * V; ++i) dh0[so + i] = g * G[i];
    });
}

#define RETRO_RECURRENT_INSTANTIATE(F)                                                                  \
    template void recurrent_forward<F>(const Shape&, const Options&, const F*, const F*, const F*,      \
                                       const F*, F*, F*);                                               \
    template void recurrent_backward<F>(const Shape&, const Options&, const F*, const F*, const F*,     \
                                        const F*, const F*, const F*, F*, F*, F*, F*);
RETRO_RECURRENT_INSTANTIATE(float)
RETRO_RECURRENT_INSTANTIATE(double)

}  // namespace retro::retention
