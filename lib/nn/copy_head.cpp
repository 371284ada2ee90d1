// The copy head: candidate search (longest match of the history in each neighbour) and the gate on the logits.
#include "nn/copy_head.h"

#include "core/error.h"

namespace retro::nn {

std::int64_t copy_bucket(std::int64_t L) {
    RETRO_CHECK(L >= 1, "copy_bucket: match length ", L);
    if (L <= 4) return L - 1;
    if (L <= 6) return 4;
    if (L <= 8) return 5;
    if (L <= 12) return 6;
    if (L <= 16) return 7;
    if (L <= 24) return 8;
    if (L <= 32) return 9;
    if (L <= 48) return 10;
    return 11;
}

void copy_candidates(CopyCandidate* out, const std::int32_t* history, std::int64_t p, const std::int32_t* neighbours,
                     std::int64_t k, std::int64_t r, std::int32_t pad_id) {
    for (std::int64_t m = 0; m < k; m++) {
        const std::int32_t* N = neighbours + m * r;
        std::int64_t best = 0, best_j = -1;
        for (std::int64_t j = 0; j + 1 < r; j++) {
            if (N[j + 1] == pad_id) continue;   // nothing to copy after j
            std::int64_t L = 0;
            while (L < kCopyMaxMatch && L <= j && L <= p && N[j - L] != pad_id && N[j - L] == history[p - L]) L++;
            if (L > 0 && L >= best) {
                best = L;
                best_j = j;
            }
        }
        CopyCandidate c;
        if (best_j >= 0) {
            c.token = N[best_j + 1];
            c.bucket = static_cast<std::int32_t>(copy_bucket(best));
            c.length = static_cast<std::int32_t>(best);
        }
        out[m] = c;
    }
}

void copy_candidates_batch(std::vector<CopyCandidate>& out, const std::int32_t* inputs, std::int64_t B,
                           std::int64_t n, const std::int32_t* retrieved, std::int64_t l, std::int64_t k,
                           std::int64_t r, std::int64_t cs, std::int32_t pad_id) {
    out.assign(static_cast<std::size_t>(B * n * k), CopyCandidate{});
    for (std::int64_t b = 0; b < B; b++)
        for (std::int64_t p = cs - 1; p < n; p++) {
            const std::int64_t u = (p + 1) / cs - 1;   // the chunk CCA reads at p (nn/chunked_cross_attention.h)
            if (u >= l) break;
            copy_candidates(out.data() + (b * n + p) * k, inputs + b * n, p, retrieved + (b * l + u) * k * r, k, r,
                            pad_id);
        }
}

template <typename T>
void copy_head_forward(T* logits, const T* xn, const CopyCandidate* cand, std::int64_t rows, std::int64_t k,
                       std::int64_t V, std::int64_t C, const T* bias, const T* weight) {
    for (std::int64_t i = 0; i < rows; i++)
        for (std::int64_t m = 0; m < k; m++) {
            const CopyCandidate& c = cand[i * k + m];
            if (c.token < 0) continue;
            RETRO_CHECK(c.token < V && c.bucket >= 0 && c.bucket < kCopyBuckets, "copy head: candidate ", c.token,
                        " bucket ", c.bucket);
            const T* w = weight + c.bucket * C;
            const T* x = xn + i * C;
            T g = static_cast<T>(kCopyBiasScale) * bias[c.bucket];
            for (std::int64_t d = 0; d < C; d++) g += w[d] * x[d];
            logits[i * V + c.token] += g;
        }
}

template <typename T>
void copy_head_backward(T* dxn, T* dbias, T* dweight, const T* dlogits, const T* xn, const CopyCandidate* cand,
                        std::int64_t rows, std::int64_t k, std::int64_t V, std::int64_t C, const T* weight) {
    for (std::int64_t i = 0; i < rows; i++)
        for (std::int64_t m = 0; m < k; m++) {
            const CopyCandidate& c = cand[i * k + m];
            if (c.token < 0) continue;
            const T g = dlogits[i * V + c.token];
            if (g == T(0)) continue;
            if (dbias) dbias[c.bucket] += static_cast<T>(kCopyBiasScale) * g;
            if (dweight) {
                T* dw = dweight + c.bucket * C;
                const T* x = xn + i * C;
                for (std::int64_t d = 0; d < C; d++) dw[d] += g * x[d];
            }
            if (dxn) {
                const T* w = weight + c.bucket * C;
                T* dx = dxn + i * C;
                for (std::int64_t d = 0; d < C; d++) dx[d] += g * w[d];
            }
        }
}

#define RETRO_INSTANTIATE(T)                                                                                     \
    template void copy_head_forward<T>(T*, const T*, const CopyCandidate*, std::int64_t, std::int64_t,          \
                                       std::int64_t, std::int64_t, const T*, const T*);                         \
    template void copy_head_backward<T>(T*, T*, T*, const T*, const T*, const CopyCandidate*, std::int64_t,     \
                                        std::int64_t, std::int64_t, std::int64_t, const T*);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
