// An in-register 16 x 16 float transpose for AVX-512F kernels that pack rows into column panels
// (the fused attention's K, the exact/IVF scan's 32-row tiles): dst[i * ld_dst + j] = rows[j][t0 + i]
// for j < 16 and i < cols (at most 16). A null row reads as zeros. Unpack ps, unpack pd, then two
// rounds of 128-bit lane shuffles: 16 loads, 64 shuffles, `cols` stores for 256 floats.
// Callers compile it inside a target("avx512f") function on CPUs that have AVX-512F.
#pragma once
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>

namespace retro {

// GCC 12's avx512fintrin.h builds the unpacks from deliberately undefined vectors and warns.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) inline void transpose16x16_avx512(const float* const* rows, int t0, int cols, float* dst,
                                                                      std::int64_t ld_dst) {
    const __mmask16 tm = static_cast<__mmask16>(cols >= 16 ? 0xFFFF : (1u << cols) - 1u);
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = rows[i] ? _mm512_maskz_loadu_ps(tm, rows[i] + t0) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * i + 2]), e = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
    }
    // r[4i + c], 128-bit lane L: column 4L + c of rows 4i .. 4i+3
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
        const __m512 u0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44), u1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xEE);
        const __m512 u2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44), u3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xEE);
        t[c] = _mm512_shuffle_f32x4(u0, u2, 0x88);
        t[4 + c] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
        t[8 + c] = _mm512_shuffle_f32x4(u1, u3, 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
        if (i < cols) _mm512_storeu_ps(dst + i * ld_dst, t[i]);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace retro
#endif
