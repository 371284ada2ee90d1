#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "nn/parallel.h"
#include "nn/blas.h"

namespace retro::nn {

namespace {
// Whether key column j (0-based over the real keys) is visible from query i.
inline bool key_visible(const std::uint8_t* mask_b, bool causal, std::int64_t i, std::int64_t j, std::int64_t shift) {
    if (mask_b && !mask_b[j]) return false;
    if (causal && j > i + shift) return false;
    return true;
}
}  // namespace

template <typename T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const T* null_k, const T* null_v,
                       const std::uint8_t* key_mask, const AttentionShape& s) {
    const std::int64_t B = s.B, Nq = s.Nq, Nk = s.Nk, H = s.H, D = s.D, HD = H * D, K = s.keys();
    const std::int64_t off = s.null_kv ? 1 : 0, shift = Nk - Nq;
    RETRO_CHECK(!s.null_kv || (null_k && null_v), "null key/value missing");
    const T mask_value = -std::numeric_limits<T>::max();
    BlasSingleThread single;
    for_each(B * H, 4 * B * H * Nq * K * (D + 4), [&](std::int64_t bh) {
        const std::int64_t b = bh / H, h = bh % H;
        const T* Q = q + b * Nq * HD + h * D;
        const T* Kb = k + b * Nk * HD + h * D;
        const T* Vb = v + b * Nk * HD + h * D;
        T* P = probs + bh * Nq * K;
        T* O = out + b * Nq * HD + h * D;
        const std::uint8_t* mb = key_mask ? key_mask + b * Nk : nullptr;
        gemm(false, true, Nq, Nk, D, T(1), Q, HD, Kb, HD, T(0), P + off, K);
        for (std::int64_t i = 0; i < Nq; i++) {
            T* row = P + i * K;
            if (s.null_kv) {
                T acc = 0;
                for (std::int64_t d = 0; d < D; d++) acc += Q[i * HD + d] * null_k[h * D + d];
                row[0] = acc;
            }
            T mx = mask_value;
            bool any = s.null_kv;
            if (s.null_kv) mx = row[0];
            for (std::int64_t j = 0; j < Nk; j++) {
                if (key_visible(mb, s.causal, i, j, shift)) {
                    mx = any ? std::max(mx, row[off + j]) : row[off + j];
                    any = true;
                } else {
                    row[off + j] = mask_value;
                }
            }
            if (!any) {   // every key masked: softmax of equal values (RP's -max fill) is uniform
                for (std::int64_t j = 0; j < K; j++) row[j] = T(1) / static_cast<T>(K);
                continue;
            }
            T sum = 0;
            for (std::int64_t j = 0; j < K; j++) {
                const bool vis = j < off || key_visible(mb, s.causal, i, j - off, shift);
                row[j] = vis ? std::exp(row[j] - mx) : T(0);
                sum += row[j];
            }
            const T inv = T(1) / sum;
            for (std::int64_t j = 0; j < K; j++) row[j] *= inv;
        }
        gemm(false, false, Nq, D, Nk, T(1), P + off, K, Vb, HD, T(0), O, HD);
        if (s.null_kv)
            for (std::int64_t i = 0; i < Nq; i++) {
                const T p0 = P[i * K];
                for (std::int64_t d = 0; d < D; d++) O[i * HD + d] += p0 * null_v[h * D + d];
            }
    });
}

template <typename T>
void attention_backward(T* dq, T* dk, T* dv, T* dnull_k, T* dnull_v, const T* dout, const T* probs, const T* q,
                        const T* k, const T* v, const T* null_k, const T* null_v, const std::uint8_t* key_mask,
                        const AttentionShape& s) {
    const std::int64_t B = s.B, Nq = s.Nq, Nk = s.Nk, H = s.H, D = s.D, HD = H * D, K = s.keys();
    const std::int64_t off = s.null_kv ? 1 : 0, shift = Nk - Nq;
    std::vector<T> part_k, part_v;   // per (b, h) null k/v gradients, reduced in a fixed order below
    if (s.null_kv) {
        part_k.assign(static_cast<std::size_t>(B * H * D), T(0));
        part_v.assign(part_k.size(), T(0));
    }
    BlasSingleThread single;
    for_each(B * H, 8 * B * H * Nq * K * (D + 4), [&](std::int64_t bh) {
        const std::int64_t b = bh / H, h = bh % H;
        const T* Q = q + b * Nq * HD + h * D;
        const T* Kb = k + b * Nk * HD + h * D;
        const T* Vb = v + b * Nk * HD + h * D;
        const T* dO = dout + b * Nq * HD + h * D;
        const T* P = probs + bh * Nq * K;
        const std::uint8_t* mb = key_mask ? key_mask + b * Nk : nullptr;
        std::vector<T> dS(static_cast<std::size_t>(Nq * K));
        gemm(false, true, Nq, Nk, D, T(1), dO, HD, Vb, HD, T(0), dS.data() + off, K);
        for (std::int64_t i = 0; i < Nq; i++) {
            T* row = dS.data() + i * K;
            const T* prow = P + i * K;
            if (s.null_kv) {
                T acc = 0;
                for (std::int64_t d = 0; d < D; d++) acc += dO[i * HD + d] * null_v[h * D + d];
                row[0] = acc;
            }
            T dot = 0;
            for (std::int64_t j = 0; j < K; j++) dot += prow[j] * row[j];
            for (std::int64_t j = 0; j < K; j++) {
                const bool vis = j < off || key_visible(mb, s.causal, i, j - off, shift);
                row[j] = vis ? prow[j] * (row[j] - dot) : T(0);
            }
        }
        T* dQ = dq + b * Nq * HD + h * D;
        T* dK = dk + b * Nk * HD + h * D;
        T* dV = dv + b * Nk * HD + h * D;
        gemm(false, false, Nq, D, Nk, T(1), dS.data() + off, K, Kb, HD, T(0), dQ, HD);
        gemm(true, false, Nk, D, Nq, T(1), dS.data() + off, K, Q, HD, T(0), dK, HD);
        gemm(true, false, Nk, D, Nq, T(1), P + off, K, dO, HD, T(0), dV, HD);
        if (s.null_kv) {
            T* pk = part_k.data() + bh * D;
            T* pv = part_v.data() + bh * D;
            for (std::int64_t i = 0; i < Nq; i++) {
                const T ds0 = dS[i * K], p0 = P[i * K];
                for (std::int64_t d = 0; d < D; d++) {
                    dQ[i * HD + d] += ds0 * null_k[h * D + d];
                    pk[d] += ds0 * Q[i * HD + d];
                    pv[d] += p0 * dO[i * HD + d];
                }
            }
        }
    });
    if (s.null_kv)
        for (std::int64_t b = 0; b < B; b++)
            for (std::int64_t hd = 0; hd < HD; hd++) {
                dnull_k[hd] += part_k[b * HD + hd];
                dnull_v[hd] += part_v[b * HD + hd];
            }
}

#define RETRO_INSTANTIATE(T)                                                                                       \
    template void attention_forward<T>(T*, T*, const T*, const T*, const T*, const T*, const T*,                   \
                                       const std::uint8_t*, const AttentionShape&);                                \
    template void attention_backward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*,      \
                                        const T*, const T*, const std::uint8_t*, const AttentionShape&);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
