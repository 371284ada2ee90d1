// The few-row GEMV kernels of nn/gemv_avx512.h for CPUs with AVX2 and FMA but no AVX-512 (AMD Zen 1-3, Intel
// client parts): the same three products (W·x for 1-8 x rows, fp32 or bf16 weights; x·W for attention's p V), W read
// once for all rows as one sequential stream, 8-lane slices FMA'd into two accumulators per x row. AVX2 has 16
// vector registers, half AVX-512's, so weight rows go one at a time and x rows in groups of at most 4 (a second
// group reads the weight row again, from L1).
// Summation order, the same for every N: lane j of accumulator a sums columns 16i + 8a + j in k order (an 8-column
// remainder into accumulator 0, the masked tail into accumulator 1), then a0 + a1 and the 8 lanes by a fixed tree
// (4 + 4, 2 + 2, 1 + 1); so a row's result does not depend on N, and differs from the AVX-512 kernels' and from
// cblas_sgemv's by float rounding only. x·W: lane o's sum runs in i order, whatever the column block.
#include <cstdint>

#include "core/error.h"
#include "nn/gemv_avx512.h"
#include "nn/gemv_rows_dispatch.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace retro::nn {

#if defined(__x86_64__) && defined(__GNUC__)

namespace {

#define RETRO_GEMV2_TARGET __attribute__((target("avx2,fma")))

// Lanes [0, count) set: the mask _mm256_maskload_ps reads through (the others are 0 and not read).
RETRO_GEMV2_TARGET inline __m256i lanes_below(std::int64_t count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 8 weights from p as fp32 (bf16 ones zero-extended and shifted into the high half: exact); the tail forms read only
// the first `count` (< 8) and give 0 in the other lanes.
RETRO_GEMV2_TARGET inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
RETRO_GEMV2_TARGET inline __m256 load8(const std::uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
RETRO_GEMV2_TARGET inline __m256 load8_tail(const float* p, std::int64_t count) {
    return _mm256_maskload_ps(p, lanes_below(count));
}
RETRO_GEMV2_TARGET inline __m256 load8_tail(const std::uint16_t* p, std::int64_t count) {
    alignas(16) std::uint16_t part[8] = {0, 0, 0, 0, 0, 0, 0, 0};   // (AVX2 has no masked 16-bit load)
    for (std::int64_t j = 0; j < count; ++j) part[j] = p[j];
    return load8(part);
}

// The 8 lanes' sum by a fixed tree: lanes j + (j + 4), then pairs 0 + 2 and 1 + 3, then the two.
RETRO_GEMV2_TARGET inline float sum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}



// Weight row o against G x rows (G <= 4: 2G accumulators, 2 weight and 2 x registers).
template <int G, typename W_T>
RETRO_GEMV2_TARGET inline void rows_block(const W_T* W, std::int64_t o, std::int64_t O, std::int64_t I, std::int64_t ldw,
                                          const float* x, std::int64_t ldx, float* y, std::int64_t ldy, bool accumulate,
                                          bool prefetch) {
    const std::int64_t tail = I % 8, body8 = I - tail;
    const W_T* w = W + o * ldw;
    if (prefetch && ldw != I && o + 1 + kPrefetchRows <= O)
        prefetch_lines(w + kPrefetchRows * ldw, I * static_cast<std::int64_t>(sizeof(W_T)));
    __m256 a0[G], a1[G];
#pragma GCC unroll 4
    for (int n = 0; n < G; ++n) a0[n] = a1[n] = _mm256_setzero_ps();
    std::int64_t k = 0;
    for (; k + 16 <= I; k += 16) {
        const __m256 w0 = load8(w + k), w1 = load8(w + k + 8);
#pragma GCC unroll 4
        for (int n = 0; n < G; ++n) {
            a0[n] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + n * ldx + k), a0[n]);
            a1[n] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + n * ldx + k + 8), a1[n]);
        }
    }
    if (k < body8) {   // one more 8-column slice
        const __m256 w0 = load8(w + k);
#pragma GCC unroll 4
        for (int n = 0; n < G; ++n) a0[n] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + n * ldx + k), a0[n]);
        k += 8;
    }
    if (tail) {
        const __m256 wt = load8_tail(w + k, tail);
#pragma GCC unroll 4
        for (int n = 0; n < G; ++n) a1[n] = _mm256_fmadd_ps(wt, load8_tail(x + n * ldx + k, tail), a1[n]);
    }
#pragma GCC unroll 4
    for (int n = 0; n < G; ++n) {
        const float s = sum8(_mm256_add_ps(a0[n], a1[n]));
        float& out = y[n * ldy + o];
        out = accumulate ? out + s : s;
    }
}

template <int N, typename W_T>
RETRO_GEMV2_TARGET void rows_n(const W_T* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                               std::int64_t ldx, float* y, std::int64_t ldy, bool accumulate) {
    constexpr int G1 = N <= 4 ? N : 4, G2 = N - G1;
    for (std::int64_t o = 0; o < O; ++o) {
        rows_block<G1>(W, o, O, I, ldw, x, ldx, y, ldy, accumulate, true);
        if constexpr (G2 > 0) rows_block<G2>(W, o, O, I, ldw, x + G1 * ldx, ldx, y + G1 * ldy, ldy, accumulate, false);
    }
}

template <typename W_T>
void rows_any(const W_T* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x, std::int64_t ldx,
              std::int64_t N, float* y, std::int64_t ldy, bool accumulate) {
    gemv_rows_dispatch(N, [&](auto rows) { rows_n<decltype(rows)::value>(W, O, I, ldw, x, ldx, y, ldy, accumulate); });
}

// y[n, c0 + 8z + j] = Σ_i x[n, i] W[i, c0 + 8z + j] for the Z 8-column slices from c0 (the last one's lanes `last`
// only): N x Z <= 8 accumulators, each fed in i order.
template <int N, int Z>
RETRO_GEMV2_TARGET void t_block(const float* W, std::int64_t I, std::int64_t ldw, const float* x, std::int64_t ldx,
                                float* y, std::int64_t ldy, std::int64_t c0, __m256i last, bool strided) {
    constexpr std::int64_t block_bytes = 32 * Z;
    __m256 acc[N][Z];
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n)
#pragma GCC unroll 4
        for (int z = 0; z < Z; ++z) acc[n][z] = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < I; ++i) {
        const float* w = W + i * ldw + c0;
        if (strided && i + kPrefetchRows < I) prefetch_lines(w + kPrefetchRows * ldw, block_bytes);
        __m256 wz[Z];
#pragma GCC unroll 4
        for (int z = 0; z < Z; ++z) wz[z] = z + 1 < Z ? _mm256_loadu_ps(w + 8 * z) : _mm256_maskload_ps(w + 8 * z, last);
#pragma GCC unroll 8
        for (int n = 0; n < N; ++n) {
            const __m256 xn = _mm256_set1_ps(x[n * ldx + i]);
#pragma GCC unroll 4
            for (int z = 0; z < Z; ++z) acc[n][z] = _mm256_fmadd_ps(xn, wz[z], acc[n][z]);
        }
    }
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n)
#pragma GCC unroll 4
        for (int z = 0; z < Z; ++z) {
            float* out = y + n * ldy + c0 + 8 * z;
            if (z + 1 < Z) _mm256_storeu_ps(out, acc[n][z]);
            else _mm256_maskstore_ps(out, last, acc[n][z]);
        }
}

// Column blocks of 32 for 1-2 rows, 16 for 3-4, 8 for 5-8 (at most 8 accumulators); the columns left go 8 at a time,
// the last slice masked.
template <int N>
RETRO_GEMV2_TARGET void t_rows_n(const float* W, std::int64_t I, std::int64_t O, std::int64_t ldw, const float* x,
                                 std::int64_t ldx, float* y, std::int64_t ldy) {
    constexpr int Z = N <= 2 ? 4 : N <= 4 ? 2 : 1;
    const bool strided = ldw != O;
    std::int64_t c = 0;
    for (; c + 8 * Z <= O; c += 8 * Z) t_block<N, Z>(W, I, ldw, x, ldx, y, ldy, c, lanes_below(8), strided);
    for (; c < O; c += 8) t_block<N, 1>(W, I, ldw, x, ldx, y, ldy, c, lanes_below(O - c < 8 ? O - c : 8), strided);
}

void t_rows_any(const float* W, std::int64_t I, std::int64_t O, std::int64_t ldw, const float* x, std::int64_t ldx,
                std::int64_t N, float* y, std::int64_t ldy) {
    gemv_rows_dispatch(N, [&](auto rows) { t_rows_n<decltype(rows)::value>(W, I, O, ldw, x, ldx, y, ldy); });
}

#undef RETRO_GEMV2_TARGET

}  // namespace

bool gemv_avx2_available() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return yes;
}

void gemv_rows_avx2(const float* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x, std::int64_t ldx,
                    std::int64_t N, float* y, std::int64_t ldy, bool accumulate) {
    RETRO_CHECK(gemv_avx2_available(), "gemv_rows_avx2 called on a CPU without AVX2 and FMA");
    rows_any(W, O, I, ldw, x, ldx, N, y, ldy, accumulate);
}

void gemv_rows_bf16_avx2(const std::uint16_t* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                         std::int64_t ldx, std::int64_t N, float* y, std::int64_t ldy, bool accumulate) {
    RETRO_CHECK(gemv_avx2_available(), "gemv_rows_bf16_avx2 called on a CPU without AVX2 and FMA");
    rows_any(W, O, I, ldw, x, ldx, N, y, ldy, accumulate);
}

void gemv_t_rows_avx2(const float* W, std::int64_t I, std::int64_t O, std::int64_t ldw, const float* x, std::int64_t ldx,
                      std::int64_t N, float* y, std::int64_t ldy) {
    RETRO_CHECK(gemv_avx2_available(), "gemv_t_rows_avx2 called on a CPU without AVX2 and FMA");
    t_rows_any(W, I, O, ldw, x, ldx, N, y, ldy);
}

#else

bool gemv_avx2_available() { return false; }

void gemv_rows_avx2(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, std::int64_t,
                    float*, std::int64_t, bool) {
    RETRO_CHECK(false, "gemv_rows_avx2 is not built for this CPU");
}

void gemv_rows_bf16_avx2(const std::uint16_t*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t,
                         std::int64_t, float*, std::int64_t, bool) {
    RETRO_CHECK(false, "gemv_rows_bf16_avx2 is not built for this CPU");
}

void gemv_t_rows_avx2(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, std::int64_t,
                      float*, std::int64_t) {
    RETRO_CHECK(false, "gemv_t_rows_avx2 is not built for this CPU");
}

#endif

}  // namespace retro::nn
