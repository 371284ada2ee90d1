// Implementation of simd_dot.h.
#include "index/simd_dot.h"

#include <cstring>

#include "core/dtype.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define RETRO_DOT_AVX512 1
#include <immintrin.h>
#endif

namespace retro {
namespace {

float dot_portable(const float* a, const float* b, int d) {
    float acc[16] = {};
    int t = 0;
    for (; t + 16 <= d; t += 16)
        for (int u = 0; u < 16; ++u) acc[u] += a[t + u] * b[t + u];
    for (int w = 8; w >= 1; w /= 2)
        for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
    float s = acc[0];
    for (; t < d; ++t) s += a[t] * b[t];
    return s;
}

#ifdef RETRO_DOT_AVX512
#define DOT_AVX512 __attribute__((target("avx512f")))
// GCC 12's _mm512_reduce_add_ps reads an _mm256_undefined_ps() and warns about it.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Lanes t..t+15 of a, or the first `rest` of them (the tail), zero elsewhere.
DOT_AVX512 inline __m512 load_tail(const float* a, int rest) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << rest) - 1u), a);
}

DOT_AVX512 float dot_avx512(const float* a, const float* b, int d) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int t = 0;
    for (; t + 64 <= d; t += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + t), _mm512_loadu_ps(b + t), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + t + 16), _mm512_loadu_ps(b + t + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + t + 32), _mm512_loadu_ps(b + t + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + t + 48), _mm512_loadu_ps(b + t + 48), s3);
    }
    for (; t + 16 <= d; t += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + t), _mm512_loadu_ps(b + t), s0);
    if (t < d) s1 = _mm512_fmadd_ps(load_tail(a + t, d - t), load_tail(b + t, d - t), s1);
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

// The 16 lanes of v summed pairwise into 8.
DOT_AVX512 inline __m256 half(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

DOT_AVX512 inline __m512 load_h(const std::uint16_t* x) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}
DOT_AVX512 inline __m512 load_h_tail(const std::uint16_t* x, int rest) {   // (16-bit masked loads need AVX-512BW)
    alignas(32) std::uint16_t buf[16] = {};
    std::memcpy(buf, x, static_cast<std::size_t>(rest) * 2);
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(buf)));
}

DOT_AVX512 float dot_f16_avx512(const float* q, const std::uint16_t* x, int d) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int t = 0;
    for (; t + 32 <= d; t += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + t), load_h(x + t), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + t + 16), load_h(x + t + 16), s1);
    }
    for (; t + 16 <= d; t += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + t), load_h(x + t), s0);
    if (t < d) s1 = _mm512_fmadd_ps(load_tail(q + t, d - t), load_h_tail(x + t, d - t), s1);
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

// A row's 16 lanes at t as floats (fp32 rows, or fp16 rows widened), and the first `rest` of them.
DOT_AVX512 inline __m512 load_row(const float* x) { return _mm512_loadu_ps(x); }
DOT_AVX512 inline __m512 load_row(const std::uint16_t* x) { return load_h(x); }
DOT_AVX512 inline __m512 load_row_tail(const float* x, int rest) { return load_tail(x, rest); }
DOT_AVX512 inline __m512 load_row_tail(const std::uint16_t* x, int rest) { return load_h_tail(x, rest); }

// q against four rows at once (fp32 or fp16 rows): the HNSW walk's inner loop.
template <typename Row>
DOT_AVX512 void dot4_avx512(const float* q, const Row* x0, const Row* x1, const Row* x2, const Row* x3, int d, float* out) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int t = 0;
    for (; t + 16 <= d; t += 16) {
        const __m512 qv = _mm512_loadu_ps(q + t);
        s0 = _mm512_fmadd_ps(qv, load_row(x0 + t), s0);
        s1 = _mm512_fmadd_ps(qv, load_row(x1 + t), s1);
        s2 = _mm512_fmadd_ps(qv, load_row(x2 + t), s2);
        s3 = _mm512_fmadd_ps(qv, load_row(x3 + t), s3);
    }
    if (t < d) {
        const int rest = d - t;
        const __m512 qv = load_tail(q + t, rest);
        s0 = _mm512_fmadd_ps(qv, load_row_tail(x0 + t, rest), s0);
        s1 = _mm512_fmadd_ps(qv, load_row_tail(x1 + t, rest), s1);
        s2 = _mm512_fmadd_ps(qv, load_row_tail(x2 + t, rest), s2);
        s3 = _mm512_fmadd_ps(qv, load_row_tail(x3 + t, rest), s3);
    }
    // the four sums at once: halve each to 8 lanes, then two rounds of pairwise adds across rows
    const __m256 h01 = _mm256_hadd_ps(half(s0), half(s1)), h23 = _mm256_hadd_ps(half(s2), half(s3));
    const __m256 h = _mm256_hadd_ps(h01, h23);   // per 128-bit half: row0 row1 row2 row3
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

bool use_avx512() {
#ifdef RETRO_DOT_AVX512
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
#else
    return false;
#endif
}

}  // namespace

float dot_f16(const float* q, const std::uint16_t* x, int d) {
#ifdef RETRO_DOT_AVX512
    if (use_avx512()) return dot_f16_avx512(q, x, d);
#endif
    float s = 0;
    for (int t = 0; t < d; ++t) s += q[t] * f16_to_f32(x[t]);
    return s;
}

void dot4_f16(const float* q, const std::uint16_t* x0, const std::uint16_t* x1, const std::uint16_t* x2,
              const std::uint16_t* x3, int d, float* out) {
#ifdef RETRO_DOT_AVX512
    if (use_avx512()) return dot4_avx512(q, x0, x1, x2, x3, d, out);
#endif
    out[0] = dot_f16(q, x0, d);
    out[1] = dot_f16(q, x1, d);
    out[2] = dot_f16(q, x2, d);
    out[3] = dot_f16(q, x3, d);
}

void to_f16(const float* src, std::int64_t n, std::uint16_t* dst) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

float dot_f32(const float* a, const float* b, int d) {
#ifdef RETRO_DOT_AVX512
    if (use_avx512()) return dot_avx512(a, b, d);
#endif
    return dot_portable(a, b, d);
}

void dot4_f32(const float* q, const float* x0, const float* x1, const float* x2, const float* x3, int d, float* out) {
#ifdef RETRO_DOT_AVX512
    if (use_avx512()) return dot4_avx512(q, x0, x1, x2, x3, d, out);
#endif
    out[0] = dot_portable(q, x0, d);
    out[1] = dot_portable(q, x1, d);
    out[2] = dot_portable(q, x2, d);
    out[3] = dot_portable(q, x3, d);
}

}  // namespace retro
