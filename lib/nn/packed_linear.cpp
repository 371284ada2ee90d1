// PackedLinear (packed_linear.h). AVX-512 path, for one call on `rows` rows (BLIS loop order, W
// packed once at construction into panels [out/48][in][48]):
//   for each block of MC = 192 rows of x
//     for each K block of at most 384 columns of x:        pack x -> [tiles][kc][8] (288 KiB, L2)
//       for each block of W panels (<= 576 KiB, L2):
//         for each 8-row tile:                              its x strip (kc x 8, 12 KiB) stays in L1
//           for each 48-column panel of the block:          y tile (8 x 48) in 24 zmm accumulators
// Per k step the kernel loads 3 zmm of W (prefetched 8 steps ahead: the W block streams from L2),
// broadcasts 8 floats of x from L1 and issues 24 FMAs: bound by the two FMA ports. The first K block
// starts the accumulators from the bias, later ones from y; the last one applies the epilogue to
// the tile while it is in L1.
//
// Why 8 x 48 and this order (measured on Ice Lake, docs/performance.md "retro-bench embed"): with the
// same packing, 12 x 32 and 14 x 32 tiles (12-14 broadcasts per 24 FMAs) ran at 82-85 % of the FMA
// peak in cache against 95 % for 8 x 48, and holding the W panel in L1 while x strips stream from L2
// (Goto order) lost to OpenBLAS on the wide (1152- and 1536-column) layers. The W prefetch is worth
// ~7 % of a MiniLM forward; K blocks of 256/512, x blocks of 48..384 rows and W blocks of 288-864 KiB
// measured within noise of these choices (192 rows slightly ahead of 96).
#include "nn/packed_linear.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/error.h"
#include "nn/fast_math.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define RETRO_HAVE_PACKED_LINEAR_AVX512 1
#include <immintrin.h>
#endif

namespace retro::nn {

namespace {

constexpr int MR = 8;                      // rows per tile
constexpr int NR = 48;                     // output columns per panel (three zmm)
constexpr int KC_MAX = 384;                // K block
constexpr int MC = 192;                    // rows per x block (24 tiles)
constexpr int W_BLOCK_FLOATS = 147456;     // 576 KiB of packed W per L2 block
constexpr int W_PREFETCH_STEPS = 8;        // k steps ahead

std::atomic<bool> g_avx512_allowed{true};   // set_avx512_allowed

float* aligned_floats(std::int64_t n) {
    std::size_t bytes = (static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(float) + 63) / 64 * 64;
    float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!p) throw std::bad_alloc();
    return p;
}

}  // namespace

void PackedLinear::Free::operator()(float* p) const { std::free(p); }

RETRO_FAST_MATH_BEGIN

namespace {

RETRO_ALWAYS_INLINE float gelu_erf_one(float v) { return 0.5f * v * (1.0f + fast_erf(v * 0.70710678118654752f)); }

RETRO_SIMD_CLONES void gelu_erf_loop(float* x, std::int64_t n) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) x[i] = gelu_erf_one(x[i]);
}

#ifdef RETRO_HAVE_PACKED_LINEAR_AVX512
#define RETRO_AVX512 __attribute__((target("avx512f")))

RETRO_AVX512 void gelu_erf_row(float* c, int n) {
#pragma omp simd
    for (int j = 0; j < n; ++j) c[j] = gelu_erf_one(c[j]);
}

RETRO_AVX512 __mmask16 column_mask(int cols, int v) {
    const int n = cols - 16 * v;
    return static_cast<__mmask16>(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1u);
}

// acc[r][v] += x[r] · w[16v .. 16v + 16) for one k step (w: 48 floats, aligned; x: 8 floats).
RETRO_AVX512 RETRO_ALWAYS_INLINE void fma_step(__m512 (&acc)[MR][3], const float* w, const float* x) {
    const __m512 w0 = _mm512_load_ps(w), w1 = _mm512_load_ps(w + 16), w2 = _mm512_load_ps(w + 32);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
        const __m512 xr = _mm512_set1_ps(x[r]);
        acc[r][0] = _mm512_fmadd_ps(xr, w0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(xr, w1, acc[r][1]);
        acc[r][2] = _mm512_fmadd_ps(xr, w2, acc[r][2]);
    }
}

// One 8 x 48 tile of y over one K block. xs: the tile's packed x strip [kc][8]; wp: the panel's K
// block [kc][48] (64-byte aligned); c: y at the tile's first element (row stride ldc); rows <= 8
// and cols <= 48 of the tile are real. bias != null: first K block, start from the (zero-padded,
// aligned) bias; else continue from c. gelu: apply the epilogue after the last K block.
RETRO_AVX512 void tile_kernel(const float* xs, const float* wp, int kc, float* c, std::int64_t ldc, int rows, int cols,
                              const float* bias, bool gelu) {
    const __mmask16 m0 = column_mask(cols, 0), m1 = column_mask(cols, 1), m2 = column_mask(cols, 2);
    __m512 acc[MR][3];
    if (bias) {
        const __m512 b0 = _mm512_load_ps(bias), b1 = _mm512_load_ps(bias + 16), b2 = _mm512_load_ps(bias + 32);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) acc[r][0] = b0, acc[r][1] = b1, acc[r][2] = b2;
    } else {
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            if (r < rows) {
                const float* cr = c + r * ldc;
                acc[r][0] = _mm512_maskz_loadu_ps(m0, cr);
                acc[r][1] = cols > 16 ? _mm512_maskz_loadu_ps(m1, cr + 16) : _mm512_setzero_ps();
                acc[r][2] = cols > 32 ? _mm512_maskz_loadu_ps(m2, cr + 32) : _mm512_setzero_ps();
            } else {
                acc[r][0] = acc[r][1] = acc[r][2] = _mm512_setzero_ps();
            }
        }
    }
    int k = 0;
    for (; k + W_PREFETCH_STEPS < kc; ++k) {
        const char* ahead = reinterpret_cast<const char*>(wp + (k + W_PREFETCH_STEPS) * NR);
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        _mm_prefetch(ahead + 128, _MM_HINT_T0);
        fma_step(acc, wp + k * NR, xs + k * MR);
    }
    for (; k < kc; ++k) fma_step(acc, wp + k * NR, xs + k * MR);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
        if (r < rows) {
            float* cr = c + r * ldc;
            _mm512_mask_storeu_ps(cr, m0, acc[r][0]);
            if (cols > 16) _mm512_mask_storeu_ps(cr + 16, m1, acc[r][1]);   // (no pointer past a narrow last row)
            if (cols > 32) _mm512_mask_storeu_ps(cr + 32, m2, acc[r][2]);
        }
    }
    if (gelu)
        for (int r = 0; r < rows; ++r) gelu_erf_row(c + r * ldc, cols);
}

// 8 rows x 8 columns of x (row stride ld) -> 8 columns of 8 (dst[k * 8 + r] = x[r][k]).
RETRO_AVX512 void transpose_8x8(const float* x, std::int64_t ld, float* dst) {
    __m256 r[8], t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(x + i * ld);
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);       // r_i0 r_j0 r_i1 r_j1 | r_i4 r_j4 r_i5 r_j5
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);   // r_i2 r_j2 r_i3 r_j3 | r_i6 r_j6 r_i7 r_j7
    }
#pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);       // column 0 | 4 of rows i..i+3
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);   // column 1 | 5
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);   // column 2 | 6
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);   // column 3 | 7
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + i * 8, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * 8, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}

// x rows [0, rows) x columns [0, kc) (row stride ld) -> [tiles][kc][8], rows past `rows` zero.
RETRO_AVX512 void pack_x(const float* x, std::int64_t ld, int rows, int kc, float* dst) {
    const int tiles = (rows + MR - 1) / MR;
    for (int t = 0; t < tiles; ++t) {
        float* d = dst + static_cast<std::int64_t>(t) * kc * MR;
        const float* xt = x + t * MR * ld;
        const int trows = std::min(MR, rows - t * MR);
        int k = 0;
        if (trows == MR)
            for (; k + 8 <= kc; k += 8) transpose_8x8(xt + k, ld, d + k * MR);
        for (; k < kc; ++k)
            for (int r = 0; r < MR; ++r) d[k * MR + r] = r < trows ? xt[r * ld + k] : 0.0f;
    }
}

bool cpu_has_avx512() {
    static const bool yes = __builtin_cpu_supports("avx512f");
    return yes;
}
#else
bool cpu_has_avx512() { return false; }
#endif

}  // namespace

RETRO_FAST_MATH_END

void gelu_erf_inplace(float* x, std::int64_t n) { gelu_erf_loop(x, n); }

bool PackedLinear::avx512_supported() { return cpu_has_avx512(); }
void PackedLinear::set_avx512_allowed(bool allowed) { g_avx512_allowed = allowed; }

PackedLinear::PackedLinear(const float* w, const float* b, int out, int in, bool allow_avx512)
    : out_(out), in_(in), avx512_(allow_avx512 && g_avx512_allowed && avx512_supported()) {
    RETRO_CHECK(out > 0 && in > 0, "PackedLinear of shape [", out, ", ", in, "]");
    const int panels = (out + NR - 1) / NR;
    b_.reset(aligned_floats(static_cast<std::int64_t>(panels) * NR));
    for (int o = 0; o < panels * NR; ++o) b_[o] = b && o < out ? b[o] : 0.0f;
    if (!avx512_) {
        w_.reset(aligned_floats(static_cast<std::int64_t>(out) * in));
        std::memcpy(w_.get(), w, sizeof(float) * static_cast<std::size_t>(out) * in);
        return;
    }
    // panel p, row k, lane j  <-  W[p*48 + j, k] (zero past `out`)
    w_.reset(aligned_floats(static_cast<std::int64_t>(panels) * in * NR));
    for (int p = 0; p < panels; ++p)
        for (int k = 0; k < in; ++k)
            for (int j = 0; j < NR; ++j) {
                const int o = p * NR + j;
                w_[(static_cast<std::int64_t>(p) * in + k) * NR + j] =
                    o < out ? w[static_cast<std::int64_t>(o) * in + k] : 0.0f;
            }
}

void PackedLinear::apply(const float* x, std::int64_t rows, float* y, LinearEpilogue epilogue) const {
    if (rows <= 0) return;
    RETRO_CHECK(w_ != nullptr, "PackedLinear::apply on a default-constructed layer");
    const bool gelu = epilogue == LinearEpilogue::GELU_ERF;
    if (avx512_) {
        apply_packed(x, rows, y, gelu);
        return;
    }
    // y starts as the bias and sgemm adds with beta = 1.
    for (std::int64_t r = 0; r < rows; ++r) std::memcpy(y + r * out_, b_.get(), sizeof(float) * out_);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), out_, in_, 1.0f, x, in_, w_.get(), in_,
                1.0f, y, out_);
    // row by row: a row's bits then depend on neither its place in the call nor the call's row count (a vectorised
    // loop computes its remainder in other bits than its body: nn/gelu.cpp)
    if (gelu)
        for (std::int64_t r = 0; r < rows; ++r) gelu_erf_inplace(y + r * out_, out_);
}

void PackedLinear::apply_packed(const float* x, std::int64_t rows, float* y, bool gelu) const {
#ifdef RETRO_HAVE_PACKED_LINEAR_AVX512
    const int panels = (out_ + NR - 1) / NR;
    const int kc_max = std::min(in_, KC_MAX);
    const int block_panels = std::max(1, W_BLOCK_FLOATS / (kc_max * NR));
    thread_local std::vector<float> xpack;
    const std::size_t need = static_cast<std::size_t>(MC) * kc_max;
    if (xpack.size() < need) xpack.resize(need);
    for (std::int64_t r0 = 0; r0 < rows; r0 += MC) {
        const int mrows = static_cast<int>(std::min<std::int64_t>(MC, rows - r0));
        const int tiles = (mrows + MR - 1) / MR;
        for (int k0 = 0; k0 < in_; k0 += kc_max) {
            const int kc = std::min(kc_max, in_ - k0);
            const bool first = k0 == 0, last = k0 + kc == in_;
            pack_x(x + r0 * in_ + k0, in_, mrows, kc, xpack.data());
            for (int pb = 0; pb < panels; pb += block_panels) {
                const int pe = std::min(panels, pb + block_panels);
                for (int t = 0; t < tiles; ++t) {
                    const int trows = std::min(MR, mrows - t * MR);
                    const float* xs = xpack.data() + static_cast<std::int64_t>(t) * kc * MR;
                    float* yt = y + (r0 + t * MR) * out_;
                    for (int p = pb; p < pe; ++p)
                        tile_kernel(xs, w_.get() + (static_cast<std::int64_t>(p) * in_ + k0) * NR, kc, yt + p * NR, out_,
                                    trows, std::min(NR, out_ - p * NR), first ? b_.get() + p * NR : nullptr,
                                    last && gelu);
                }
            }
        }
    }
#else
    (void)x, (void)rows, (void)y, (void)gelu;
    RETRO_CHECK(false, "PackedLinear: the AVX-512 path is not built");
#endif
}

}  // namespace retro::nn
