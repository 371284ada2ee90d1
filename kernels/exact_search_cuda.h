// Exact inner-product k-NN on the GPU, the twin of lib/index/exact_search.h: per (query block x
// base block) cuBLAS sgemm writes S = Q_blk · X_blkᵀ (fp32, no TF32), then a top-k kernel merges
// each row of S into the query's running k best with the same rules as the CPU: order by
// (score desc, id asc), skip base_docs[j] == query_docs[i], pad with id -1 / score -inf.
// Scores can differ from the CPU's in the last bits (another summation order), so ids can differ
// where scores tie within that.
// provides: CudaExactSearch (the base kept on the device across calls), exact_search_ip_cuda,
//           kCudaExactMaxK, cuda_sgemm_gflops (the cuBLAS rate exact search is measured against).
//           Host pointers in and out. UserError when built without CUDA.
#pragma once
#include <cstdint>
#include <memory>

#include "index/exact_search.h"

namespace retro {

inline constexpr int kCudaExactMaxK = 128;

class CudaExactSearch {
public:
    // Uploads base (n x d) and, when not null, base_docs (n) to device 0.
    CudaExactSearch(const float* base, std::int64_t n, int d, const std::int64_t* base_docs);
    ~CudaExactSearch();
    CudaExactSearch(const CudaExactSearch&) = delete;
    CudaExactSearch& operator=(const CudaExactSearch&) = delete;

    // ids/scores (m x k) of queries (m x d); query_docs (m) is used when the base has docs.
    // Blocks: queries per sgemm (0 = up to 4096), base rows per sgemm (0 = a 256 MiB score block).
    void search(const float* queries, std::int64_t m, const std::int64_t* query_docs, int k, std::int64_t* ids,
                float* scores, std::int64_t query_block = 0, std::int64_t base_block = 0);

    struct State;

private:
    std::unique_ptr<State> s_;
};

// One-shot form with exact_search_ip's signature (opts.k, the doc filter and the two block sizes
// are used; opts.kernel is not).
void exact_search_ip_cuda(const float* queries, std::int64_t m, const float* base, std::int64_t n, int d,
                          const ExactSearchOptions& opts, std::int64_t* ids, float* scores);

// GFLOP/s of cuBLAS fp32 sgemm (pedantic math, no TF32) for S (m x n) = A (m x d) · B (n x d)^T on
// device 0, the shape of one exact-search score block; best of 5 after a warm-up, pseudo-random data.
double cuda_sgemm_gflops(std::int64_t m, std::int64_t n, int d);

}  // namespace retro
