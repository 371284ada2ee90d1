// Exact inner-product k-nearest-neighbour search on the CPU: blocked sgemm (queries x base
// block) followed by a running top-k per query. Threads split the queries and each runs its own
// single-threaded sgemm, so both GEMM and selection use every core (ANCHORS.md §7: FAISS's Flat
// search keeps only one core busy at 2 threads here).
#pragma once
#include <cstdint>

namespace retro {

struct ExactSearchOptions {
    int k = 10;
    std::int64_t base_block = 2048;    // base rows per sgemm
    std::int64_t query_block = 1024;   // query rows per sgemm (lowered so every thread has a block)
    // Optional same-document filter: candidate j is skipped for query i when
    // base_docs[j] == query_docs[i]. Both null = no filter.
    const std::int64_t* query_docs = nullptr;
    const std::int64_t* base_docs = nullptr;
};

// ids[m*k] and scores[m*k], rows sorted by score descending, ties by smaller id; a row with fewer
// than k candidates ends in id -1 and score -inf.
void exact_search_ip(const float* queries, std::int64_t m, const float* base, std::int64_t n, int d,
                     const ExactSearchOptions& opts, std::int64_t* ids, float* scores);

// Measured sgemm rate (GFLOP/s) on this machine for an (m x d) * (d x n) product, the shape of
// one retrieval block, using `threads` threads (each on its own rows, as exact_search_ip does).
double measure_sgemm_gflops(std::int64_t m, std::int64_t n, int d, int threads, double seconds = 1.0);

}  // namespace retro
