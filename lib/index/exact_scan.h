// The two scan kernels behind exact_search_ip (exact_search.h): each adds base rows [b0, b1) to
// the running top-k of a range of queries. Scores are s_ij = q_i · x_j (fp32, summed over the
// dimension in order). A candidate j is skipped when base_docs[j] == query_docs[i].
//   scan_sgemm:  OpenBLAS sgemm of a (queries x base) block into memory, then a SIMD threshold
//                pass over it; portable.
//   scan_avx512: fused AVX-512 kernel: a 32-query x 12-row tile of scores stays in registers and
//                is compared against the 32 queries' thresholds at once, so scores never touch
//                memory and the base is read in place (no packing). Needs AVX-512F at run time.
// The same kernels scan IVF lists (ivf_search.h): rows then carry their own ids (`base_ids`, in no
// particular order, so an equal score competes on its id) and a query may start from an offset
// (`query_offsets`: IVF-PQ's inner product with the list's centroid).
#pragma once
#include <cstdint>

#include "index/topk.h"

namespace retro {

struct ScanJob {
    const float* queries = nullptr;          // qn x d, row-major
    std::int64_t qn = 0;
    const std::int64_t* query_docs = nullptr;   // qn entries, or null (no filter)
    const float* base = nullptr;             // the whole base, n x d; rows [b0, b1) are scanned
    std::int64_t b0 = 0, b1 = 0;
    const std::int64_t* base_docs = nullptr;    // indexed by global base id, or null
    int d = 0;
    TopK* tops = nullptr;                    // qn running lists
    const std::int64_t* base_ids = nullptr;     // optional: id of base row j (else j); any order
    const float* query_offsets = nullptr;       // optional: qn values added to every score of a query
    // optional (avx512 kernels only): the i-th query's vector is row query_rows[i] of `queries`
    // (IVF buckets read their queries in place); query_docs, tops and offsets stay indexed by i
    const std::int64_t* query_rows = nullptr;
    // optional (scan_avx512 only; a self-join, exact_self_join.h): also offer each score to the base
    // row's own list, row_tops[j], as the candidate query_id0 + i (query ids increase from call to call)
    TopK* row_tops = nullptr;
    std::int64_t query_id0 = 0;
};

void scan_sgemm(const ScanJob& job, std::int64_t query_block, std::int64_t base_block);

bool scan_avx512_available();                       // this CPU has AVX-512F (and the build has the kernel)
void scan_avx512(const ScanJob& job, std::int64_t query_block);
// The same fused kernel the other way round: the base rows are packed into 32-row tiles and the
// queries broadcast 12 at a time, so packing is paid per base row instead of per query. Picked by
// IVF scans whose list is shorter than the queries probing it.
void scan_avx512_base_tiles(const ScanJob& job);

}  // namespace retro
