// Implementation of gemv_avx512.h.
#include "nn/gemv_avx512.h"

#include "core/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace retro::nn {

#if defined(__x86_64__) && defined(__GNUC__)

namespace {

// GCC 12's _mm512_reduce_add_ps builds its shuffles from deliberately undefined vectors and warns.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// One row at a time, so W is read as one sequential stream (rows are contiguous when ldw = I): the hardware
// prefetcher keeps up with one stream, not with 8 interleaved ones (measured on the dev box, an AVX-512 AMD EPYC:
// 18-20 GB/s one row at a time, 12.5 GB/s reading 8 rows together, 7-8 GB/s for 2, OpenBLAS sgemv 10.3 GB/s, a
// plain read 20-22 GB/s; docs/performance.md "Session 34"). Two accumulators break the FMA chain.
__attribute__((target("avx512f"))) void gemv_rows_impl(const float* W, std::int64_t O, std::int64_t I,
                                                        std::int64_t ldw, const float* x, float* y, bool accumulate) {
    for (std::int64_t o = 0; o < O; ++o) {
        const float* w = W + o * ldw;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        std::int64_t k = 0;
        for (; k + 32 <= I; k += 32) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k), _mm512_loadu_ps(x + k), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k + 16), _mm512_loadu_ps(x + k + 16), a1);
        }
        if (k + 16 <= I) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + k), _mm512_loadu_ps(x + k), a0);
            k += 16;
        }
        if (k < I) {
            const __mmask16 m = static_cast<__mmask16>((1u << (I - k)) - 1u);
            a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + k), _mm512_maskz_loadu_ps(m, x + k), a1);
        }
        const float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
        y[o] = accumulate ? y[o] + s : s;
    }
}

// 16 bf16 values as fp32: zero-extend to 32 bits and shift into the high half (exact).
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 load_bf16(const std::uint16_t* p) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 load_bf16_masked(const std::uint16_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void gemv_rows_bf16_impl(const std::uint16_t* W, std::int64_t O,
                                                                             std::int64_t I, std::int64_t ldw,
                                                                             const float* x, float* y, bool accumulate) {
    for (std::int64_t o = 0; o < O; ++o) {
        const std::uint16_t* w = W + o * ldw;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        std::int64_t k = 0;
        for (; k + 32 <= I; k += 32) {
            a0 = _mm512_fmadd_ps(load_bf16(w + k), _mm512_loadu_ps(x + k), a0);
            a1 = _mm512_fmadd_ps(load_bf16(w + k + 16), _mm512_loadu_ps(x + k + 16), a1);
        }
        if (k + 16 <= I) {
            a0 = _mm512_fmadd_ps(load_bf16(w + k), _mm512_loadu_ps(x + k), a0);
            k += 16;
        }
        if (k < I) {
            const __mmask16 m = static_cast<__mmask16>((1u << (I - k)) - 1u);
            a1 = _mm512_fmadd_ps(load_bf16_masked(w + k, m), _mm512_maskz_loadu_ps(m, x + k), a1);
        }
        const float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
        y[o] = accumulate ? y[o] + s : s;
    }
}

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

bool gemv_avx512_available() {
    // the bf16 kernel's masked 16-bit load is AVX-512BW (+VL): every AVX-512 CPU since Skylake-SP has both
    static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vl");
    return yes;
}

void gemv_rows_avx512(const float* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x, float* y,
                      bool accumulate) {
    RETRO_CHECK(gemv_avx512_available(), "gemv_rows_avx512 called on a CPU without AVX-512F");
    gemv_rows_impl(W, O, I, ldw, x, y, accumulate);
}

void gemv_rows_bf16_avx512(const std::uint16_t* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                           float* y, bool accumulate) {
    RETRO_CHECK(gemv_avx512_available(), "gemv_rows_bf16_avx512 called on a CPU without AVX-512");
    gemv_rows_bf16_impl(W, O, I, ldw, x, y, accumulate);
}

#else

bool gemv_avx512_available() { return false; }

void gemv_rows_avx512(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, float*, bool) {
    RETRO_CHECK(false, "gemv_rows_avx512 is not built for this CPU");
}

void gemv_rows_bf16_avx512(const std::uint16_t*, std::int64_t, std::int64_t, std::int64_t, const float*, float*, bool) {
    RETRO_CHECK(false, "gemv_rows_bf16_avx512 is not built for this CPU");
}

#endif

}  // namespace retro::nn
