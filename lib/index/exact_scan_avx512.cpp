// scan_avx512 (exact_scan.h): fused score + threshold kernel for CPUs with AVX-512F.
// Queries are packed per block into 32-query tiles, laid out [tile][t][32] so one t step is two
// zmm loads. A tile of scores acc[r][h] (12 base rows r x 32 queries) is accumulated in 24 zmm
// registers, acc += q_tile[t] * broadcast(x_{j0+r}[t]) for t = 0..d-1 in order (one fma per step:
// the same sum as a plain fma dot-product loop), then compared with the 32 queries' thresholds
// (their running k-th best score) in 24 compares. Only a set mask bit goes to the scalar top-k
// update. The base tile (12 consecutive rows, contiguous in memory) is read in place; the packed
// query block (query_block x d floats, ~512 KiB) stays in L2 while the base streams past once.
// Per t step: 24 FMAs, 2 loads, 12 broadcasts: FMA-bound on two FMA ports.
#include "index/exact_scan.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#define RETRO_HAVE_AVX512_KERNEL 1
#include <immintrin.h>

#include "core/transpose_avx512.h"
#endif

namespace retro {

#ifdef RETRO_HAVE_AVX512_KERNEL
namespace {

#define AVX512_FN __attribute__((target("avx512f")))

constexpr int QT = 32;   // queries per tile (two zmm)
constexpr int RT = 12;   // base rows per tile: 24 accumulators

struct AlignedFree {
    void operator()(float* p) const { std::free(p); }
};
using AlignedBuf = std::unique_ptr<float[], AlignedFree>;
AlignedBuf aligned_floats(std::int64_t n) {
    std::size_t bytes = (static_cast<std::size_t>(n) * sizeof(float) + 63) / 64 * 64;
    return AlignedBuf(static_cast<float*>(std::aligned_alloc(64, std::max<std::size_t>(bytes, 64))));
}

// One query block's state.
struct Block {
    const ScanJob* job;
    const float* packed;   // [tiles][d][32]
    float* thr;            // [tiles*32]: running threshold per query, +inf on padding lanes
    const float* off;      // [tiles*32]: score offset per query (zeros without query_offsets)
    std::int64_t q0;       // first query of the block (index into job)
    std::int64_t qc;       // queries in the block
    std::int64_t tiles;
};

// Rare path: the tile's mask bits, row by row (ids in increasing order for each query).
void tile_update(const Block& b, std::int64_t tile, std::int64_t j0, int rows, const float* acc, const std::uint32_t* mask) {
    const ScanJob& job = *b.job;
    for (int r = 0; r < rows; ++r) {
        std::uint32_t m = mask[r];
        const std::int64_t id = job.base_ids ? job.base_ids[j0 + r] : j0 + r;
        const std::int64_t doc = job.base_docs ? job.base_docs[id] : 0;
        while (m) {
            const int lane = __builtin_ctz(m);
            m &= m - 1;
            const std::int64_t qi = b.q0 + tile * QT + lane;
            if (job.query_docs && job.query_docs[qi] == doc) continue;
            TopK& t = job.tops[qi];
            if (job.base_ids)
                t.push_any(acc[r * QT + lane], id);
            else
                t.push(acc[r * QT + lane], id);
            b.thr[tile * QT + lane] = t.thr;
        }
    }
}

// Self-join path: the scores of a tile offered to the base rows' own lists (lanes in increasing
// query order, so each list sees increasing ids).
void row_side_update(const Block& b, std::int64_t tile, std::int64_t j0, int rows, const float* acc, const std::uint32_t* mask) {
    const ScanJob& job = *b.job;
    for (int r = 0; r < rows; ++r) {
        std::uint32_t m = mask[r];
        const std::int64_t j = j0 + r;
        TopK& t = job.row_tops[j];
        const std::int64_t doc = job.base_docs ? job.base_docs[j] : 0;
        while (m) {
            const int lane = __builtin_ctz(m);
            m &= m - 1;
            const std::int64_t qi = b.q0 + tile * QT + lane;
            if (job.query_docs && job.query_docs[qi] == doc) continue;
            t.push(acc[r * QT + lane], job.query_id0 + qi);
        }
    }
}

// Scores of base rows [j0, j0+R) against every tile of the block. D = d at compile time (0: runtime).
template <int R, int D>
AVX512_FN void rows_kernel(const Block& b, std::int64_t j0) {
    const int d = D ? D : b.job->d;
    const float* x = b.job->base + j0 * d;
    const std::int64_t valid_last = b.qc - (b.tiles - 1) * QT;   // live lanes of the last tile
    const bool any_order = b.job->base_ids != nullptr;   // ids not increasing: a tie may still win
    for (std::int64_t tile = 0; tile < b.tiles; ++tile) {
        const float* q = b.packed + tile * d * QT;
        const __m512 off0 = _mm512_load_ps(b.off + tile * QT), off1 = _mm512_load_ps(b.off + tile * QT + 16);
        __m512 acc[R][2];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][0] = off0, acc[r][1] = off1;
        for (int t = 0; t < d; ++t) {
            const __m512 q0 = _mm512_load_ps(q + t * QT), q1 = _mm512_load_ps(q + t * QT + 16);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) {
                const __m512 xr = _mm512_set1_ps(x[r * d + t]);
                acc[r][0] = _mm512_fmadd_ps(q0, xr, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(q1, xr, acc[r][1]);
            }
        }
        const __m512 th0 = _mm512_load_ps(b.thr + tile * QT), th1 = _mm512_load_ps(b.thr + tile * QT + 16);
        std::uint32_t mask[R];
        std::uint32_t any = 0;
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            if (any_order)
                mask[r] = static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][0], th0, _CMP_GE_OQ)) |
                          static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][1], th1, _CMP_GE_OQ)) << 16;
            else
                mask[r] = static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][0], th0, _CMP_GT_OQ)) |
                          static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][1], th1, _CMP_GT_OQ)) << 16;
            any |= mask[r];
        }
        const std::uint32_t live = tile == b.tiles - 1 && valid_last < QT ? (1u << valid_last) - 1u : ~0u;
        std::uint32_t row_mask[R];
        std::uint32_t row_any = 0;
        if (b.job->row_tops) {   // a self-join: the same scores are the rows' candidates too
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) {
                const __m512 th = _mm512_set1_ps(b.job->row_tops[j0 + r].thr);
                row_mask[r] = (static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][0], th, _CMP_GT_OQ)) |
                               static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][1], th, _CMP_GT_OQ)) << 16) &
                              live;
                row_any |= row_mask[r];
            }
        }
        if (!any && !row_any) continue;
        for (int r = 0; r < R; ++r) mask[r] &= live;
        alignas(64) float out[R * QT];
        for (int r = 0; r < R; ++r) {
            _mm512_store_ps(out + r * QT, acc[r][0]);
            _mm512_store_ps(out + r * QT + 16, acc[r][1]);
        }
        if (any) tile_update(b, tile, j0, R, out, mask);
        if (row_any) row_side_update(b, tile, j0, R, out, row_mask);
    }
}

using RowsFn = void (*)(const Block&, std::int64_t);

// Full tiles with d known at compile time for the common embedding sizes: the 12 broadcasts of a
// step then address one pointer with constant offsets.
RowsFn full_rows_for(int d) {
    switch (d) {
        case 64: return rows_kernel<RT, 64>;
        case 128: return rows_kernel<RT, 128>;
        case 256: return rows_kernel<RT, 256>;
        case 384: return rows_kernel<RT, 384>;
        case 512: return rows_kernel<RT, 512>;
        case 768: return rows_kernel<RT, 768>;
        case 1024: return rows_kernel<RT, 1024>;
        default: return rows_kernel<RT, 0>;
    }
}

template <int... I>
constexpr auto make_tail(std::integer_sequence<int, I...>) {
    return std::array<RowsFn, sizeof...(I)>{rows_kernel<I + 1, 0>...};
}
constexpr auto kTail = make_tail(std::make_integer_sequence<int, RT - 1>{});   // 1..RT-1 rows

// Packs `count` rows of d floats (row-major at src; row i is src row rows[i] when rows is given)
// into [tile][t][32], zero-padded: 16 x 16 in-register transposes (core/transpose_avx512.h).
AVX512_FN void pack_rows(const float* src, std::int64_t count, int d, float* packed, const std::int64_t* rows = nullptr) {
    const std::int64_t tiles = (count + QT - 1) / QT;
    for (std::int64_t tile = 0; tile < tiles; ++tile)
        for (int h = 0; h < QT / 16; ++h) {
            const float* ptr[16];
            for (int j = 0; j < 16; ++j) {
                const std::int64_t i = tile * QT + h * 16 + j;
                ptr[j] = i < count ? src + (rows ? rows[i] : i) * d : nullptr;
            }
            float* dst = packed + tile * d * QT + h * 16;
            for (int t0 = 0; t0 < d; t0 += 16) transpose16x16_avx512(ptr, t0, std::min(16, d - t0), dst + t0 * QT, QT);
        }
}

// The other orientation (scan_avx512_base_tiles): base rows [r0, r0 + rc) packed in 32-row tiles,
// R queries broadcast at a time; each query's threshold is compared with its 32 scores of a tile.
struct BaseBlock {
    const ScanJob* job;
    const float* packed;   // [tiles][d][32]
    std::int64_t r0;       // first base row of the block
    std::int64_t rc;       // rows in the block
    std::int64_t tiles;
};

template <int R, int D>
AVX512_FN void queries_kernel(const BaseBlock& b, std::int64_t q0) {
    const ScanJob& job = *b.job;
    const int d = D ? D : job.d;
    const float* qp[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) qp[r] = job.queries + (job.query_rows ? job.query_rows[q0 + r] : q0 + r) * d;
    const std::int64_t valid_last = b.rc - (b.tiles - 1) * QT;
    const bool any_order = job.base_ids != nullptr;
    for (std::int64_t tile = 0; tile < b.tiles; ++tile) {
        const float* x = b.packed + tile * d * QT;
        __m512 acc[R][2];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
            acc[r][0] = acc[r][1] = job.query_offsets ? _mm512_set1_ps(job.query_offsets[q0 + r]) : _mm512_setzero_ps();
        for (int t = 0; t < d; ++t) {
            const __m512 x0 = _mm512_load_ps(x + t * QT), x1 = _mm512_load_ps(x + t * QT + 16);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) {
                const __m512 qr = _mm512_set1_ps(qp[r][t]);
                acc[r][0] = _mm512_fmadd_ps(x0, qr, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(x1, qr, acc[r][1]);
            }
        }
        const std::uint32_t live = tile == b.tiles - 1 && valid_last < QT ? (1u << valid_last) - 1u : ~0u;
        std::uint32_t mask[R];
        std::uint32_t any = 0;
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const __m512 th = _mm512_set1_ps(job.tops[q0 + r].thr);
            if (any_order)
                mask[r] = static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][0], th, _CMP_GE_OQ)) |
                          static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][1], th, _CMP_GE_OQ)) << 16;
            else
                mask[r] = static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][0], th, _CMP_GT_OQ)) |
                          static_cast<std::uint32_t>(_mm512_cmp_ps_mask(acc[r][1], th, _CMP_GT_OQ)) << 16;
            mask[r] &= live;
            any |= mask[r];
        }
        if (!any) continue;
        alignas(64) float out[QT];
        for (int r = 0; r < R; ++r) {
            std::uint32_t m = mask[r];
            if (!m) continue;
            _mm512_store_ps(out, acc[r][0]);
            _mm512_store_ps(out + 16, acc[r][1]);
            const std::int64_t qi = q0 + r;
            TopK& top = job.tops[qi];
            while (m) {   // lanes in increasing row order
                const int lane = __builtin_ctz(m);
                m &= m - 1;
                const std::int64_t row = b.r0 + tile * QT + lane;
                const std::int64_t id = job.base_ids ? job.base_ids[row] : row;
                if (job.query_docs && job.base_docs && job.base_docs[id] == job.query_docs[qi]) continue;
                if (any_order)
                    top.push_any(out[lane], id);
                else
                    top.push(out[lane], id);
            }
        }
    }
}

using QueriesFn = void (*)(const BaseBlock&, std::int64_t);

QueriesFn full_queries_for(int d) {
    switch (d) {
        case 64: return queries_kernel<RT, 64>;
        case 128: return queries_kernel<RT, 128>;
        case 256: return queries_kernel<RT, 256>;
        case 384: return queries_kernel<RT, 384>;
        case 512: return queries_kernel<RT, 512>;
        case 768: return queries_kernel<RT, 768>;
        case 1024: return queries_kernel<RT, 1024>;
        default: return queries_kernel<RT, 0>;
    }
}

template <int... I>
constexpr auto make_queries_tail(std::integer_sequence<int, I...>) {
    return std::array<QueriesFn, sizeof...(I)>{queries_kernel<I + 1, 0>...};
}
constexpr auto kQueriesTail = make_queries_tail(std::make_integer_sequence<int, RT - 1>{});

}  // namespace

bool scan_avx512_available() { return __builtin_cpu_supports("avx512f"); }

void scan_avx512(const ScanJob& job, std::int64_t query_block) {
    if (job.qn == 0 || job.b1 <= job.b0) return;
    const int d = job.d;
    // default: the packed block fills ~512 KiB of L2
    std::int64_t qb = query_block > 0 ? query_block : (512 * 1024 / 4) / d;
    qb = std::max<std::int64_t>(QT, qb / QT * QT);
    qb = std::min(qb, (job.qn + QT - 1) / QT * QT);
    AlignedBuf packed = aligned_floats(qb * d), thr = aligned_floats(qb), off = aligned_floats(qb);
    const RowsFn full = full_rows_for(d);
    for (std::int64_t q0 = 0; q0 < job.qn; q0 += qb) {
        Block b{&job, packed.get(), thr.get(), off.get(), q0, std::min(qb, job.qn - q0), 0};
        b.tiles = (b.qc + QT - 1) / QT;
        if (job.query_rows)
            pack_rows(job.queries, b.qc, d, packed.get(), job.query_rows + q0);
        else
            pack_rows(job.queries + q0 * d, b.qc, d, packed.get());
        for (std::int64_t i = 0; i < b.tiles * QT; ++i) {
            thr[i] = i < b.qc ? job.tops[q0 + i].thr : __builtin_inff();
            off[i] = i < b.qc && job.query_offsets ? job.query_offsets[q0 + i] : 0.0f;
        }
        std::int64_t j0 = job.b0;
        for (; j0 + RT <= job.b1; j0 += RT) full(b, j0);
        if (j0 < job.b1) kTail[static_cast<std::size_t>(job.b1 - j0 - 1)](b, j0);
    }
}

void scan_avx512_base_tiles(const ScanJob& job) {
    if (job.qn == 0 || job.b1 <= job.b0) return;
    const int d = job.d;
    std::int64_t rb = (512 * 1024 / 4) / d;   // a packed block of base rows fills ~512 KiB of L2
    rb = std::max<std::int64_t>(QT, rb / QT * QT);
    rb = std::min(rb, (job.b1 - job.b0 + QT - 1) / QT * QT);
    AlignedBuf packed = aligned_floats(rb * d);
    const QueriesFn full = full_queries_for(d);
    for (std::int64_t r0 = job.b0; r0 < job.b1; r0 += rb) {
        BaseBlock b{&job, packed.get(), r0, std::min(rb, job.b1 - r0), 0};
        b.tiles = (b.rc + QT - 1) / QT;
        pack_rows(job.base + r0 * d, b.rc, d, packed.get());
        std::int64_t q0 = 0;
        for (; q0 + RT <= job.qn; q0 += RT) full(b, q0);
        if (q0 < job.qn) kQueriesTail[static_cast<std::size_t>(job.qn - q0 - 1)](b, q0);
    }
}

#else
bool scan_avx512_available() { return false; }
void scan_avx512(const ScanJob&, std::int64_t) {}
void scan_avx512_base_tiles(const ScanJob&) {}
#endif

}  // namespace retro
