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

constexpr int kRows = 8;   // rows read together: 8 accumulators, 8 load streams

// Rows [o0, o0 + R) of W (R = kRows, or 1 for the leftover rows); `next` is the first row of the group after it
// (prefetched as this one is read), or null.
template <int R>
__attribute__((target("avx512f"))) inline void rows_dot(const float* W, std::int64_t o0, std::int64_t I,
                                                         std::int64_t ldw, const float* x, float* y, bool accumulate,
                                                         const float* next) {
    __m512 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    const float* w = W + o0 * ldw;
    std::int64_t k = 0;
    for (; k + 16 <= I; k += 16) {
        const __m512 xv = _mm512_loadu_ps(x + k);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w + r * ldw + k), xv, acc[r]);
            // one 64-byte line of the next group's row r per 16 columns read: the group after arrives as this one
            // is summed
            if (next) _mm_prefetch(reinterpret_cast<const char*>(next + r * ldw + k), _MM_HINT_T0);
        }
    }
    if (k < I) {
        const __mmask16 m = static_cast<__mmask16>((1u << (I - k)) - 1u);
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + r * ldw + k), xv, acc[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        const float s = _mm512_reduce_add_ps(acc[r]);
        y[o0 + r] = accumulate ? y[o0 + r] + s : s;
    }
}

__attribute__((target("avx512f"))) void gemv_rows_impl(const float* W, std::int64_t O, std::int64_t I,
                                                        std::int64_t ldw, const float* x, float* y, bool accumulate) {
    std::int64_t o = 0;
    for (; o + kRows <= O; o += kRows)
        rows_dot<kRows>(W, o, I, ldw, x, y, accumulate, o + 2 * kRows <= O ? W + (o + kRows) * ldw : nullptr);
    for (; o < O; ++o) rows_dot<1>(W, o, I, ldw, x, y, accumulate, nullptr);
}

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

bool gemv_avx512_available() {
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
}

void gemv_rows_avx512(const float* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x, float* y,
                      bool accumulate) {
    RETRO_CHECK(gemv_avx512_available(), "gemv_rows_avx512 called on a CPU without AVX-512F");
    gemv_rows_impl(W, O, I, ldw, x, y, accumulate);
}

#else

bool gemv_avx512_available() { return false; }

void gemv_rows_avx512(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, float*, bool) {
    RETRO_CHECK(false, "gemv_rows_avx512 is not built for this CPU");
}

#endif

}  // namespace retro::nn
