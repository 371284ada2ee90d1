// Implementation of gemv_avx512.h.
#include "nn/gemv_avx512.h"
#include "nn/gemv_rows_dispatch.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

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

#define RETRO_GEMV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

// 16 weights from p as fp32: fp32 weights are loaded, bf16 ones zero-extended to 32 bits and shifted into the high
// half (exact). The masked forms read only the lanes of m.
RETRO_GEMV_TARGET inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
RETRO_GEMV_TARGET inline __m512 load16(const std::uint16_t* p) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
RETRO_GEMV_TARGET inline __m512 load16_masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
RETRO_GEMV_TARGET inline __m512 load16_masked(const std::uint16_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}



// Rows ahead that a pair of interleaved weight rows prefetches, a cache line at a time (two streams, which the
// hardware prefetcher follows more slowly than one).
constexpr std::int64_t kPairPrefetchRows = 8;

// B weight rows from o against G x rows: per (weight row, x row) two accumulators (columns 32i + j and 32i + 16 + j;
// see the header for the order), each 32-column slice of the B weight rows loaded once for the G x rows and each x
// slice once for the B weight rows. The sums do not depend on B or G.
template <int G, int B, typename W_T>
RETRO_GEMV_TARGET inline void rows_block(const W_T* W, std::int64_t o, std::int64_t O, std::int64_t I, std::int64_t ldw,
                                         const float* x, std::int64_t ldx, float* y, std::int64_t ldy, bool accumulate) {
    const std::int64_t tail = I % 16, body16 = I - tail;
    const __mmask16 m = static_cast<__mmask16>((1u << tail) - 1u);
    const W_T* w[B];
#pragma GCC unroll 2
    for (int b = 0; b < B; ++b) w[b] = W + (o + b) * ldw;
    if (ldw != I && o + B + kPrefetchRows <= O)   // a KV cache's head slices: the hardware prefetcher misses them
#pragma GCC unroll 2
        for (int b = 0; b < B; ++b) prefetch_lines(w[b] + kPrefetchRows * ldw, I * static_cast<std::int64_t>(sizeof(W_T)));
    const bool ahead = B > 1 && ldw == I && o + B + kPairPrefetchRows <= O;
    __m512 a0[B][G], a1[B][G];
#pragma GCC unroll 2
    for (int b = 0; b < B; ++b)
#pragma GCC unroll 8
        for (int n = 0; n < G; ++n) a0[b][n] = a1[b][n] = _mm512_setzero_ps();
    std::int64_t k = 0;
    for (; k + 32 <= I; k += 32) {
        __m512 w0[B], w1[B];
#pragma GCC unroll 2
        for (int b = 0; b < B; ++b) {
            if (ahead) {
                _mm_prefetch(reinterpret_cast<const char*>(w[b] + kPairPrefetchRows * ldw + k), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(w[b] + kPairPrefetchRows * ldw + k + 16), _MM_HINT_T0);
            }
            w0[b] = load16(w[b] + k);
            w1[b] = load16(w[b] + k + 16);
        }
#pragma GCC unroll 8
        for (int n = 0; n < G; ++n) {
            const __m512 x0 = _mm512_loadu_ps(x + n * ldx + k), x1 = _mm512_loadu_ps(x + n * ldx + k + 16);
#pragma GCC unroll 2
            for (int b = 0; b < B; ++b) {
                a0[b][n] = _mm512_fmadd_ps(w0[b], x0, a0[b][n]);
                a1[b][n] = _mm512_fmadd_ps(w1[b], x1, a1[b][n]);
            }
        }
    }
    if (k < body16) {   // one more 16-column slice
#pragma GCC unroll 8
        for (int n = 0; n < G; ++n) {
            const __m512 x0 = _mm512_loadu_ps(x + n * ldx + k);
#pragma GCC unroll 2
            for (int b = 0; b < B; ++b) a0[b][n] = _mm512_fmadd_ps(load16(w[b] + k), x0, a0[b][n]);
        }
        k += 16;
    }
    if (tail) {
#pragma GCC unroll 8
        for (int n = 0; n < G; ++n) {
            const __m512 x1 = _mm512_maskz_loadu_ps(m, x + n * ldx + k);
#pragma GCC unroll 2
            for (int b = 0; b < B; ++b) a1[b][n] = _mm512_fmadd_ps(load16_masked(w[b] + k, m), x1, a1[b][n]);
        }
    }
#pragma GCC unroll 2
    for (int b = 0; b < B; ++b)
#pragma GCC unroll 8
        for (int n = 0; n < G; ++n) {
            const float s = _mm512_reduce_add_ps(_mm512_add_ps(a0[b][n], a1[b][n]));
            float& out = y[n * ldy + o + b];
            out = accumulate ? out + s : s;
        }
}

// Weight rows in pairs where it pays (measured on the dev box: docs/performance.md "Session 35"): more than 4 x
// rows (each x slice then serves two weight rows: 0.75 loads an FMA where one row at a time needs 1.1), or 4 rows
// of 1024 columns and more (the x rows no longer stay in L1; with fewer x rows the second stream costs more than
// the loads it saves). x rows go in groups of at most 4 (2 x 2 x 4
// accumulators); the second group re-reads the pair from L1. Otherwise one weight row at a time: W one sequential
// stream, all N x rows (2N accumulators).
inline bool pairs_pay(int N, std::int64_t I) { return N > 4 || (N == 4 && I >= 1024); }

template <int N, typename W_T>
RETRO_GEMV_TARGET void rows_n(const W_T* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                              std::int64_t ldx, float* y, std::int64_t ldy, bool accumulate) {
    constexpr int G1 = N <= 4 ? N : 4, G2 = N - G1;
    std::int64_t o = 0;
    if (pairs_pay(N, I))
        for (; o + 2 <= O; o += 2) {
            rows_block<G1, 2>(W, o, O, I, ldw, x, ldx, y, ldy, accumulate);
            if constexpr (G2 > 0) rows_block<G2, 2>(W, o, O, I, ldw, x + G1 * ldx, ldx, y + G1 * ldy, ldy, accumulate);
        }
    for (; o < O; ++o) rows_block<N, 1>(W, o, O, I, ldw, x, ldx, y, ldy, accumulate);
}

template <typename W_T>
void rows_any(const W_T* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x, std::int64_t ldx,
              std::int64_t N, float* y, std::int64_t ldy, bool accumulate) {
    gemv_rows_dispatch(N, [&](auto rows) { rows_n<decltype(rows)::value>(W, O, I, ldw, x, ldx, y, ldy, accumulate); });
}

// y[n, c0 + 16z + j] = Σ_i x[n, i] W[i, c0 + 16z + j] for the Z 16-column slices from c0 (the last one's lanes
// masked by `last`): N x Z accumulators, each fed in i order.
template <int N, int Z>
RETRO_GEMV_TARGET void t_block(const float* W, std::int64_t I, std::int64_t ldw, const float* x, std::int64_t ldx,
                               float* y, std::int64_t ldy, std::int64_t c0, __mmask16 last, bool strided) {
    constexpr std::int64_t block_bytes = 64 * Z;
    __m512 acc[N][Z];
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n)
#pragma GCC unroll 4
        for (int z = 0; z < Z; ++z) acc[n][z] = _mm512_setzero_ps();
    for (std::int64_t i = 0; i < I; ++i) {
        const float* w = W + i * ldw + c0;
        if (strided && i + kPrefetchRows < I) prefetch_lines(w + kPrefetchRows * ldw, block_bytes);
        __m512 wz[Z];
#pragma GCC unroll 4
        for (int z = 0; z < Z; ++z) wz[z] = z + 1 < Z ? _mm512_loadu_ps(w + 16 * z) : _mm512_maskz_loadu_ps(last, w + 16 * z);
#pragma GCC unroll 8
        for (int n = 0; n < N; ++n) {
            const __m512 xn = _mm512_set1_ps(x[n * ldx + i]);
#pragma GCC unroll 4
            for (int z = 0; z < Z; ++z) acc[n][z] = _mm512_fmadd_ps(xn, wz[z], acc[n][z]);
        }
    }
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n)
#pragma GCC unroll 4
        for (int z = 0; z < Z; ++z) {
            float* out = y + n * ldy + c0 + 16 * z;
            if (z + 1 < Z) _mm512_storeu_ps(out, acc[n][z]);
            else _mm512_mask_storeu_ps(out, last, acc[n][z]);
        }
}

// Column blocks of 64 for 1-2 rows, 32 for 3-4, 16 for 5-8 (at most 16 accumulators); the columns left after the
// whole blocks go 16 at a time, the last slice masked.
template <int N>
void t_rows_n(const float* W, std::int64_t I, std::int64_t O, std::int64_t ldw, const float* x, std::int64_t ldx,
              float* y, std::int64_t ldy) {
    constexpr int Z = N <= 2 ? 4 : N <= 4 ? 2 : 1;
    const bool strided = ldw != O;   // a KV cache's head slices: prefetched in software
    std::int64_t c = 0;
    for (; c + 16 * Z <= O; c += 16 * Z) t_block<N, Z>(W, I, ldw, x, ldx, y, ldy, c, static_cast<__mmask16>(0xFFFF), strided);
    for (; c < O; c += 16) {
        const std::int64_t cols = O - c < 16 ? O - c : 16;
        t_block<N, 1>(W, I, ldw, x, ldx, y, ldy, c, static_cast<__mmask16>((1u << cols) - 1u), strided);
    }
}

void t_rows_any(const float* W, std::int64_t I, std::int64_t O, std::int64_t ldw, const float* x, std::int64_t ldx,
                std::int64_t N, float* y, std::int64_t ldy) {
    gemv_rows_dispatch(N, [&](auto rows) { t_rows_n<decltype(rows)::value>(W, I, O, ldw, x, ldx, y, ldy); });
}

#undef RETRO_GEMV_TARGET

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

void gemv_t_rows_avx512(const float* W, std::int64_t I, std::int64_t O, std::int64_t ldw, const float* x,
                        std::int64_t ldx, std::int64_t N, float* y, std::int64_t ldy) {
    RETRO_CHECK(gemv_avx512_available(), "gemv_t_rows_avx512 called on a CPU without AVX-512");
    t_rows_any(W, I, O, ldw, x, ldx, N, y, ldy);
}

void gemv_rows_avx512(const float* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                      std::int64_t ldx, std::int64_t N, float* y, std::int64_t ldy, bool accumulate) {
    RETRO_CHECK(gemv_avx512_available(), "gemv_rows_avx512 called on a CPU without AVX-512");
    rows_any(W, O, I, ldw, x, ldx, N, y, ldy, accumulate);
}

void gemv_rows_bf16_avx512(const std::uint16_t* W, std::int64_t O, std::int64_t I, std::int64_t ldw, const float* x,
                           std::int64_t ldx, std::int64_t N, float* y, std::int64_t ldy, bool accumulate) {
    RETRO_CHECK(gemv_avx512_available(), "gemv_rows_bf16_avx512 called on a CPU without AVX-512");
    rows_any(W, O, I, ldw, x, ldx, N, y, ldy, accumulate);
}

#else

bool gemv_avx512_available() { return false; }

void gemv_t_rows_avx512(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t,
                        std::int64_t, float*, std::int64_t) {
    RETRO_CHECK(false, "gemv_t_rows_avx512 is not built for this CPU");
}

void gemv_rows_avx512(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, std::int64_t,
                      float*, std::int64_t, bool) {
    RETRO_CHECK(false, "gemv_rows_avx512 is not built for this CPU");
}

void gemv_rows_bf16_avx512(const std::uint16_t*, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t,
                           std::int64_t, float*, std::int64_t, bool) {
    RETRO_CHECK(false, "gemv_rows_bf16_avx512 is not built for this CPU");
}

#endif

namespace {
std::string_view gemv_env() {
    const char* env = std::getenv("RETRO_GEMV");
    return env ? env : "";
}
}  // namespace

const GemvKernels* gemv_best_kernels() {
    static const GemvKernels avx512{"avx512", gemv_rows_avx512, gemv_rows_bf16_avx512, gemv_t_rows_avx512};
    static const GemvKernels avx2{"avx2", gemv_rows_avx2, gemv_rows_bf16_avx2, gemv_t_rows_avx2};
    static const GemvKernels* best = gemv_avx512_available() && gemv_env() != "avx2" ? &avx512
                                     : gemv_avx2_available()                         ? &avx2
                                                                                     : nullptr;
    return best;
}

const GemvKernels* gemv_kernels() {
    static const GemvKernels* k = gemv_env() == "blas" ? nullptr : gemv_best_kernels();
    return k;
}

const GemvKernels* gemv_attention_kernels() {
    static const GemvKernels* k = gemv_env() == "linear" ? nullptr : gemv_kernels();
    return k;
}

}  // namespace retro::nn
