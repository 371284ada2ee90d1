// Exact inner-product k-nearest-neighbour search on the CPU: every score s_ij = q_i · x_j, the k
// best per query by (score desc, id asc), with an optional same-document filter applied inside the
// search. Two scan kernels (exact_scan.h): a fused AVX-512 kernel that keeps a tile of scores in
// registers and compares it with the queries' running k-th scores (picked when the CPU has
// AVX-512F), and blocked OpenBLAS sgemm + a SIMD threshold pass (everywhere else).
// Threads split the queries when each gets at least kMinQueriesPerThread of them, else the base
// rows (each thread its own top-k lists, merged at the end), so one query uses every core too.
// The GPU twin is index/exact_search_cuda.h (defined in kernels/exact_search_cuda.cu).
#pragma once
#include <cstdint>

namespace retro {

enum class ExactKernel { AUTO, SGEMM, AVX512 };

struct ExactSearchOptions {
    int k = 10;
    ExactKernel kernel = ExactKernel::AUTO;
    std::int64_t query_block = 0;      // queries per block (0 = the kernel's default)
    std::int64_t base_block = 0;       // sgemm kernel: base rows per sgemm (0 = default)
    // Optional same-document filter: candidate j is skipped for query i when
    // base_docs[j] == query_docs[i]. Both null = no filter.
    const std::int64_t* query_docs = nullptr;
    const std::int64_t* base_docs = nullptr;
};

inline constexpr std::int64_t kMinQueriesPerThread = 64;

// ids[m*k] and scores[m*k], rows sorted by score descending, ties by smaller id; a row with fewer
// than k candidates ends in id -1 and score -inf.
void exact_search_ip(const float* queries, std::int64_t m, const float* base, std::int64_t n, int d,
                     const ExactSearchOptions& opts, std::int64_t* ids, float* scores);

// The kernel AUTO resolves to on this machine, and its name ("avx512" or "sgemm").
ExactKernel exact_kernel_resolve(ExactKernel k);
const char* exact_kernel_name(ExactKernel k);

}  // namespace retro
