// scan_sgemm (exact_scan.h): for each (query block x base block), S = Q_blk · X_blkᵀ by OpenBLAS
// sgemm into a buffer, then each row of S against its query's k-th best score. The pass tests 32
// scores at a time with one vector compare-and-or (built for AVX-512F, AVX2 and baseline x86-64,
// picked at load time); only a group holding a score above the threshold is walked one by one.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "index/exact_scan.h"
#include "nn/fast_math.h"

namespace retro {
namespace {

#define SCAN_SIMD_CLONES RETRO_SIMD_CLONES   // (nn/fast_math.h's clone list; this loop only compares)

// Adds row[0..nb) (ids id0..id0+nb, or ids[0..nb) in any order) to t. Helpers are not called in the
// vector loop: GCC does not inline a default-target function into a clone.
SCAN_SIMD_CLONES void scan_row(const float* row, std::int64_t nb, std::int64_t id0, const std::int64_t* ids, TopK& t,
                               std::int64_t qdoc, const std::int64_t* docs) {
    constexpr int W = 32;
    std::int64_t j = 0;
    for (; j < nb; j += W) {
        const int w = static_cast<int>(std::min<std::int64_t>(W, nb - j));
        const float thr = t.thr;
        int any = 0;
        if (w == W) {
            for (int u = 0; u < W; ++u) any |= row[j + u] >= thr;
        } else {
            for (int u = 0; u < w; ++u) any |= row[j + u] >= thr;
        }
        if (!any) continue;
        for (int u = 0; u < w; ++u) {
            const std::int64_t id = ids ? ids[j + u] : id0 + j + u;
            if (row[j + u] < t.thr || (docs && docs[id] == qdoc)) continue;
            if (ids)
                t.push_any(row[j + u], id);
            else
                t.push(row[j + u], id);
        }
    }
}

}  // namespace

void scan_sgemm(const ScanJob& job, std::int64_t query_block, std::int64_t base_block) {
    RETRO_CHECK(job.query_rows == nullptr, "scan_sgemm reads contiguous queries");
    const int d = job.d;
    // (cblas_sgemm takes int sizes: a block is at most 2^30 rows, whatever retro-bench knn's --query-block or
    // --base-block asked for)
    constexpr std::int64_t kMaxBlock = std::int64_t{1} << 30;
    const std::int64_t bq = std::max<std::int64_t>(1, std::min({query_block, job.qn, kMaxBlock}));
    const std::int64_t bn = std::max<std::int64_t>(1, std::min({base_block, job.b1 - job.b0, kMaxBlock}));
    if (job.qn == 0 || job.b1 <= job.b0) return;
    std::vector<float> block(static_cast<std::size_t>(bq * bn));
    for (std::int64_t q0 = 0; q0 < job.qn; q0 += bq) {
        const std::int64_t qc = std::min(bq, job.qn - q0);
        for (std::int64_t j0 = job.b0; j0 < job.b1; j0 += bn) {
            const std::int64_t nb = std::min(bn, job.b1 - j0);
            // block[qc x nb] = Q[q0:q0+qc] * X[j0:j0+nb]^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(qc), static_cast<int>(nb), d, 1.0f,
                        job.queries + q0 * d, d, job.base + j0 * d, d, 0.0f, block.data(), static_cast<int>(nb));
            for (std::int64_t i = 0; i < qc; ++i) {
                float* row = block.data() + i * nb;
                if (job.query_offsets)
                    for (std::int64_t j = 0; j < nb; ++j) row[j] += job.query_offsets[q0 + i];
                scan_row(row, nb, j0, job.base_ids ? job.base_ids + j0 : nullptr, job.tops[q0 + i],
                         job.query_docs ? job.query_docs[q0 + i] : -1, job.base_docs);
            }
        }
    }
}

}  // namespace retro
