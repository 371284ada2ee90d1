// bert_attention_head (bert_attention.h). The fused AVX-512 path, for one (sequence, head):
//   1. kt[t][j] = k_j[t], j padded with zeros to Lp = len rounded up to 16 (d x Lp floats);
//   2. s[i][j] = q_i · k_j: a tile of R query rows x 32 keys in 2R zmm accumulators, t = 0..d-1 in
//      order, one FMA per term (q broadcast, kt rows loaded);
//   3. per row: m = max_j s, p_j = exp(scale·(s_j - m)), sum = Σ_j p_j  (softmax without the division:
//      softmax(scale·s) = p / sum since scale > 0); with a relative bias, s_j = scale·s_j + bias_(j-i)
//      first and the exponent is taken with scale 1;
//   4. ctx_i = (Σ_j p_ij v_j) / sum_i: a tile of R rows x d columns (d ≤ 64: up to 4 zmm a row),
//      j = 0..len-1 in order, p broadcast, v rows loaded in place from the QKV buffer.
// Tails (len not a multiple of the row tile, d not a multiple of 16) use smaller tiles and masks.
#include "embed/bert_attention.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/transpose_avx512.h"
#include "nn/fast_math.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define RETRO_HAVE_ATTENTION_AVX512 1
#include <immintrin.h>
// GCC 12's avx512fintrin.h builds some intrinsics (cvtt, reduce, fnmadd) from deliberately
// undefined vectors and then warns about them at every use.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define RETRO_ATTENTION_POP_DIAGNOSTICS 1
#endif
#endif

namespace retro {

namespace {

std::atomic<bool> g_fused{true};

// Both paths take the queries a block of rows at a time, so a thread's scores are [block, len], not [len, len]
// (8,192 tokens: 268 MB): the cblas path kCblasQueryBlock rows (GEMMs of that height run at full speed); the fused
// path as many rows as keep the block near kFusedScoreBlockFloats (256 KB, in L2), in whole 12-row score tiles (the
// ctx tiles, 12 or 6 rows, divide them too), from one tile to kFusedQueryBlockMax rows.
constexpr int kCblasQueryBlock = 256;
constexpr int kFusedTileRows = 12;
constexpr int kFusedScoreBlockFloats = 64 * 1024;
constexpr int kFusedQueryBlockMax = 8 * kFusedTileRows;

int padded_keys(int len) { return (len + 15) / 16 * 16; }

int fused_query_block(int len) {
    return std::clamp(kFusedScoreBlockFloats / padded_keys(len) / kFusedTileRows * kFusedTileRows, kFusedTileRows,
                      kFusedQueryBlockMax);
}

// v at least n long; its capacity exactly the largest n asked for (a resize alone may double it: the memory check
// counts bert_attention_scratch_floats, not a growth factor over it)
template <typename T>
T* grown(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) {
        v.reserve(n);
        v.resize(n);
    }
    return v.data();
}

}  // namespace

RETRO_FAST_MATH_BEGIN

namespace {

using nn::fast_exp_neg;

// Each row of s[rows, len] -> softmax(row).
RETRO_SIMD_CLONES void softmax_rows(float* s, int rows, int len) {
    for (int i = 0; i < rows; ++i) {
        float* row = s + static_cast<std::int64_t>(i) * len;
        float m = row[0];
#pragma omp simd reduction(max : m)
        for (int j = 0; j < len; ++j) m = row[j] > m ? row[j] : m;
#pragma omp simd
        for (int j = 0; j < len; ++j) row[j] = fast_exp_neg(row[j] - m);
        float sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < len; ++j) sum += row[j];
        float inv = 1.0f / sum;
#pragma omp simd
        for (int j = 0; j < len; ++j) row[j] *= inv;
    }
}

// Row i of the scaled scores (len values) += bias[len-1 + j-i] for each key j.
void add_bias_row(float* row, int i, int len, const float* bias) {
    const float* b = bias + (len - 1 - i);
#pragma omp simd
    for (int j = 0; j < len; ++j) row[j] += b[j];
}

void attention_cblas(const float* q, const float* k, const float* v, std::int64_t ld, int len, int d, float scale,
                     float* ctx, std::int64_t ldc, AttentionScratch& scratch, const float* bias) {
    const int block = std::min(len, kCblasQueryBlock);
    float* scores = grown(scratch.p, static_cast<std::size_t>(block) * len);
    for (int i0 = 0; i0 < len; i0 += block) {
        const int rows = std::min(block, len - i0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, len, d, scale, q + i0 * ld, static_cast<int>(ld), k,
                    static_cast<int>(ld), 0.0f, scores, len);
        if (bias)
            for (int r = 0; r < rows; ++r) add_bias_row(scores + static_cast<std::int64_t>(r) * len, i0 + r, len, bias);
        softmax_rows(scores, rows, len);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d, len, 1.0f, scores, len, v, static_cast<int>(ld),
                    0.0f, ctx + i0 * ldc, static_cast<int>(ldc));
    }
}

#ifdef RETRO_HAVE_ATTENTION_AVX512
#define RETRO_AVX512 __attribute__((target("avx512f")))

constexpr int QK_ROWS = 12;   // query rows per score tile (x 2 zmm of keys: 24 accumulators)
constexpr int PV_MAX_DV = 4;  // d <= 64
static_assert(QK_ROWS == kFusedTileRows, "the score blocks are whole score tiles");

// s[r][j0 .. j0 + 16·NV) = q_r · k_j for R query rows; kt row stride lp, s row stride lp.
template <int R, int NV>
RETRO_AVX512 void qk_tile(const float* q, std::int64_t ld, const float* kt, int lp, int d, float* s) {
    __m512 acc[R][NV];
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int n = 0; n < NV; ++n) acc[r][n] = _mm512_setzero_ps();
    for (int t = 0; t < d; ++t) {
        __m512 w[NV];
#pragma GCC unroll 2
        for (int n = 0; n < NV; ++n) w[n] = _mm512_loadu_ps(kt + static_cast<std::int64_t>(t) * lp + 16 * n);
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
            const __m512 x = _mm512_set1_ps(q[r * ld + t]);
#pragma GCC unroll 2
            for (int n = 0; n < NV; ++n) acc[r][n] = _mm512_fmadd_ps(x, w[n], acc[r][n]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int n = 0; n < NV; ++n) _mm512_storeu_ps(s + static_cast<std::int64_t>(r) * lp + 16 * n, acc[r][n]);
}

// ctx[r][:d] = (Σ_{j<len} p[r][j] v_j[:d]) · inv[r] for R rows; p row stride lp, v row stride ld.
template <int R, int DV>
RETRO_AVX512 void pv_tile(const float* p, int lp, const float* v, std::int64_t ld, int len, __mmask16 last,
                          const float* inv, float* ctx, std::int64_t ldc) {
    __m512 acc[R][DV];
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int n = 0; n < DV; ++n) acc[r][n] = _mm512_setzero_ps();
    for (int j = 0; j < len; ++j) {
        __m512 w[DV];
#pragma GCC unroll 4
        for (int n = 0; n < DV; ++n)
            w[n] = n == DV - 1 ? _mm512_maskz_loadu_ps(last, v + j * ld + 16 * n) : _mm512_loadu_ps(v + j * ld + 16 * n);
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
            const __m512 x = _mm512_set1_ps(p[static_cast<std::int64_t>(r) * lp + j]);
#pragma GCC unroll 4
            for (int n = 0; n < DV; ++n) acc[r][n] = _mm512_fmadd_ps(x, w[n], acc[r][n]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
        const __m512 f = _mm512_set1_ps(inv[r]);
#pragma GCC unroll 4
        for (int n = 0; n < DV; ++n) {
            const __m512 y = _mm512_mul_ps(acc[r][n], f);
            if (n == DV - 1)
                _mm512_mask_storeu_ps(ctx + r * ldc + 16 * n, last, y);
            else
                _mm512_storeu_ps(ctx + r * ldc + 16 * n, y);
        }
    }
}

// fast_exp_neg (nn/fast_math.h) on 16 lanes: 2^n · poly(r), x <= 0, clamped at -87.
RETRO_AVX512 inline __m512 exp_neg16(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512i n = _mm512_cvttps_epi32(_mm512_sub_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.4426950408889634f)), _mm512_set1_ps(0.5f)));
    const __m512 fn = _mm512_cvtepi32_ps(n);
    __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

// One score row (len valid floats): s = exp(scale·(s - max)); returns the sum of the len values.
RETRO_AVX512 float exp_row(float* s, int len, float scale) {
    const __mmask16 tail = static_cast<__mmask16>(len % 16 == 0 ? 0xFFFF : (1u << (len % 16)) - 1u);
    const int full = len / 16;
    __m512 m = _mm512_set1_ps(-__builtin_inff());
    for (int j = 0; j < full; ++j) m = _mm512_max_ps(m, _mm512_loadu_ps(s + 16 * j));
    if (len % 16) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(m, tail, s + 16 * full));
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m)), sc = _mm512_set1_ps(scale);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < full; ++j) {
        const __m512 e = exp_neg16(_mm512_mul_ps(sc, _mm512_sub_ps(_mm512_loadu_ps(s + 16 * j), mx)));
        _mm512_storeu_ps(s + 16 * j, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (len % 16) {
        const __m512 e = exp_neg16(_mm512_mul_ps(sc, _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + 16 * full), mx)));
        _mm512_mask_storeu_ps(s + 16 * full, tail, e);
        sum = _mm512_mask_add_ps(sum, tail, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
}

// kt[t][j] = k[j][t] for the 16 x 16 block at (j0, t0): rows j >= len read as zeros, columns
// t >= d not stored (core/transpose_avx512.h).
RETRO_AVX512 void transpose_block(const float* k, std::int64_t ld, int j0, int len, int t0, int d, float* kt, int lp) {
    const float* rows[16];
    for (int i = 0; i < 16; ++i) rows[i] = j0 + i < len ? k + (j0 + i) * ld : nullptr;
    transpose16x16_avx512(rows, t0, std::min(16, d - t0), kt + static_cast<std::int64_t>(t0) * lp + j0, lp);
}

using QkFn = void (*)(const float*, std::int64_t, const float*, int, int, float*);
using PvFn = void (*)(const float*, int, const float*, std::int64_t, int, __mmask16, const float*, float*, std::int64_t);

template <int NV, int... I>
constexpr std::array<QkFn, sizeof...(I)> qk_table(std::integer_sequence<int, I...>) {
    return {qk_tile<I + 1, NV>...};
}
// [NV - 1][R - 1]
constexpr std::array<std::array<QkFn, QK_ROWS>, 2> kQk = {qk_table<1>(std::make_integer_sequence<int, QK_ROWS>{}),
                                                         qk_table<2>(std::make_integer_sequence<int, QK_ROWS>{})};

constexpr int pv_rows(int dv) { return dv <= 2 ? 12 : 6; }   // 24 accumulators at most
template <int R, int DV>
constexpr PvFn pv_entry() {
    if constexpr (R <= pv_rows(DV))
        return pv_tile<R, DV>;
    else
        return nullptr;   // never called: attention_fused tiles rows by pv_rows(dv)
}
template <int DV, int... I>
constexpr std::array<PvFn, 12> pv_table(std::integer_sequence<int, I...>) {
    return {pv_entry<I + 1, DV>()...};
}
constexpr std::array<std::array<PvFn, 12>, PV_MAX_DV> kPv = {
    pv_table<1>(std::make_integer_sequence<int, 12>{}), pv_table<2>(std::make_integer_sequence<int, 12>{}),
    pv_table<3>(std::make_integer_sequence<int, 12>{}), pv_table<4>(std::make_integer_sequence<int, 12>{})};

void attention_fused(const float* q, const float* k, const float* v, std::int64_t ld, int len, int d, float scale,
                     float* ctx, std::int64_t ldc, AttentionScratch& scratch, const float* bias) {
    const int lp = padded_keys(len);
    const int block = fused_query_block(len);
    float* kt = grown(scratch.kt, static_cast<std::size_t>(d) * lp);
    float* s = grown(scratch.p, static_cast<std::size_t>(std::min(len, block)) * lp);
    float* inv = grown(scratch.sum, static_cast<std::size_t>(std::min(len, block)));
    for (int j0 = 0; j0 < lp; j0 += 16)
        for (int t0 = 0; t0 < d; t0 += 16) transpose_block(k, ld, j0, len, t0, d, kt, lp);
    const int dv = (d + 15) / 16;
    const __mmask16 last = static_cast<__mmask16>(d % 16 == 0 ? 0xFFFF : (1u << (d % 16)) - 1u);
    const int prow = pv_rows(dv);
    // query rows [b0, b1) at a time: their scores s[i - b0][j], softmax, then ctx (the tiles start at multiples of
    // QK_ROWS and prow as over the whole sequence, and a row's sums do not depend on its tile: the same bits)
    for (int b0 = 0; b0 < len; b0 += block) {
        const int b1 = std::min(len, b0 + block);
        for (int i0 = b0; i0 < b1; i0 += QK_ROWS) {
            const int rows = std::min(QK_ROWS, b1 - i0);
            float* si = s + static_cast<std::int64_t>(i0 - b0) * lp;
            int j0 = 0;
            for (; j0 + 32 <= lp; j0 += 32) kQk[1][rows - 1](q + i0 * ld, ld, kt + j0, lp, d, si + j0);
            if (j0 < lp) kQk[0][rows - 1](q + i0 * ld, ld, kt + j0, lp, d, si + j0);
        }
        for (int i = b0; i < b1; ++i) {
            float* row = s + static_cast<std::int64_t>(i - b0) * lp;
            if (bias) {
                for (int j = 0; j < len; ++j) row[j] *= scale;
                add_bias_row(row, i, len, bias);
                inv[i - b0] = 1.0f / exp_row(row, len, 1.0f);
            } else {
                inv[i - b0] = 1.0f / exp_row(row, len, scale);
            }
        }
        for (int i0 = b0; i0 < b1; i0 += prow) {
            const int rows = std::min(prow, b1 - i0);
            kPv[dv - 1][rows - 1](s + static_cast<std::int64_t>(i0 - b0) * lp, lp, v, ld, len, last, inv + (i0 - b0), ctx + i0 * ldc, ldc);
        }
    }
}

bool avx512_available() {
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
}
#else
bool avx512_available() { return false; }
#endif

}  // namespace

RETRO_FAST_MATH_END

std::size_t bert_attention_scratch_floats(int len, int d) {
    if (len <= 0) return 0;
    const auto L = static_cast<std::size_t>(len), lp = static_cast<std::size_t>(padded_keys(len));
    const auto fused_rows = static_cast<std::size_t>(std::min(len, fused_query_block(len)));
    const std::size_t cblas_scores = static_cast<std::size_t>(std::min(len, kCblasQueryBlock)) * L;
    return static_cast<std::size_t>(d) * lp + std::max(fused_rows * lp, cblas_scores) + fused_rows;   // kt, p, sum
}

bool bert_attention_fused_available(int d) { return avx512_available() && d >= 1 && d <= 64; }

void bert_attention_set_fused(bool enabled) { g_fused = enabled; }

void bert_attention_head(const float* q, const float* k, const float* v, std::int64_t ld, int len, int d, float scale,
                         float* ctx, std::int64_t ldc, AttentionScratch& scratch, const float* bias) {
    if (len <= 0) return;
    // The fused path takes the row max of the unscaled scores: softmax(scale·s) needs scale > 0 there.
    RETRO_CHECK(scale > 0, "attention scale ", scale, " must be positive");
#ifdef RETRO_HAVE_ATTENTION_AVX512
    if (g_fused && bert_attention_fused_available(d)) {
        attention_fused(q, k, v, ld, len, d, scale, ctx, ldc, scratch, bias);
        return;
    }
#endif
    attention_cblas(q, k, v, ld, len, d, scale, ctx, ldc, scratch, bias);
}

}  // namespace retro

#ifdef RETRO_ATTENTION_POP_DIAGNOSTICS
#pragma GCC diagnostic pop
#endif
