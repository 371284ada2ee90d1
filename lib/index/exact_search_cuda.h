// Exact inner-product k-NN on the GPU, the twin of index/exact_search.h (defined by kernels/exact_search_cuda.cu;
// a CPU-only build names it only under `if constexpr (kCudaBuilt)`, core/cuda_device.h): per (query block x
// base block) cuBLAS sgemm writes S = Q_blk · X_blkᵀ (fp32, no TF32), then a top-k kernel merges each row of S
// into the query's running k best with the same rules as the CPU: order by (score desc, id asc), skip
// base_docs[j] == query_docs[i], pad with id -1 / score -inf. Scores can differ from the CPU's in the last bits
// (another summation order), so ids can differ where scores tie within that. Host pointers in and out; the work
// runs on the caller's stream (core/cuda_device.h: CudaStreamOwner) and each call returns when it is done.
// provides: CudaExactSearch (the base kept on the device across calls), exact_search_ip_cuda, kCudaExactMaxK
#pragma once
#include <cstdint>
#include <memory>

#include "core/cuda_device.h"
#include "index/exact_search.h"

namespace retro {

inline constexpr int kCudaExactMaxK = 128;

class CudaExactSearch {
public:
    // Uploads base (n x d) and, when not null, base_docs (n) to device 0 on `stream`. UserError without a device.
    static std::unique_ptr<CudaExactSearch> upload(const float* base, std::int64_t n, int d,
                                                   const std::int64_t* base_docs, CudaStream stream);
    virtual ~CudaExactSearch() = default;

    // ids/scores (m x k) of queries (m x d); query_docs (m) is used when the base has docs.
    // Runs on `stream`. Blocks: queries per sgemm (0 = up to 4096), base rows per sgemm (0 = a 256 MiB score block).
    virtual void search(const float* queries, std::int64_t m, const std::int64_t* query_docs, int k, std::int64_t* ids,
                        float* scores, CudaStream stream, std::int64_t query_block = 0, std::int64_t base_block = 0) = 0;
};

// One-shot form with exact_search_ip's signature (opts.k, the doc filter and the two block sizes
// are used; opts.kernel is not), on `stream`.
void exact_search_ip_cuda(const float* queries, std::int64_t m, const float* base, std::int64_t n, int d,
                          const ExactSearchOptions& opts, std::int64_t* ids, float* scores, CudaStream stream);

}  // namespace retro
