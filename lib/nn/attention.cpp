#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "nn/blas.h"
#include "nn/fast_math.h"
#include "nn/gemv_avx512.h"
#include "nn/parallel.h"

namespace retro::nn {

namespace {
// Key j (0-based over the real keys) is visible from query i when key_mask[j] != 0 (or no mask) and
// j < limit(i): Nk, or i + shift + 1 under the causal mask (bottom-right aligned, shift = Nk - Nq).
inline std::int64_t visible_limit(bool causal, std::int64_t i, std::int64_t shift, std::int64_t Nk) {
    return causal ? std::clamp<std::int64_t>(i + shift + 1, 0, Nk) : Nk;
}

RETRO_FAST_MATH_BEGIN
RETRO_ALWAYS_INLINE float exp_neg_of(float x) { return fast_exp_neg(x); }
RETRO_ALWAYS_INLINE double exp_neg_of(double x) { return std::exp(x); }

// Every loop below is a plain one (no condition on j, no short-circuit load), the form GCC vectorises;
// masking is done by separate select passes. Exponentials run to `end` = lim rounded up to 16 (within
// Nk) so that a causal row of any length is whole vectors (a scalar remainder of up to 15 exps per
// row cost more than the vector part); the lanes in [lim, end) are overwritten with 0 afterwards.
inline std::int64_t padded_end(std::int64_t lim, std::int64_t Nk) {
    return std::min(Nk, (lim + 15) & ~std::int64_t(15));
}

// Row i of P [Nq, K] holds the scores (column 0: the null key's when off = 1): masked softmax in place.
// Masked keys get probability 0; a row with every key masked (no null key) is uniform over all K
// columns, as RP's -finfo.max fill makes it. `mb`: the key mask as 32-bit words, or null.
template <typename T>
RETRO_ALWAYS_INLINE void softmax_rows(T* P, std::int64_t Nq, std::int64_t K, std::int64_t off,
                                      const std::int32_t* mb, bool causal, std::int64_t shift) {
    const T mask_value = -std::numeric_limits<T>::max();
    const std::int64_t Nk = K - off;
    for (std::int64_t i = 0; i < Nq; i++) {
        T* row = P + i * K;
        T* keys = row + off;
        const std::int64_t lim = visible_limit(causal, i, shift, Nk), end = padded_end(lim, Nk);
        std::int64_t seen = off + lim;
        if (mb) {
            std::int64_t hidden = 0;
#pragma omp simd reduction(+ : hidden)
            for (std::int64_t j = 0; j < lim; j++) {
                keys[j] = mb[j] != 0 ? keys[j] : mask_value;
                hidden += mb[j] != 0 ? 0 : 1;
            }
            seen -= hidden;
        }
        if (seen == 0) {   // every key masked: softmax of equal values is uniform
            const T u = T(1) / static_cast<T>(K);
            for (std::int64_t j = 0; j < K; j++) row[j] = u;
            continue;
        }
        T mx = off ? row[0] : mask_value;
#pragma omp simd reduction(max : mx)
        for (std::int64_t j = 0; j < lim; j++) mx = keys[j] > mx ? keys[j] : mx;
        if (off) row[0] = exp_neg_of(row[0] - mx);
#pragma omp simd
        for (std::int64_t j = 0; j < end; j++) keys[j] = exp_neg_of(keys[j] - mx);
        for (std::int64_t j = lim; j < Nk; j++) keys[j] = T(0);
        if (mb) {
#pragma omp simd
            for (std::int64_t j = 0; j < lim; j++) keys[j] = mb[j] != 0 ? keys[j] : T(0);
        }
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t j = 0; j < off + end; j++) sum += row[j];
        const T inv = T(1) / sum;
#pragma omp simd
        for (std::int64_t j = 0; j < off + end; j++) row[j] *= inv;
    }
}

// Row i of dS [Nq, K] holds dP (column 0 filled by the caller when off = 1): ds = p (dp - sum_j p dp) on
// visible keys, 0 where masked (p is 0 there too, except in a uniform all-masked row).
template <typename T>
RETRO_ALWAYS_INLINE void softmax_backward_rows(T* dS, const T* P, std::int64_t Nq, std::int64_t K, std::int64_t off,
                                               const std::int32_t* mb, bool causal, std::int64_t shift) {
    const std::int64_t Nk = K - off;
    for (std::int64_t i = 0; i < Nq; i++) {
        T* row = dS + i * K;
        const T* prow = P + i * K;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (std::int64_t j = 0; j < K; j++) dot += prow[j] * row[j];
        if (off) row[0] = prow[0] * (row[0] - dot);
        T* keys = row + off;
        const T* pk = prow + off;
        const std::int64_t lim = visible_limit(causal, i, shift, Nk), end = padded_end(lim, Nk);
#pragma omp simd
        for (std::int64_t j = 0; j < end; j++) keys[j] = pk[j] * (keys[j] - dot);
        for (std::int64_t j = lim; j < Nk; j++) keys[j] = T(0);
        if (mb) {
#pragma omp simd
            for (std::int64_t j = 0; j < lim; j++) keys[j] = mb[j] != 0 ? keys[j] : T(0);
        }
    }
}

RETRO_SIMD_CLONES void softmax_rows_f32(float* P, std::int64_t Nq, std::int64_t K, std::int64_t off,
                                        const std::int32_t* mb, bool causal, std::int64_t shift) {
    softmax_rows(P, Nq, K, off, mb, causal, shift);
}
RETRO_SIMD_CLONES void softmax_backward_rows_f32(float* dS, const float* P, std::int64_t Nq, std::int64_t K,
                                                 std::int64_t off, const std::int32_t* mb, bool causal,
                                                 std::int64_t shift) {
    softmax_backward_rows(dS, P, Nq, K, off, mb, causal, shift);
}
RETRO_FAST_MATH_END

// The byte key mask as 32-bit words (in `words`), or null: 32-bit lanes vectorise with AVX-512F alone.
inline const std::int32_t* mask_words(std::vector<std::int32_t>& words, const std::uint8_t* mask, std::int64_t Nk) {
    if (!mask) return nullptr;
    words.assign(mask, mask + Nk);
    return words.data();
}

template <typename T>
void masked_softmax(T* P, std::int64_t Nq, std::int64_t K, std::int64_t off, const std::uint8_t* mask, bool causal,
                    std::int64_t shift) {
    std::vector<std::int32_t> words;
    const std::int32_t* mb = mask_words(words, mask, K - off);
    if constexpr (std::is_same_v<T, float>) softmax_rows_f32(P, Nq, K, off, mb, causal, shift);
    else softmax_rows(P, Nq, K, off, mb, causal, shift);
}
template <typename T>
void masked_softmax_backward(T* dS, const T* P, std::int64_t Nq, std::int64_t K, std::int64_t off,
                             const std::uint8_t* mask, bool causal, std::int64_t shift) {
    std::vector<std::int32_t> words;
    const std::int32_t* mb = mask_words(words, mask, K - off);
    if constexpr (std::is_same_v<T, float>) softmax_backward_rows_f32(dS, P, Nq, K, off, mb, causal, shift);
    else softmax_backward_rows(dS, P, Nq, K, off, mb, causal, shift);
}
}  // namespace

template <typename T>
void attention_head_forward(T* O, std::int64_t ldo, T* P, const T* Q, std::int64_t ldq, const T* K, const T* V,
                            std::int64_t ldk, std::int64_t Nq, std::int64_t Nk, std::int64_t D, const T* null_k,
                            const T* null_v, const std::uint8_t* key_mask, bool causal) {
    const std::int64_t off = null_k ? 1 : 0, W = Nk + off, shift = Nk - Nq;
    // Few query rows (KV-cached decoding's, against a long cache; also training's or prefill's where a sequence or
    // chunk has at most 8 rows): both products as AVX-512 (or AVX2) GEMVs that stream K and V once, row after row
    // (OpenBLAS's sgemm on one query row ran at half the memory rate: docs/performance.md "Session 35";
    // RETRO_GEMV=linear or blas keeps sgemm). Same sums, another order: float rounding only.
    const GemvKernels* kernels = std::is_same_v<T, float> && Nq <= kGemvMaxRows ? gemv_attention_kernels() : nullptr;
    const bool few_rows = kernels != nullptr;
    if constexpr (std::is_same_v<T, float>)
        if (few_rows) kernels->rows(K, Nk, D, ldk, Q, ldq, Nq, P + off, W, false);
    if (!few_rows) gemm(false, true, Nq, Nk, D, T(1), Q, ldq, K, ldk, T(0), P + off, W);
    if (null_k)   // column 0: q . null_k
        for (std::int64_t i = 0; i < Nq; i++) {
            T acc = 0;
            for (std::int64_t d = 0; d < D; d++) acc += Q[i * ldq + d] * null_k[d];
            P[i * W] = acc;
        }
    masked_softmax(P, Nq, W, off, key_mask, causal, shift);
    if constexpr (std::is_same_v<T, float>)
        if (few_rows) kernels->t_rows(V, Nk, D, ldk, P + off, W, Nq, O, ldo);
    if (!few_rows) gemm(false, false, Nq, D, Nk, T(1), P + off, W, V, ldk, T(0), O, ldo);
    if (null_v)
        for (std::int64_t i = 0; i < Nq; i++) {
            const T p0 = P[i * W];
            for (std::int64_t d = 0; d < D; d++) O[i * ldo + d] += p0 * null_v[d];
        }
}

template <typename T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const T* null_k, const T* null_v,
                       const std::uint8_t* key_mask, const AttentionShape& s) {
    const std::int64_t B = s.B, Nq = s.Nq, Nk = s.Nk, H = s.H, D = s.D, HD = H * D, K = s.keys();
    RETRO_CHECK(!s.null_kv || (null_k && null_v), "null key/value missing");
    BlasSingleThread single;
    for_each(B * H, 4 * B * H * Nq * K * (D + 4), [&](std::int64_t bh) {
        const std::int64_t b = bh / H, h = bh % H;
        attention_head_forward(out + b * Nq * HD + h * D, HD, probs + bh * Nq * K, q + b * Nq * HD + h * D, HD,
                               k + b * Nk * HD + h * D, v + b * Nk * HD + h * D, HD, Nq, Nk, D,
                               s.null_kv ? null_k + h * D : nullptr, s.null_kv ? null_v + h * D : nullptr,
                               key_mask ? key_mask + b * Nk : nullptr, s.causal);
    });
}

template <typename T>
void attention_segments_forward(T* out, const T* q, const std::vector<AttentionSegment<T>>& segments, std::int64_t H,
                                std::int64_t D, bool causal, const T* null_k, const T* null_v) {
    const std::int64_t HD = H * D, S = static_cast<std::int64_t>(segments.size()), off = null_k ? 1 : 0;
    std::int64_t work = 0;
    for (const auto& g : segments) work += 4 * H * g.rows * (g.keys + off) * (D + 4);
    BlasSingleThread single;
    for_each(S * H, work, [&](std::int64_t sh) {
        const auto& g = segments[static_cast<std::size_t>(sh / H)];
        const std::int64_t h = sh % H;
        if (g.rows == 0) return;
        std::vector<T> P(static_cast<std::size_t>(g.rows * (g.keys + off)));
        attention_head_forward(out + g.first * HD + h * D, HD, P.data(), q + g.first * HD + h * D, HD, g.k + h * D,
                               g.v + h * D, HD, g.rows, g.keys, D, null_k ? null_k + h * D : nullptr,
                               null_v ? null_v + h * D : nullptr, g.key_mask, causal);
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
    ranges(B * H, 8 * B * H * Nq * K * (D + 4), [&](std::int64_t bh0, std::int64_t bh1, int) {
        std::vector<T> dS(static_cast<std::size_t>(Nq * K));
        for (std::int64_t bh = bh0; bh < bh1; bh++) {
            const std::int64_t b = bh / H, h = bh % H;
            const T* Q = q + b * Nq * HD + h * D;
            const T* Kb = k + b * Nk * HD + h * D;
            const T* Vb = v + b * Nk * HD + h * D;
            const T* dO = dout + b * Nq * HD + h * D;
            const T* P = probs + bh * Nq * K;
            gemm(false, true, Nq, Nk, D, T(1), dO, HD, Vb, HD, T(0), dS.data() + off, K);
            if (s.null_kv)   // column 0: dO . null_v
                for (std::int64_t i = 0; i < Nq; i++) {
                    T acc = 0;
                    for (std::int64_t d = 0; d < D; d++) acc += dO[i * HD + d] * null_v[h * D + d];
                    dS[i * K] = acc;
                }
            masked_softmax_backward(dS.data(), P, Nq, K, off, key_mask ? key_mask + b * Nk : nullptr, s.causal,
                                    shift);
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
    template void attention_head_forward<T>(T*, std::int64_t, T*, const T*, std::int64_t, const T*, const T*,      \
                                            std::int64_t, std::int64_t, std::int64_t, std::int64_t, const T*,      \
                                            const T*, const std::uint8_t*, bool);                                  \
    template void attention_segments_forward<T>(T*, const T*, const std::vector<AttentionSegment<T>>&, std::int64_t, \
                                                std::int64_t, bool, const T*, const T*);                           \
    template void attention_forward<T>(T*, T*, const T*, const T*, const T*, const T*, const T*,                   \
                                       const std::uint8_t*, const AttentionShape&);                                \
    template void attention_backward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*,      \
                                        const T*, const T*, const std::uint8_t*, const AttentionShape&);
RETRO_INSTANTIATE(float)
RETRO_INSTANTIATE(double)
#undef RETRO_INSTANTIATE

}  // namespace retro::nn
